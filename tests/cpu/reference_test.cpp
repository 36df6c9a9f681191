// The float64 GroupNorm reference and the slack the GPU tests give ill-conditioned groups.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "kjit/error.hpp"
#include "kjit/host_math.hpp"
#include "kjit/ops/layer_norm_reference.hpp"
#include "kjit/reference.hpp"
#include "test_util.hpp"

using kjit::ops::Activation;
using kjit::ops::GroupNormProblem;

namespace {

// GroupNorm as an fp32 kernel computes it (two-pass statistics in float), for one group.
std::vector<float> fp32_group_norm(const std::vector<float>& x, float eps) {
  float sum = 0;
  for (float v : x) sum += v;
  const float mean = sum / static_cast<float>(x.size());
  float m2 = 0;
  for (float v : x) m2 += (v - mean) * (v - mean);
  const float rstd = 1.f / std::sqrt(m2 / static_cast<float>(x.size()) + eps);
  std::vector<float> y;
  for (float v : x) y.push_back((v - mean) * rstd);
  return y;
}

GroupNormProblem one_group(int64_t S) {
  GroupNormProblem p;
  p.N = 1;
  p.C = 1;
  p.S = S;
  p.groups = 1;
  p.activation = Activation::None;
  p.has_weight = p.has_bias = false;
  return p;
}

}  // namespace

TEST_CASE("reference: a tight group of two defeats fp32, and its slack covers exactly that") {
  // The 300-random-shape GPU test once drew such a group (C/G = 1, S = 2, values near 3).
  const GroupNormProblem p = one_group(2);
  const std::vector<float> x = {3.0f, 3.00500035f};  // the sum rounds by nearly half an ulp
  const double eps = 1e-5;
  const auto ref = kjit::reference::group_norm(p, x, nullptr, nullptr, eps);
  const auto y = fp32_group_norm(x, static_cast<float>(eps));
  const auto slack = kjit::reference::group_norm_fp32_slack(p, x, nullptr, eps);

  const auto plain = kjit::host::compare(y, ref, 1e-4, 1e-4);
  CHECK(plain.rel_l2 > 1e-5);  // the fp32 answer itself, not a kernel bug
  const auto judged = kjit::host::compare(y, ref, 1e-4, 1e-4, &slack);
  CHECK(judged.allclose);
  CHECK(judged.ill_conditioned == 2);

  // The slack is the mean's rounding, not a licence: an error of 1e-3 still fails.
  std::vector<float> wrong = y;
  wrong[0] += 1e-3f;
  CHECK_FALSE(kjit::host::compare(wrong, ref, 1e-4, 1e-4, &slack).allclose);
}

TEST_CASE("reference: well-spread groups get no slack and keep the full rel L2 check") {
  const GroupNormProblem p = one_group(4096);
  const auto x = kjit::host::random_normal(kjit::DType::F32, 4096, 3.f, 2.f, 7);
  const auto slack = kjit::reference::group_norm_fp32_slack(p, x, nullptr, 1e-5);
  for (double s : slack) REQUIRE(s < 1e-5);
  auto ref = kjit::reference::group_norm(p, x, nullptr, nullptr, 1e-5);
  std::vector<float> y(ref.begin(), ref.end());
  y[100] += 0.05f;  // rel L2 ~ 0.05 / 64 = 8e-4
  const auto e = kjit::host::compare(y, ref, 1e-4, 1e-4, &slack);
  CHECK(e.ill_conditioned == 0);
  CHECK(e.rel_l2 > 1e-5);
  CHECK_FALSE(e.allclose);
}

TEST_CASE("reference: the slack follows each element's group in NHWC") {
  GroupNormProblem p = one_group(3);
  p.C = 4;
  p.groups = 2;
  p.layout = kjit::ops::Layout::NHWC;
  // x[s * C + c]: channels 0-1 (group 0) within 0.001 of 3.0, channels 2-3 (group 1) spread.
  const std::vector<float> x = {3.0f, 3.0005f, -1.5f,   0.7f,    3.001f, 3.0002f,
                                2.1f, -0.4f,   3.0007f, 3.0001f, 0.9f,   -2.2f};
  const auto slack = kjit::reference::group_norm_fp32_slack(p, x, nullptr, 1e-5);
  for (int s = 0; s < 3; ++s)
    for (int c = 0; c < 4; ++c) {
      CAPTURE(s);
      CAPTURE(c);
      if (c < 2)
        CHECK(slack[s * 4 + c] > 1e-5);
      else
        CHECK(slack[s * 4 + c] < 1e-6);
    }
}

// A non-finite value must match exactly on both sides: a finite output against a NaN reference
// (or the reverse) fails, NaN against NaN passes, and sizes must agree.
TEST_CASE("compare: non-finite values on either side, and sizes") {
  const std::vector<double> nan_ref{NAN, 2.0};
  const auto finite_out = kjit::host::compare({1.f, 2.f}, nan_ref, 1e-4, 1e-4);
  CHECK_FALSE(finite_out.allclose);
  CHECK(finite_out.nonfinite == 1);
  const auto both_nan = kjit::host::compare({NAN, 2.f}, nan_ref, 1e-4, 1e-4);
  CHECK(both_nan.allclose);
  CHECK(both_nan.nonfinite == 0);
  CHECK(both_nan.rel_l2 == 0.0);
  CHECK(kjit::host::compare({INFINITY}, {INFINITY}, 1e-4, 1e-4).allclose);
  CHECK_FALSE(kjit::host::compare({-INFINITY}, {INFINITY}, 1e-4, 1e-4).allclose);
  CHECK_FALSE(kjit::host::compare({NAN}, {1.0}, 1e-4, 1e-4).allclose);
  const auto short_out = kjit::host::compare({1.f}, {1.0, 2.0}, 1e-4, 1e-4);
  CHECK_FALSE(short_out.allclose);
  CHECK(std::isinf(short_out.rel_l2));
}

// The row minimum is NaN when any value of the row is (torch.min), e.g. a NaN input or eps = 0
// on a constant group; std::min alone would skip the NaN.
TEST_CASE("reference: linear_gn_min's row minimum keeps NaN") {
  kjit::ops::LinearGnMinProblem p;
  p.M = 1;
  p.K = 2;
  p.N = 4;
  p.G = 2;
  const std::vector<float> w{1, 0, 0, 1, 1, 1, 2, 1}, gamma(4, 1.f), beta(4, 0.f);
  const std::vector<float> x{1.f, 3.f};
  const auto fine = kjit::reference::linear_gn_min_rows(p, x.data(), w.data(), nullptr,
                                                        gamma.data(), beta.data(), 1e-5, {0});
  REQUIRE(fine.size() == 1u);
  CHECK(std::isfinite(fine[0]));
  const std::vector<float> nan_x{NAN, 3.f};
  CHECK(std::isnan(kjit::reference::linear_gn_min_rows(p, nan_x.data(), w.data(), nullptr,
                                                       gamma.data(), beta.data(), 1e-5, {0})[0]));
  const std::vector<float> flat_w{1, 0, 1, 0, 1, 0, 1, 0};  // every channel the same: var 0
  CHECK(std::isnan(kjit::reference::linear_gn_min_rows(p, x.data(), flat_w.data(), nullptr,
                                                       gamma.data(), beta.data(), 0.0, {0})[0]));
}

// The references read x (and the residual) as the problem's size: inputs that are shorter, or a
// problem that is not valid (groups = 0 would divide by zero), are refused, not read past.
TEST_CASE("the references refuse inputs shorter than the problem, and invalid problems") {
  const GroupNormProblem p = GroupNormProblem::from_shape({2, 8, 4}, 2, kjit::DType::F32);
  CHECK_KJIT_ERROR(kjit::reference::group_norm(p, std::vector<float>(63), nullptr, nullptr, 1e-5),
                   kjit::Errc::InvalidArgument);
  CHECK_KJIT_ERROR(kjit::reference::group_norm_fp32_slack(p, std::vector<float>(10), nullptr, 1e-5),
                   kjit::Errc::InvalidArgument);
  GroupNormProblem bad = p;
  bad.groups = 0;
  CHECK_KJIT_ERROR(kjit::reference::group_norm(bad, std::vector<float>(64), nullptr, nullptr, 1e-5),
                   kjit::Errc::InvalidArgument);
  CHECK(
      kjit::reference::group_norm(p, std::vector<float>(64, 1.f), nullptr, nullptr, 1e-5).size() ==
      64);

  auto ln = kjit::ops::LayerNormProblem::layer_norm(4, 16, kjit::DType::F32);
  CHECK_KJIT_ERROR(
      kjit::reference::layer_norm(ln, std::vector<float>(63), nullptr, nullptr, nullptr, 1e-5),
      kjit::Errc::InvalidArgument);
  ln.residual = true;
  const std::vector<float> x(64, 1.f), r(64, 2.f);
  CHECK_KJIT_ERROR(kjit::reference::layer_norm(ln, x, nullptr, nullptr, nullptr, 1e-5),
                   kjit::Errc::InvalidArgument);
  const std::vector<float> short_r(10);
  CHECK_KJIT_ERROR(kjit::reference::layer_norm(ln, x, &short_r, nullptr, nullptr, 1e-5),
                   kjit::Errc::InvalidArgument);
  CHECK(kjit::reference::layer_norm(ln, x, &r, nullptr, nullptr, 1e-5).sum.size() == 64);
}
