// kjit's own 16-bit float types for NVRTC: storage plus conversions through PTX, so templates
// need no toolkit header (cuda_fp16.h / cuda_bf16.h add tens of ms to every compile).
#pragma once

namespace kjit {

struct alignas(2) half {
  unsigned short bits;
};
struct alignas(2) bfloat16 {
  unsigned short bits;
};

__forceinline__ float to_float(float v) {
  return v;
}
__forceinline__ float to_float(half v) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits));
  return f;
}
__forceinline__ float to_float(bfloat16 v) {
  return __uint_as_float(static_cast<unsigned>(v.bits) << 16);
}

template <class T>
__forceinline__ T from_float(float f);
template <>
__forceinline__ float from_float<float>(float f) {
  return f;
}
template <>
__forceinline__ half from_float<half>(float f) {
  half h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
  return h;
}
template <>
__forceinline__ bfloat16 from_float<bfloat16>(float f) {
  bfloat16 b;
#if __CUDA_ARCH__ >= 800
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b.bits) : "f"(f));
#else
  // Round to nearest even by hand; NaN stays NaN.
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    b.bits = 0x7fc0;
  } else {
    u += 0x7fffu + ((u >> 16) & 1u);
    b.bits = static_cast<unsigned short>(u >> 16);
  }
#endif
  return b;
}

template <class T>
struct is_bf16 {
  static constexpr bool value = false;
};
template <>
struct is_bf16<bfloat16> {
  static constexpr bool value = true;
};

// Elements per 16-byte vector access.
template <class T>
struct vec_width {
  static constexpr int value = 16 / sizeof(T);
};

}  // namespace kjit
