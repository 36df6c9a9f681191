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

// Per element of group_norm's output: how far an fp32 kernel may stray from the float64
// reference through the rounding of its group's mean alone, which no fp32 kernel avoids (even a
// correctly rounded mean is off by half an ulp). x - mean then loses relative precision when the
// group's spread is small against its magnitude: two values near 3.0 that differ by 0.005 lose
// ~5e-5 of it. The bound allows a summation error of (1 + log2 L) units in the last place of the
// mean absolute value, scaled by |weight| / sqrt(var + eps) and the activation's largest slope
// (activation_max_slope).
std::vector<double> group_norm_fp32_slack(const ops::GroupNormProblem& p,
                                          const std::vector<float>& x, const float* weight,
                                          double eps);

// min over channels of GroupNorm(x W^T + linear_bias) for each listed row of x (the module
// output is out[c, m] = min_m + bias[c]). x: [M, K], w: [N, K] as values (bf16 inputs rounded).
std::vector<double> linear_gn_min_rows(const ops::LinearGnMinProblem& p, const float* x,
                                       const float* w, const float* linear_bias, const float* gamma,
                                       const float* beta, double eps,
                                       const std::vector<int64_t>& rows);

}  // namespace kjit::reference
