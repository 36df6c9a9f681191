// float64 CPU reference of LayerNorm / RMSNorm (kjit/ops/layer_norm.hpp): plain loops, slow on
// purpose, for checking.
#pragma once

#include <vector>

#include "kjit/ops/layer_norm.hpp"

namespace kjit::reference {

struct LayerNormResult {
  std::vector<double> y;   // act(norm(s)) in float64
  std::vector<float> sum;  // p.residual: s = x + residual rounded to p.dtype, as the op writes it
};

// x and residual [rows, width] as float values (16-bit ones already rounded to their dtype);
// residual is used when p.residual. weight and bias [width], or null when absent. s is x, or
// x + residual computed in fp32 and rounded once to p.dtype (PyTorch's x + r in that dtype);
// the statistics are float64 over s (biased variance for LayerNorm, mean of squares for RMSNorm).
LayerNormResult layer_norm(const ops::LayerNormProblem& p, const std::vector<float>& x,
                           const std::vector<float>* residual, const float* weight,
                           const float* bias, double eps);

}  // namespace kjit::reference
