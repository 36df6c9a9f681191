// The built-in ops' problems as manifest objects (OpProblem::fields_json), one JSON line each:
// what a recording stores when an op builds a plan (kjit/op/record.hpp), and what the op's
// registered parser reads back to the same problem. Defined beside each op's parser.
#pragma once

#include <string>

#include "json_text.hpp"
#include "kjit/error.hpp"
#include "kjit/op/registry.hpp"

#include "kjit/ops/group_norm.hpp"
#include "kjit/ops/layer_norm.hpp"
#include "kjit/ops/linear_gn_min.hpp"

namespace kjit::ops {

std::string group_norm_problem_json(const GroupNormProblem& p);
std::string linear_gn_min_problem_json(const LinearGnMinProblem& p, LinearBiasAdd bias_add);
std::string layer_norm_problem_json(const LayerNormProblem& p);  // layer_norm or rms_norm

// `json` (one of the objects above) with the "config" field of a problem pinned to a config:
// what the op's parser reads back to the same pinned problem.
inline std::string with_config(std::string json, const std::string& config) {
  json.pop_back();  // the closing brace
  return json + ",\"config\":" + kjit::detail::json_quote(config) + "}";
}

// Options pinned by f's "config" field (none when absent), read by the op's pin_config_text as
// the C ABI and Python read theirs; its errors the field's.
template <class Options>
Options pinned_options(const op::Fields& f) {
  Options o;
  if (!f.has("config")) return o;
  try {
    pin_config_text(f.text("config", ""), &o);
  } catch (const Error& e) {
    if (e.code() != Errc::InvalidArgument) throw;
    f.bad("config", e.what());
  }
  return o;
}

}  // namespace kjit::ops
