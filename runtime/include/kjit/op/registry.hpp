// Op support: the registry the tools read. An op registers once (its name, the fields of its
// problem, and a parser that turns them into an OpProblem whose specs_for is the op's own); then
// kjit-precompile, its manifests, the --problem short form and kjit-info know the op without any
// edit of theirs. kjit's built-in ops are registered this way (runtime/src/ops/builtin_ops.cpp,
// one line each); a host app calls register_op() for its own before it runs the tools' code.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <cuda.h>

#include "kjit/dtype.hpp"
#include "kjit/op/target.hpp"
#include "kjit/spec.hpp"

namespace kjit {
class Runtime;
}

namespace kjit::op {

// One field's value as a manifest gives it, with the text it was written as (for messages).
struct FieldValue {
  enum class Kind { Integer, Number, Bool, Text, Integers, Other };
  Kind kind = Kind::Other;
  int64_t integer = 0;
  double number = 0;
  bool flag = false;
  std::string text;
  std::vector<int64_t> integers;
  std::string shown;  // as written: 8.5, "64", null, {"n":8}
  // A value that is no field value at all (out of range, an array of non-integers): the rule it
  // breaks, reported by whichever getter reads it.
  std::string problem;
  // An array with an element that is no integer: what integers() reports (the kind is Other).
  std::string element_problem;
};

// A problem's fields. The getters throw Error::invalid(<field>, <rule>) for a missing required
// field or a value of the wrong kind: the message is the rule ("must be an integer, got 8.5"),
// Error::field() names the field, and the tools print "<field>: <rule>".
class Fields {
 public:
  Fields(std::string op, std::map<std::string, FieldValue> values);

  // Throws for the first field not in `known` (a typo such as "group" must not fall back to a
  // default silently), naming it and the fields the op knows.
  void only(std::initializer_list<const char*> known) const;

  bool has(const std::string& name) const { return values_.count(name) != 0; }
  int64_t integer(const std::string& name) const;
  int64_t integer(const std::string& name, int64_t fallback) const;
  std::vector<int64_t> integers(const std::string& name) const;
  std::string text(const std::string& name, const std::string& fallback) const;
  bool flag(const std::string& name, bool fallback) const;
  DType dtype(const std::string& name, DType fallback) const;  // f32, f16, bf16 (any case)
  // Throws Error::invalid(name, rule) (for a rule the op checks itself).
  [[noreturn]] void bad(const std::string& name, const std::string& rule) const;

  const std::string& op() const { return op_; }

 private:
  const FieldValue& require(const std::string& name) const;
  std::string op_;
  std::map<std::string, FieldValue> values_;
};

// One tensor a call reads or writes, for a harness that runs any registered op (kjit-bench
// --problem, the registry's GPU test): it allocates each operand, fills the inputs with random
// normal values, runs the op, and checks the outputs against the op's float64 reference.
struct Operand {
  std::string name;  // "x", "weight", "y"
  DType dtype = DType::F32;
  int64_t elements = 0;
  bool output = false;     // written by the call (poisoned first, then checked)
  float mean = 0, sd = 1;  // an input's random values
};

// Elements of one output the reference computes (a slow reference may check a sample), and
// their float64 values; the check: |out - value| <= atol + rtol * |value|, NaN where NaN.
struct Expected {
  std::vector<int64_t> index;
  std::vector<double> value;
  double atol = 1e-4, rtol = 1e-4;
};

class OpProblem;

// One of autotuning's candidates for a problem: its config's description (what prepare()
// returns for it) and the problem pinned to that config, so that the generic harness checks and
// times it like any problem (kjit-bench --sweep).
struct Candidate {
  std::string config;
  std::unique_ptr<OpProblem> problem;
};

// One problem of an op, parsed.
class OpProblem {
 public:
  virtual ~OpProblem() = default;
  // "<op> <the problem's describe()>".
  virtual std::string describe() const = 0;
  // The op's specs_for: every specialization a call compiles on `t`, for 16-byte aligned
  // pointers or not, with autotuning's candidates or without; none for an empty problem.
  virtual std::vector<Spec> specs_for(const Target& t, bool aligned, bool autotune) const = 0;
  // The problem as a manifest object, {"op": "<name>", <fields>} on one line, that the op's
  // parser reads back to the same problem: what a recording stores (kjit/op/record.hpp). ""
  // (the default) when the op cannot state it; its kernels are then recorded one by one.
  virtual std::string fields_json() const { return {}; }

  // The bench case. Operands in the order run() takes their device pointers.
  virtual std::vector<Operand> operands() const = 0;
  // Prepares what a call loads (compile, autotune, per-stream workspace for `stream`), so that
  // run() compiles nothing and may be captured into a graph. Returns the config it chose.
  virtual std::string prepare(Runtime& rt, bool autotune, CUstream stream) const = 0;
  // Enqueues one call on `stream`.
  virtual void run(Runtime& rt, const std::vector<void*>& ptrs, bool autotune,
                   CUstream stream) const = 0;
  // The float64 reference: `inputs` holds every operand's values as floats (16-bit ones
  // rounded; outputs empty), in operands() order; returns one Expected per output operand, in
  // that order.
  virtual std::vector<Expected> reference(const std::vector<std::vector<float>>& inputs) const = 0;
  // Bytes a call must move at least (inputs read once, outputs written once), for GB/s.
  virtual double min_bytes() const;
  // Autotuning's candidate configs for this problem on `t` with 16-byte aligned operands (the
  // harness's), in the order it times them, each pinned: its prepare() and run() use that config
  // whatever `autotune` says, and its specs_for names that config's kernels. What else an op
  // tunes stays its untuned choice there (Linear-GN-min: the heuristic's GEMM). None (the
  // default) for an op with nothing to choose, or an empty problem; kjit-bench --sweep then
  // refuses the problem.
  virtual std::vector<Candidate> candidates(const Target& t) const;
};

struct OpInfo {
  std::string name;     // "group_norm": the manifest's "op"
  std::string summary;  // one line: what it computes
  std::string fields;   // its fields and defaults, for --list-ops and docs
  // Fields -> problem; throws Error::invalid naming the field for anything it cannot accept.
  std::function<std::unique_ptr<OpProblem>(const Fields&)> parse;
};

// Adds an op. Throws InvalidArgument for an empty name, no parser, or a name already registered.
void register_op(OpInfo op);
// The op named `name`; NotFound listing the registered ops otherwise.
const OpInfo& find_op(const std::string& name);
std::vector<std::string> registered_ops();  // sorted

// The built-in ops' entries (what the registry starts with).
const std::vector<OpInfo>& builtin_ops();

}  // namespace kjit::op
