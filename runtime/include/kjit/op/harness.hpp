// Op support: run any registered op's problem on the device and check it against its float64
// reference (kjit/op/registry.hpp), the way kjit-bench --problem and the registry's GPU test do.
// A host app uses it to test its own ops over random problems.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kjit/cuda.hpp"
#include "kjit/op/registry.hpp"

namespace kjit::op {

// Every operand of a problem on the device, `sets` times over (rotating sets larger than the L2
// make every timed call read from memory), inputs filled with the operand's random normal values
// (seeded; the same in every set), outputs poisoned with NaN.
class ProblemBuffers {
 public:
  ProblemBuffers(Runtime& rt, const OpProblem& p, int sets, uint64_t seed);
  int sets() const { return static_cast<int>(ptrs_.size()); }
  const std::vector<void*>& ptrs(int set) const { return ptrs_.at(static_cast<size_t>(set)); }
  const std::vector<Operand>& operands() const { return operands_; }
  // The inputs' values (as the device holds them, 16-bit ones rounded); outputs empty.
  const std::vector<std::vector<float>>& inputs() const { return inputs_; }
  // Operand i of `set` read back as floats (the caller synchronizes first).
  std::vector<float> read(int set, size_t i) const;
  void poison_outputs(int set);
  // Sets needed so that together they exceed `bytes` (at least 2).
  static int sets_for(const OpProblem& p, int64_t bytes);

 private:
  std::vector<Operand> operands_;
  std::vector<std::vector<float>> inputs_;
  std::vector<DeviceBuffer> buffers_;  // set-major
  std::vector<std::vector<void*>> ptrs_;
};

struct CheckResult {
  bool ok = false;
  int64_t checked = 0, wrong = 0;
  double max_abs = 0;
  std::string first_wrong;  // "y[12]: 0.5 vs 0.25 (atol 1e-4, rtol 1e-4)"
};

// Poisons set 0's outputs, runs one call on `stream`, waits for it and compares every output
// with the reference (NaN must meet NaN, an infinity the same infinity).
CheckResult check(Runtime& rt, const OpProblem& p, ProblemBuffers& b, bool autotune,
                  CUstream stream);

}  // namespace kjit::op
