// kernel_templates/kjit/f16_split.cuh on the host: the CUDA names its element functions use
// (scale_exponent, split, to_half, from_half), so that the CPU test can check them against a
// float64 reference and the GPU test can compare the device's split rows with them bit for bit.
// The kernel itself is parsed, never instantiated here.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>

namespace f16_split_host {
struct Dim {
  unsigned x = 0, y = 0, z = 0;
};
}  // namespace f16_split_host

namespace {
[[maybe_unused]] f16_split_host::Dim threadIdx, blockIdx, gridDim;
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
[[maybe_unused]] inline float __shfl_xor_sync(unsigned, float v, int) {
  return v;
}
[[maybe_unused]] inline void __syncthreads() {}
}  // namespace

#define __global__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static
#include "kjit/f16_split.cuh"
#undef __global__
#undef __forceinline__
#undef __launch_bounds__
#undef __shared__
