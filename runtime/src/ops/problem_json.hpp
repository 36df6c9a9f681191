// The built-in ops' problems as manifest objects (OpProblem::fields_json), one JSON line each:
// what a recording stores when an op builds a plan (kjit/op/record.hpp), and what the op's
// registered parser reads back to the same problem. Defined beside each op's parser.
#pragma once

#include <string>

#include "kjit/ops/group_norm.hpp"
#include "kjit/ops/layer_norm.hpp"
#include "kjit/ops/linear_gn_min.hpp"

namespace kjit::ops {

std::string group_norm_problem_json(const GroupNormProblem& p);
std::string linear_gn_min_problem_json(const LinearGnMinProblem& p, LinearBiasAdd bias_add);
std::string layer_norm_problem_json(const LayerNormProblem& p);  // layer_norm or rms_norm

}  // namespace kjit::ops
