#include "kjit/reference.hpp"

#include <algorithm>
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

std::vector<double> group_norm_fp32_slack(const ops::GroupNormProblem& p,
                                          const std::vector<float>& x, const float* weight,
                                          double eps) {
  const int64_t cg = p.C / p.groups, L = cg * p.S;
  const double units = std::ldexp(1.0 + std::log2(static_cast<double>(L)), -24);
  const double slope = p.activation == ops::Activation::SiLU ? 1.1 : 1.0;
  std::vector<double> slack(x.size());
  auto at = [&](int64_t n, int64_t c, int64_t s) {
    return p.layout == ops::Layout::NCHW ? (n * p.C + c) * p.S + s : (n * p.S + s) * p.C + c;
  };
  for (int64_t n = 0; n < p.N; ++n) {
    for (int64_t g = 0; g < p.groups; ++g) {
      double sum = 0, abs_sum = 0, m2 = 0;
      for (int64_t c = g * cg; c < (g + 1) * cg; ++c)
        for (int64_t s = 0; s < p.S; ++s) {
          sum += x[at(n, c, s)];
          abs_sum += std::fabs(x[at(n, c, s)]);
        }
      const double mean = sum / L;
      for (int64_t c = g * cg; c < (g + 1) * cg; ++c)
        for (int64_t s = 0; s < p.S; ++s) m2 += (x[at(n, c, s)] - mean) * (x[at(n, c, s)] - mean);
      const double per_unit_w = slope * units * (abs_sum / L) / std::sqrt(m2 / L + eps);
      for (int64_t c = g * cg; c < (g + 1) * cg; ++c) {
        const double w = weight ? std::fabs(weight[c]) : 1.0;
        for (int64_t s = 0; s < p.S; ++s) slack[at(n, c, s)] = per_unit_w * w;
      }
    }
  }
  return slack;
}

std::vector<double> linear_gn_min_rows(const ops::LinearGnMinProblem& p, const float* x,
                                       const float* w, const float* linear_bias, const float* gamma,
                                       const float* beta, double eps,
                                       const std::vector<int64_t>& rows) {
  std::vector<double> mins, y(static_cast<size_t>(p.N));
  const int64_t cg = p.N / p.G;
  for (int64_t m : rows) {
    for (int64_t c = 0; c < p.N; ++c) {
      double acc = linear_bias ? linear_bias[c] : 0.0;
      for (int64_t k = 0; k < p.K; ++k) acc += static_cast<double>(x[m * p.K + k]) * w[c * p.K + k];
      y[c] = acc;
    }
    double mn = INFINITY;
    for (int64_t g = 0; g < p.G; ++g) {
      double sum = 0, m2 = 0;
      for (int64_t c = g * cg; c < (g + 1) * cg; ++c) sum += y[c];
      const double mean = sum / cg;
      for (int64_t c = g * cg; c < (g + 1) * cg; ++c) m2 += (y[c] - mean) * (y[c] - mean);
      const double rstd = 1.0 / std::sqrt(m2 / cg + eps);
      for (int64_t c = g * cg; c < (g + 1) * cg; ++c)
        mn = std::min(mn, (y[c] - mean) * rstd * gamma[c] + beta[c]);
    }
    mins.push_back(mn);
  }
  return mins;
}

}  // namespace kjit::reference
