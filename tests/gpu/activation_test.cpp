// The activation policies (kernel_templates/kjit/activation.cuh) element by element against their
// float64 reference (kjit::activation_ref), through kjit::test_activation<T, Act>: a dense grid
// around 0, magnitudes from 2^-126 up to the type's range, random values, zeros, NaN and +-inf.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <random>
#include <sstream>
#include <vector>

#include "gpu_env.hpp"
#include "kjit/host_math.hpp"
#include "test_util.hpp"

using kjit::Activation;
using kjit::DType;
using kjit_test::runtime;

namespace {

// Inputs as floats (the kernel takes fp32 z), up to what t holds: fp16's largest is 65504 and
// bf16's 1.99 * 2^127 (larger values would round to infinity, which the reference does not).
std::vector<float> inputs(DType t) {
  std::vector<float> all = {NAN,     -NAN,     INFINITY, -INFINITY, 0.f,     -0.f,
                            FLT_MIN, -FLT_MIN, 1e-40f,   -1e-40f,   FLT_MAX, -FLT_MAX};
  for (int i = -12 * 256; i <= 12 * 256; ++i) all.push_back(static_cast<float>(i) / 256.f);
  for (int e = -126; e <= 127; ++e)
    for (float m : {1.f, 1.37f, 1.999f}) {
      all.push_back(std::ldexp(m, e));
      all.push_back(-std::ldexp(m, e));
    }
  std::mt19937_64 g(kjit_test::seed());
  std::normal_distribution<float> normal(0.f, 4.f);
  for (int i = 0; i < 4096; ++i) all.push_back(normal(g));
  const float limit = t == DType::F16 ? 65504.f : t == DType::BF16 ? 3e38f : FLT_MAX;
  std::vector<float> x;
  for (float v : all)
    if (!(std::fabs(v) > limit) || std::isinf(v)) x.push_back(v);
  return x;
}

bool uses_tanh_approx(Activation a) {
  return a == Activation::SiLU || a == Activation::GeluTanh;
}

// How far y (stored as t) may be from the float64 reference ref of z:
// - rounding to t: half an ulp, bounded by |ref| * 2^-8 (bf16) or 2^-11 (fp16); 2^-14 for fp32
//   covers __expf's 2 + 1.2 |z| ulp in SiLU up to |z| = 88, past which SiLU(z) is z or 0 to fp32
//   precision; and t's smallest step near 0 (flushed fp32 subnormals included);
// - for |z| < 64, cancellation in the GELUs' z/2 + z/2 * t where t is near -1: a few fp32 ulp of
//   z/2; and tanh.approx (16-bit SiLU and GELU-tanh): ~2^-11 relative in t, so up to
//   2^-11 * |z| / 2 absolute (twice that allowed);
// - for |z| >= 64 only 2^-80: erf and tanh are +-1 there, so the result is z or exactly 0, where
//   the true value may be SiLU's tail |z| e^-|z| < 2^-85 (16-bit SiLU's h + h * tanh(h) is 0
//   once tanh(h) = -1: SiLU(-64) in bf16 is 0, not -1e-26; fp32's __fdividef gives 0 for a
//   divisor above 2^126, i.e. z in (-88.7, -87.3)).
double tolerance(Activation a, DType t, double z, double ref) {
  const double rel = t == DType::BF16 ? 0x1p-8 : t == DType::F16 ? 0x1p-11 : 0x1p-14;
  const double floor = t == DType::F16 ? 0x1p-25 : 0x1p-126;
  double tol = rel * std::fabs(ref) + floor;
  if (std::fabs(z) >= 64) return tol + 0x1p-80;
  tol += 0x1p-22 * std::fabs(z);
  if (t != DType::F32 && uses_tanh_approx(a)) tol += 0x1p-11 * std::fabs(z);
  return tol;
}

// NaN for NaN, the same infinity for an infinity, else within tolerance.
bool matches(Activation a, DType t, float z, float y, double ref) {
  if (std::isnan(ref)) return std::isnan(y);
  if (std::isinf(ref) || std::isinf(y) || std::isnan(y)) return static_cast<double>(y) == ref;
  return std::fabs(y - ref) <= tolerance(a, t, z, ref);
}

}  // namespace

TEST_CASE("activation: test_activation<T, Act> matches activation_ref, NaN and +-inf included") {
  auto& rt = runtime();
  kjit::Stream stream(rt);
  int checked = 0;
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    const std::vector<float> x = inputs(t);
    const int n = static_cast<int>(x.size());
    const size_t esz = kjit::dtype_size(t);
    const auto dx = kjit::DeviceBuffer::from_host(rt, x);
    for (Activation a : {Activation::None, Activation::SiLU, Activation::GeluTanh,
                         Activation::GeluErf, Activation::ReLU}) {
      kjit::Spec s("kjit/test_kernels.cuh", "kjit::test_activation");
      s.type(t).type(kjit::activation_policy(a));
      CAPTURE(s.instantiation());
      kjit::DeviceBuffer dy(rt, x.size() * esz);
      // Poison: huge and finite in fp32 and bf16, NaN in fp16 (the edge case below poisons with
      // zeros): an unwritten element fails.
      dy.fill_bytes(0x7F);
      kjit::LaunchConfig cfg;
      cfg.grid.x = static_cast<unsigned>((n + 255) / 256);
      cfg.block.x = 256;
      rt.kernel(s)(stream, cfg, dx.ptr(), dy.ptr(), n);
      stream.synchronize();
      const std::vector<float> y = kjit::host::from_bytes(t, dy.to_host<unsigned char>(n * esz));
      int bad = 0;
      std::ostringstream first;
      for (int i = 0; i < n; ++i) {
        const double ref = kjit::activation_ref(a, x[i]);
        if (matches(a, t, x[i], y[i], ref)) continue;
        if (bad++ < 8)
          first << " z=" << x[i] << " y=" << y[i] << " ref=" << ref
                << " tol=" << tolerance(a, t, x[i], ref) << ";";
      }
      CHECK_MESSAGE(bad == 0, bad << " of " << n << " elements off:" << first.str());
      checked += n;
    }
  }
  MESSAGE(checked << " elements checked");
}

// What the policies give at the edges, spelled out: what PyTorch 2.11's CUDA kernels give in
// every dtype (checked on the H200) and activation_ref gives: NaN stays NaN (ReLU too); -inf
// gives NaN for SiLU (-inf / (1 + inf)) and both GELUs (-inf * 0), 0 for ReLU; +inf gives +inf.
TEST_CASE("activation: NaN and +-inf at the edges, every policy and dtype") {
  auto& rt = runtime();
  kjit::Stream stream(rt);
  const std::vector<float> x = {NAN, -INFINITY, INFINITY};
  const auto dx = kjit::DeviceBuffer::from_host(rt, x);
  struct Want {
    Activation a;
    float minus_inf;
  };
  for (const Want& w : {Want{Activation::None, -INFINITY}, Want{Activation::SiLU, NAN},
                        Want{Activation::GeluTanh, NAN}, Want{Activation::GeluErf, NAN},
                        Want{Activation::ReLU, 0.f}}) {
    for (DType t : {DType::F32, DType::BF16, DType::F16}) {
      kjit::Spec s("kjit/test_kernels.cuh", "kjit::test_activation");
      s.type(t).type(kjit::activation_policy(w.a));
      CAPTURE(s.instantiation());
      kjit::DeviceBuffer dy(rt, 3 * kjit::dtype_size(t));
      dy.fill_bytes(0);
      kjit::LaunchConfig cfg;
      cfg.grid.x = 1;
      cfg.block.x = 32;
      rt.kernel(s)(stream, cfg, dx.ptr(), dy.ptr(), 3);
      stream.synchronize();
      const auto y = kjit::host::from_bytes(t, dy.to_host<unsigned char>(3 * kjit::dtype_size(t)));
      CHECK(std::isnan(y[0]));
      CHECK((std::isnan(w.minus_inf) ? std::isnan(y[1]) : y[1] == w.minus_inf));
      CHECK(y[2] == INFINITY);
      CHECK((std::isnan(kjit::activation_ref(w.a, -INFINITY)) == std::isnan(w.minus_inf)));
    }
  }
}
