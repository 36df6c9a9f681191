#include "kjit/ops/layer_norm_reference.hpp"

#include <cmath>
#include <cstddef>
#include <string>

#include "kjit/error.hpp"
#include "kjit/host_math.hpp"

namespace kjit::reference {

namespace {

// s for one row, as the op holds it: x, or fp32 x + r rounded to the dtype.
std::vector<double> row_values(const ops::LayerNormProblem& p, const std::vector<float>& x,
                               const std::vector<float>* residual, size_t base,
                               std::vector<float>* sum) {
  std::vector<double> s(static_cast<size_t>(p.width));
  for (size_t j = 0; j < s.size(); ++j) {
    float v = x[base + j];
    if (p.residual) {
      unsigned char bytes[4];
      host::store_as(p.dtype, v + (*residual)[base + j], bytes);
      v = host::load_as(p.dtype, bytes);
      (*sum)[base + j] = v;
    }
    s[j] = v;
  }
  return s;
}

// The inputs must be the problem's: a short vector would be read past its end.
void check_inputs(const ops::LayerNormProblem& p, const std::vector<float>& x,
                  const std::vector<float>* residual) {
  ops::validate(p);
  const auto n = static_cast<size_t>(p.rows) * static_cast<size_t>(p.width);
  if (x.size() < n)
    throw Error::invalid("x", "reference::layer_norm: x holds " + std::to_string(x.size()) +
                                  " values, fewer than rows * width = " + std::to_string(n));
  if (p.residual && (!residual || residual->size() < n))
    throw Error::invalid("residual",
                         "reference::layer_norm: the problem has a residual, so it "
                         "must hold at least rows * width = " +
                             std::to_string(n) + " values");
}

}  // namespace

LayerNormResult layer_norm(const ops::LayerNormProblem& p, const std::vector<float>& x,
                           const std::vector<float>* residual, const float* weight,
                           const float* bias, double eps) {
  check_inputs(p, x, residual);
  LayerNormResult out;
  out.y.resize(x.size());
  if (p.residual) out.sum.resize(x.size());
  const bool rms = p.kind == ops::NormKind::RMSNorm;
  const auto width = static_cast<size_t>(p.width);
  for (size_t row = 0; row < static_cast<size_t>(p.rows); ++row) {
    const size_t base = row * width;
    const std::vector<double> s = row_values(p, x, residual, base, &out.sum);
    double mean = 0, m2 = 0;
    for (double v : s) mean += rms ? v * v : v;
    mean /= static_cast<double>(width);
    for (double v : s) m2 += (v - mean) * (v - mean);
    const double rstd = 1.0 / std::sqrt((rms ? mean : m2 / static_cast<double>(width)) + eps);
    for (size_t j = 0; j < width; ++j) {
      double z = rms ? s[j] * rstd : (s[j] - mean) * rstd;
      if (weight) z *= weight[j];
      if (bias) z += bias[j];
      out.y[base + j] = activation_ref(p.activation, z);
    }
  }
  return out;
}

}  // namespace kjit::reference
