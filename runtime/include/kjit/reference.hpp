// float64 CPU references of kjit's ops: the gold standard the tests and kjit-bench check
// against. Slow on purpose (plain loops, double accumulation); for checking, not for serving.
#pragma once

#include <vector>

#include "kjit/ops/group_norm.hpp"
#include "kjit/ops/linear_gn_min.hpp"

namespace kjit::reference {

// x as float values (16-bit inputs already rounded), in p's layout; weight/bias may be null.
std::vector<double> group_norm(const ops::GroupNormProblem& p, const std::vector<float>& x,
                               const float* weight, const float* bias, double eps);

// min over channels of GroupNorm(x W^T + linear_bias) for each listed row of x (the module
// output is out[c, m] = min_m + bias[c]). x: [M, K], w: [N, K] as values (bf16 inputs rounded).
std::vector<double> linear_gn_min_rows(const ops::LinearGnMinProblem& p, const float* x,
                                       const float* w, const float* linear_bias, const float* gamma,
                                       const float* beta, double eps,
                                       const std::vector<int64_t>& rows);

}  // namespace kjit::reference
