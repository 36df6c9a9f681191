#include "kjit/reference.hpp"

#include <cmath>

namespace kjit::reference {

std::vector<double> group_norm(const ops::GroupNormProblem& p, const std::vector<float>& x,
                               const float* weight, const float* bias, double eps) {
  const int64_t cg = p.C / p.groups, L = cg * p.S;
  std::vector<double> y(x.size());
  auto at = [&](int64_t n, int64_t c, int64_t s) {
    return p.layout == ops::Layout::NCHW ? (n * p.C + c) * p.S + s : (n * p.S + s) * p.C + c;
  };
  for (int64_t n = 0; n < p.N; ++n) {
    for (int64_t g = 0; g < p.groups; ++g) {
      double sum = 0, m2 = 0;
      for (int64_t c = g * cg; c < (g + 1) * cg; ++c)
        for (int64_t s = 0; s < p.S; ++s) sum += x[at(n, c, s)];
      const double mean = sum / L;
      for (int64_t c = g * cg; c < (g + 1) * cg; ++c)
        for (int64_t s = 0; s < p.S; ++s) m2 += (x[at(n, c, s)] - mean) * (x[at(n, c, s)] - mean);
      const double rstd = 1.0 / std::sqrt(m2 / L + eps);
      for (int64_t c = g * cg; c < (g + 1) * cg; ++c) {
        const double w = weight ? weight[c] : 1.0, b = bias ? bias[c] : 0.0;
        for (int64_t s = 0; s < p.S; ++s) {
          double z = (x[at(n, c, s)] - mean) * rstd * w + b;
          if (p.activation == ops::Activation::SiLU) z = z / (1.0 + std::exp(-z));
          y[at(n, c, s)] = z;
        }
      }
    }
  }
  return y;
}

}  // namespace kjit::reference
