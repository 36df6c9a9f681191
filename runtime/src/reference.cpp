#include "kjit/reference.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "kjit/error.hpp"

namespace kjit::reference {

namespace {

int64_t index(const ops::GroupNormProblem& p, int64_t n, int64_t c, int64_t s) {
  return p.layout == ops::Layout::NCHW ? (n * p.C + c) * p.S + s : (n * p.S + s) * p.C + c;
}

struct GroupStats {
  double mean, var, mean_abs;
};

// Two-pass statistics of group g of sample n, in float64.
GroupStats group_stats(const ops::GroupNormProblem& p, const std::vector<float>& x, int64_t n,
                       int64_t g) {
  const int64_t cg = p.C / p.groups, L = cg * p.S;
  double sum = 0, abs_sum = 0, m2 = 0;
  for (int64_t c = g * cg; c < (g + 1) * cg; ++c)
    for (int64_t s = 0; s < p.S; ++s) {
      sum += x[index(p, n, c, s)];
      abs_sum += std::fabs(x[index(p, n, c, s)]);
    }
  const double mean = sum / L;
  for (int64_t c = g * cg; c < (g + 1) * cg; ++c)
    for (int64_t s = 0; s < p.S; ++s) {
      const double d = x[index(p, n, c, s)] - mean;
      m2 += d * d;
    }
  return {mean, m2 / L, abs_sum / L};
}

// x must be the problem's: a short vector would be read past its end.
void check_inputs(const char* fn, const ops::GroupNormProblem& p, const std::vector<float>& x) {
  ops::validate(p);
  const auto n = static_cast<size_t>(p.N) * static_cast<size_t>(p.C) * static_cast<size_t>(p.S);
  if (x.size() < n)
    throw Error::invalid("x", std::string("reference::") + fn + ": x holds " +
                                  std::to_string(x.size()) +
                                  " values, fewer than N * C * S = " + std::to_string(n));
}

}  // namespace

std::vector<double> group_norm(const ops::GroupNormProblem& p, const std::vector<float>& x,
                               const float* weight, const float* bias, double eps) {
  check_inputs("group_norm", p, x);
  const int64_t cg = p.C / p.groups;
  std::vector<double> y(x.size());
  for (int64_t n = 0; n < p.N; ++n) {
    for (int64_t g = 0; g < p.groups; ++g) {
      const GroupStats st = group_stats(p, x, n, g);
      const double rstd = 1.0 / std::sqrt(st.var + eps);
      for (int64_t c = g * cg; c < (g + 1) * cg; ++c) {
        const double w = weight ? weight[c] : 1.0, b = bias ? bias[c] : 0.0;
        for (int64_t s = 0; s < p.S; ++s) {
          const int64_t i = index(p, n, c, s);
          y[i] = activation_ref(p.activation, (x[i] - st.mean) * rstd * w + b);
        }
      }
    }
  }
  return y;
}

std::vector<double> group_norm_fp32_slack(const ops::GroupNormProblem& p,
                                          const std::vector<float>& x, const float* weight,
                                          double eps) {
  check_inputs("group_norm_fp32_slack", p, x);
  const int64_t cg = p.C / p.groups;
  const double units = std::ldexp(1.0 + std::log2(static_cast<double>(cg * p.S)), -24);
  const double slope = activation_max_slope(p.activation);
  std::vector<double> slack(x.size());
  for (int64_t n = 0; n < p.N; ++n) {
    for (int64_t g = 0; g < p.groups; ++g) {
      const GroupStats st = group_stats(p, x, n, g);
      const double per_unit_w = slope * units * st.mean_abs / std::sqrt(st.var + eps);
      for (int64_t c = g * cg; c < (g + 1) * cg; ++c) {
        const double w = weight ? std::fabs(weight[c]) : 1.0;
        for (int64_t s = 0; s < p.S; ++s) slack[index(p, n, c, s)] = per_unit_w * w;
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
      // A NaN anywhere in the row makes its min NaN, as torch.min does (std::min would skip it).
      for (int64_t c = g * cg; c < (g + 1) * cg; ++c) {
        const double z = (y[c] - mean) * rstd * gamma[c] + beta[c];
        mn = std::isnan(z) || std::isnan(mn) ? NAN : std::min(mn, z);
      }
    }
    mins.push_back(mn);
  }
  return mins;
}

}  // namespace kjit::reference
