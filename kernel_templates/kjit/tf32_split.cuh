// Split precision (3xTF32) for Linear-GN-min's Precision::Fp32x3: each fp32 value a becomes
// hi + lo, hi = a rounded to TF32 (10 explicit mantissa bits) to nearest with ties away from zero
// (PTX cvt.rna.tf32.f32), lo = a - hi (exact in fp32: hi and a share their leading bits). Three
// TF32 products, lo*hi + hi*lo + hi*hi, then give an fp32-class GEMM; lo*lo is dropped.
//
// tf32_split reads a row-major [rows, kCols] fp32 matrix and writes each row as 2 * kPitch floats:
// the part at `hi_off` (0 or kPitch) holds hi, the one at `lo_off` holds lo, and both are padded
// with zeros from kCols to kPitch (a multiple of 64 floats, so that every part starts on a
// 256-byte boundary and a GEMM over the whole padded row adds exact zeros). x is laid out
// [lo | hi], W as [hi | lo]: one GEMM over 2 * kPitch gives lo*hi + hi*lo, a second over the hi
// parts adds hi*hi.
//
// kVec = 4: 16-byte loads of src (kCols % 4 == 0 and src 16-byte aligned); kVec = 1: scalar loads
// with a bound check on every element. dst is always 256-byte aligned and written with 16-byte
// stores. Specialized on kCols: the row/column split of the flat index is a division by a
// constant.
//
// The file includes no toolkit header, and it also compiles as host C++ (kjit's CPU emulation
// test defines the CUDA names it uses).
#pragma once

namespace kjit {
namespace tf32 {

struct alignas(16) F4 {
  float v[4];
};

// a rounded to TF32, to nearest, ties away from zero; inf and NaN are returned as they are. The
// host and pre-sm_80 form adds half a TF32 ulp to the magnitude and truncates: on sign-magnitude
// bits that is round-half-away, and a carry into the exponent is the correct next binade (up to
// inf past the largest TF32 value).
__forceinline__ float round_rna(float a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(a));
  return __uint_as_float(r);
#else
  const unsigned u = __float_as_uint(a);
  if ((u & 0x7f800000u) == 0x7f800000u) return a;
  return __uint_as_float((u + 0x1000u) & 0xffffe000u);
#endif
}

// hi and lo of a (lo = 0 where hi is not finite, so that lo never turns an inf into NaN).
__forceinline__ void split(float a, float& hi, float& lo) {
  hi = round_rna(a);
  const bool finite = (__float_as_uint(hi) & 0x7f800000u) != 0x7f800000u;
  lo = finite ? a - hi : 0.f;
}

}  // namespace tf32

template <int kThreads, int kVec, long long kCols>
__global__ void __launch_bounds__(kThreads)
    tf32_split(const float* __restrict__ src, float* __restrict__ dst, long long rows,
               long long hi_off, long long lo_off) {
  static_assert(kVec == 1 || (kVec == 4 && kCols % 4 == 0), "16-byte loads need kCols % 4 == 0");
  constexpr long long kPitch = (kCols + 63) / 64 * 64;
  constexpr long long kQuads = kPitch / 4;  // 16-byte pieces of one padded part
  const long long total = rows * kQuads;
  const long long step = static_cast<long long>(gridDim.x) * kThreads;
  for (long long i = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x; i < total;
       i += step) {
    const long long r = i / kQuads;
    const long long c = (i - r * kQuads) * 4;
    const float* s = src + r * kCols + c;
    float a[4] = {0.f, 0.f, 0.f, 0.f};
    if constexpr (kVec == 4) {
      if (c < kCols) {
        const tf32::F4 t = *reinterpret_cast<const tf32::F4*>(s);
        for (int j = 0; j < 4; ++j) a[j] = t.v[j];
      }
    } else {
      for (int j = 0; j < 4; ++j)
        if (c + j < kCols) a[j] = s[j];
    }
    tf32::F4 hi, lo;
    for (int j = 0; j < 4; ++j) tf32::split(a[j], hi.v[j], lo.v[j]);
    float* d = dst + r * 2 * kPitch + c;
    *reinterpret_cast<tf32::F4*>(d + hi_off) = hi;
    *reinterpret_cast<tf32::F4*>(d + lo_off) = lo;
  }
}

}  // namespace kjit
