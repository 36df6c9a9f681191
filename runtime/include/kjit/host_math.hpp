// Host-side fp16/bf16 conversions (round to nearest even) and error metrics, for checking
// kernels against references: used by kjit's tests and kjit-bench, and handy in host apps.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kjit/dtype.hpp"

namespace kjit::host {

inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float bf16_to_float(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float half_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(man), -24);
  } else if (exp == 31) {
    v = man ? NAN : INFINITY;
  } else {
    v = std::ldexp(static_cast<float>(man | 0x400), static_cast<int>(exp) - 25);
  }
  return sign ? -v : v;
}

inline uint16_t float_to_half(float f) {
  // Round to nearest even through the exact rational arithmetic of doubles.
  if (std::isnan(f)) return 0x7e00;
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return sign | 0x7c00;
  if (a < std::ldexp(1.0, -14)) {  // subnormal: units of 2^-24
    double q = std::nearbyint(a * std::ldexp(1.0, 24));
    return sign | static_cast<uint16_t>(q);
  }
  int e;
  double m = std::frexp(a, &e);           // a = m * 2^e, m in [0.5, 1)
  double q = std::nearbyint(m * 2048.0);  // 11 significant bits
  if (q == 2048.0) {
    q = 1024.0;
    ++e;
  }
  const int exp = e - 1 + 15;
  if (exp >= 31) return sign | 0x7c00;
  return sign | static_cast<uint16_t>((exp << 10) | (static_cast<uint32_t>(q) - 1024));
}

// Values as the device stores them (bytes), and as float.
inline void store_as(kjit::DType t, float v, void* dst) {
  if (t == kjit::DType::F32) {
    std::memcpy(dst, &v, 4);
  } else {
    uint16_t h = t == kjit::DType::F16 ? float_to_half(v) : float_to_bf16(v);
    std::memcpy(dst, &h, 2);
  }
}

inline float load_as(kjit::DType t, const void* src) {
  if (t == kjit::DType::F32) {
    float v;
    std::memcpy(&v, src, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, src, 2);
  return t == kjit::DType::F16 ? half_to_float(h) : bf16_to_float(h);
}

// n normal(mean, sd) values, each exactly representable in t (rounded through t), seeded.
inline std::vector<float> random_normal(kjit::DType t, size_t n, float mean, float sd,
                                        uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(mean, sd);
  std::vector<float> v(n);
  unsigned char buf[4];
  for (auto& e : v) {
    store_as(t, d(g), buf);
    e = load_as(t, buf);
  }
  return v;
}

// n fp32 values uniform in [-bound, bound) (nn.Linear's initialization), seeded.
inline std::vector<float> random_uniform(size_t n, float bound, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<float> d(-bound, bound);
  std::vector<float> v(n);
  for (auto& e : v) e = d(g);
  return v;
}

// The bytes of v stored as t, as a device buffer holds them; and back.
inline std::vector<unsigned char> to_bytes(kjit::DType t, const std::vector<float>& v) {
  const size_t esz = kjit::dtype_size(t);
  std::vector<unsigned char> b(v.size() * esz);
  for (size_t i = 0; i < v.size(); ++i) store_as(t, v[i], &b[i * esz]);
  return b;
}

inline std::vector<float> from_bytes(kjit::DType t, const std::vector<unsigned char>& b) {
  const size_t esz = kjit::dtype_size(t);
  std::vector<float> v(b.size() / esz);
  for (size_t i = 0; i < v.size(); ++i) v[i] = load_as(t, &b[i * esz]);
  return v;
}

struct ErrorStats {
  double rel_l2 = 0;  // ||out - ref|| / ||ref||
  double max_abs = 0;
  bool allclose = true;     // |out - ref| <= atol + rtol * |ref| everywhere
  long long nonfinite = 0;  // elements where out or ref is NaN/inf and the other does not match
  long long ill_conditioned = 0;  // elements judged with their slack (compare's second form)
};

// `slack` (optional, per element) widens the check where the inputs themselves make an exact
// answer unattainable in the kernel's precision (reference::group_norm_fp32_slack). Elements
// whose slack exceeds `ill_above` are ill-conditioned: they must lie within atol + rtol * |ref| +
// slack, and are left out of rel_l2, which then measures the well-conditioned rest.
inline ErrorStats compare(const std::vector<float>& out, const std::vector<double>& ref,
                          double atol, double rtol, const std::vector<double>* slack = nullptr,
                          double ill_above = 1e-5) {
  ErrorStats s;
  if (out.size() != ref.size() || (slack && slack->size() != ref.size())) {
    s.allclose = false;  // never read past the shorter one; never a pass
    s.rel_l2 = INFINITY;
    return s;
  }
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    // A non-finite value on either side must match exactly (NaN for NaN, the same infinity):
    // a finite output against a NaN reference would otherwise compare as within tolerance.
    if (!std::isfinite(out[i]) || !std::isfinite(ref[i])) {
      if (std::isnan(out[i]) ? std::isnan(ref[i]) : static_cast<double>(out[i]) == ref[i]) continue;
      ++s.nonfinite;
      s.allclose = false;
      continue;
    }
    const double d = out[i] - ref[i];
    const bool ill = slack && (*slack)[i] > ill_above;
    s.max_abs = std::max(s.max_abs, std::fabs(d));
    if (std::fabs(d) > atol + rtol * std::fabs(ref[i]) + (ill ? (*slack)[i] : 0.0))
      s.allclose = false;
    if (ill) {
      ++s.ill_conditioned;
      continue;
    }
    num += d * d;
    den += ref[i] * ref[i];
  }
  s.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  if (s.nonfinite) s.rel_l2 = INFINITY;
  return s;
}

}  // namespace kjit::host
