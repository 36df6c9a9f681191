// Split precision for Linear-GN-min's Precision::Fp32x3, on FP16 tensor cores: each row of an fp32
// matrix is scaled by a power of two 2^e (e from the row's largest finite magnitude, so that the
// scaled row stays below 2^15), and each scaled value a' = a * 2^e becomes two fp16 values,
//   hi = fp16(a')                    (round to nearest even)
//   lo = fp16((a' - hi) * 2^11)      (the rest, scaled back up into fp16's range)
// so that a' = hi + lo * 2^-11 to 22 significant bits. Three FP16 products with fp32 accumulation,
// (lo*hi + hi*lo) * 2^-11 + hi*hi, then give an fp32-class GEMM of the scaled rows; lo*lo is
// dropped. The GEMM's consumer (gn_min_fwd with kScaled) multiplies Y[m, n] by
// 2^(exps_x[m] + exps_w[n]), exps = -e: the scales are exact powers of two, so undoing them adds no
// rounding. FP16 has the 11-bit significand of TF32 at twice TF32's tensor-core rate; the per-row
// scale gives every row the range FP16 lacks (29 binades of full precision below the row's
// largest value, docs/OPS.md "Split precision").
//
// f16_split reads a row-major [rows, kCols] fp32 matrix and writes each row as 2 * kPitch fp16
// values (their bits):
// the part at `hi_off` (0 or kPitch) holds hi, the one at `lo_off` holds lo, both padded with zeros
// from kCols to kPitch (a multiple of 128 halves, so that every part starts on a 256-byte boundary
// and a GEMM over the whole padded row adds exact zeros), and exps[r] = -e. x is laid out
// [lo | hi], W as [hi | lo]: one GEMM over 2 * kPitch gives lo*hi + hi*lo, then GEMMs over slices
// of the hi parts add hi*hi (linear_gn_min_plan.hpp says why slices). A CTA owns a row at a time:
// one pass for the largest magnitude, a second (the row is then in L1/L2) for the split.
//
// kVec = 4: 16-byte loads of src (kCols % 4 == 0 and src 16-byte aligned); kVec = 1: scalar loads.
// Non-finite values keep their class: inf and NaN go to hi, lo is 0, and they take no part in the
// row's scale.
//
// The file includes no toolkit header, and it also compiles as host C++ (kjit's CPU test checks
// scale_exponent and split against a float64 reference; the host converts to fp16 in software).
#pragma once

namespace kjit {
namespace f16split {

// fp16 conversions, round to nearest even: PTX on the device, the same rounding by hand on the
// host (for the CPU test).
__forceinline__ unsigned short to_half(float f) {
#if defined(__CUDA_ARCH__)
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  const unsigned u = __float_as_uint(f);
  const unsigned short sign = static_cast<unsigned short>((u >> 16) & 0x8000u);
  const unsigned mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) return 0x7fffu;  // NaN: PTX's canonical one, whatever the sign
  if (mag >= 0x477ff000u) return static_cast<unsigned short>(sign | 0x7c00u);  // >= 65520: inf
  const int e = static_cast<int>(mag >> 23) - 127;
  if (e < -25) return sign;  // below half the smallest subnormal (2^-25): 0
  // Keep the significand's top bits down to fp16's ulp (2^-24 below 2^-14, else 2^(e-10)).
  const unsigned sig = (mag & 0x7fffffu) | (e > -127 ? 0x800000u : 0u);
  const int shift = e < -14 ? 13 + (-14 - e) : 13;
  const unsigned q = sig >> shift, rem = sig & ((1u << shift) - 1u), half_ulp = 1u << (shift - 1);
  unsigned r = q + (rem > half_ulp || (rem == half_ulp && (q & 1u)) ? 1u : 0u);
  // Subnormals: r counts 2^-24; normals: r holds the implicit bit, biased exponent added below.
  if (e >= -14) r = (static_cast<unsigned>(e + 15) << 10) + (r - 0x400u);
  return static_cast<unsigned short>(sign | r);
#endif
}

__forceinline__ float from_half(unsigned short h) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#else
  const unsigned sign = static_cast<unsigned>(h & 0x8000u) << 16;
  const unsigned e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return __uint_as_float(sign | 0x7f800000u | (m << 13));
  if (e != 0) return __uint_as_float(sign | ((e + 112) << 23) | (m << 13));
  const float v = static_cast<float>(m) * __uint_as_float(0x33800000u);  // m * 2^-24
  return sign ? -v : v;
#endif
}

constexpr int kLoShift = 11;  // lo is stored times 2^11

__forceinline__ bool finite(float a) {
  return (__float_as_uint(a) & 0x7f800000u) != 0x7f800000u;
}

// The power of two e for a row whose largest finite magnitude is amax: amax * 2^e < 2^15 (fp16's
// largest binade is 2^15 .. 65504), e in [-113, 127] (2^e is a normal fp32). 0 for an all-zero row.
__forceinline__ int scale_exponent(float amax) {
  if (!(amax > 0.f)) return 0;
  const int biased = static_cast<int>((__float_as_uint(amax) >> 23) & 0xffu);
  // amax in [2^(E-1), 2^E) with E = biased - 126 (normal); subnormals get the largest scale.
  const int e = biased == 0 ? 127 : 15 - (biased - 126);
  return e > 127 ? 127 : e;
}

__forceinline__ float pow2(int e) {  // e in [-126, 127]
  return __uint_as_float(static_cast<unsigned>(e + 127) << 23);
}

// hi and lo of a scaled by s = 2^e (see the file comment), as fp16 bits.
__forceinline__ void split(float a, float s, unsigned short& hi, unsigned short& lo) {
  const float as = a * s;
  hi = to_half(as);
  lo = to_half(finite(as) ? (as - from_half(hi)) * 2048.f : 0.f);
}

struct alignas(16) F4 {
  float v[4];
};
struct alignas(16) H8 {
  unsigned short v[8];
};

}  // namespace f16split

template <int kThreads, int kVec, long long kCols>
__global__ void __launch_bounds__(kThreads)
    f16_split(const float* __restrict__ src, unsigned short* __restrict__ dst,
              int* __restrict__ exps, long long rows, long long hi_off, long long lo_off) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps");
  static_assert(kVec == 1 || (kVec == 4 && kCols % 4 == 0), "16-byte loads need kCols % 4 == 0");
  using f16split::F4;
  using f16split::H8;
  constexpr long long kPitch = (kCols + 127) / 128 * 128;
  __shared__ float red[kThreads / 32];
  const int tid = threadIdx.x;
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* __restrict__ s = src + r * kCols;
    float amax = 0.f;
    if constexpr (kVec == 4) {
      for (long long c = tid * 4LL; c < kCols; c += kThreads * 4LL) {
        const F4 t = *reinterpret_cast<const F4*>(s + c);
        for (int j = 0; j < 4; ++j)
          if (f16split::finite(t.v[j])) amax = fmaxf(amax, fabsf(t.v[j]));
      }
    } else {
      for (long long c = tid; c < kCols; c += kThreads)
        if (f16split::finite(s[c])) amax = fmaxf(amax, fabsf(s[c]));
    }
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    if ((tid & 31) == 0) red[tid >> 5] = amax;
    __syncthreads();
    for (int w = 0; w < kThreads / 32; ++w) amax = fmaxf(amax, red[w]);
    __syncthreads();  // red is free for the next row
    const int e = f16split::scale_exponent(amax);
    const float scale = f16split::pow2(e);
    if (tid == 0) exps[r] = -e;
    unsigned short* __restrict__ d = dst + r * 2 * kPitch;
    for (long long c = tid * 8LL; c < kPitch; c += kThreads * 8LL) {
      float a[8];
      if constexpr (kVec == 4) {
        for (int q = 0; q < 2; ++q) {
          F4 t = {{0.f, 0.f, 0.f, 0.f}};
          if (c + 4 * q < kCols) t = *reinterpret_cast<const F4*>(s + c + 4 * q);
          for (int j = 0; j < 4; ++j) a[4 * q + j] = t.v[j];
        }
      } else {
        for (int j = 0; j < 8; ++j) a[j] = c + j < kCols ? s[c + j] : 0.f;
      }
      H8 hi, lo;
      for (int j = 0; j < 8; ++j) f16split::split(a[j], scale, hi.v[j], lo.v[j]);
      *reinterpret_cast<H8*>(d + hi_off + c) = hi;
      *reinterpret_cast<H8*>(d + lo_off + c) = lo;
    }
  }
}

}  // namespace kjit
