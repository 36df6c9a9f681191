// float64 CPU references of kjit's ops: the gold standard the tests and kjit-bench check
// against. Slow on purpose (plain loops, double accumulation); for checking, not for serving.
#pragma once

#include <vector>

#include "kjit/ops/group_norm.hpp"

namespace kjit::reference {

// x as float values (16-bit inputs already rounded), in p's layout; weight/bias may be null.
std::vector<double> group_norm(const ops::GroupNormProblem& p, const std::vector<float>& x,
                               const float* weight, const float* bias, double eps);

}  // namespace kjit::reference
