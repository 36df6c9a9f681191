// Warp and block reductions with shuffle intrinsics (no cooperative_groups: it costs ~700 ms of
// NVRTC time per compile).
#pragma once

namespace kjit {

__forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__forceinline__ float warp_min(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over a block of kThreads threads; every thread gets the result. `scratch` holds at least
// kThreads/32 floats and may be reused after the call (the trailing barrier protects it).
template <int kThreads>
__forceinline__ float block_sum(float v, float* scratch) {
  constexpr int kWarps = kThreads / 32;
  v = warp_sum(v);
  if (kWarps == 1) return v;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = lane < kWarps ? scratch[lane] : 0.f;
  t = warp_sum(t);
  __syncthreads();
  return t;
}

}  // namespace kjit
