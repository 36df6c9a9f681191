// A module loaded into one runtime's context, and the function in it.
#pragma once

#include <cuda.h>

#include <atomic>
#include <string>

namespace kjit::detail {

struct LoadedKernel {
  CUcontext ctx = nullptr;
  CUmodule module = nullptr;
  CUfunction fn = nullptr;
  std::string instantiation, lowered_name;
  int num_regs = 0, max_threads = 0;
  int static_smem = 0;
  // Raised lazily by launch(); atomics so concurrent launchers set each attribute once or twice,
  // never wrongly.
  mutable std::atomic<unsigned> smem_limit{48 * 1024};
  mutable std::atomic<bool> nonportable_cluster{false};
};

}  // namespace kjit::detail
