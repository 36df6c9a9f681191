// What kjit-bench measures: one case per (op, shape, dtype), and its result row.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kjit/kjit.hpp"
#include "kjit/op/registry.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/ops/layer_norm.hpp"
#include "kjit/ops/linear_gn_min.hpp"

namespace kjit_bench {

struct Case {
  std::string op;              // "group_norm", "linear_gn_min", "layer_norm" or "rms_norm"
  std::vector<int64_t> shape;  // as PyTorch gives it ([rows, width] for the row norms)
  int64_t groups = 0;          // not for the row norms
  std::string dtype = "f32";
  std::string layout = "nchw";
};

struct Settings {
  int replays = 30;
  bool autotune = false;
  bool check = true;
  int64_t rotate_bytes = int64_t{160} << 20;  // > 2x the 60 MB L2 of an H200
  std::string sweep_filter;  // --sweep: only configs whose description contains this
  bool host_time = true;     // also time the host's side of a call
};

std::vector<Case> default_cases();
std::vector<Case> load_cases(const std::string& path);  // JSON array of case objects
// The problem of a case (throws InvalidArgument for a dtype, layout or shape it cannot be).
kjit::ops::GroupNormProblem group_norm_problem(const Case& c);
kjit::ops::LinearGnMinProblem linear_gn_min_problem(const Case& c);
kjit::ops::LayerNormProblem layer_norm_problem(const Case& c);  // layer_norm or rms_norm
std::string shape_text(const Case& c);

// Runs one case and returns its row (device_us, host_us, bytes, GB/s, error, config, ...).
nlohmann::json run_group_norm(kjit::Runtime& rt, CUstream stream, const Case& c, const Settings& s);
// Every autotune candidate of one GroupNorm case, checked and timed (no host time).
std::vector<nlohmann::json> sweep_group_norm(kjit::Runtime& rt, CUstream stream, const Case& c,
                                             const Settings& s);
// shape = {M, K, N}; dtype "fp32" (strict) or "tf32".
nlohmann::json run_linear_gn_min(kjit::Runtime& rt, CUstream stream, const Case& c,
                                 const Settings& s);
// layer_norm (weight and bias) or rms_norm (weight), shape = {rows, width}.
nlohmann::json run_layer_norm(kjit::Runtime& rt, CUstream stream, const Case& c, const Settings& s);
// The case as its op's registry entry parses it (row norms and Linear-GN-min; the case's own
// checks first).
std::unique_ptr<kjit::op::OpProblem> registered_problem(const Case& c);
// The dtype that problem runs: a prepacked fp32x3 case's is "fp32x3-percall" (the registry's call
// takes no prepacked weight and splits W every time).
std::string registered_dtype(const Case& c);
// Every autotune candidate of one row-norm or Linear-GN-min case (aligned operands), through the
// op registry's candidates, checked and timed.
std::vector<nlohmann::json> sweep_registered(kjit::Runtime& rt, CUstream stream, const Case& c,
                                             const Settings& s);
// Whether a case's op is one of the row norms (no groups).
bool row_norm_op(const std::string& op);

}  // namespace kjit_bench
