// A row's statistics across the CTAs of a cooperative launch (row_norm with kCoop): rows too long
// for one thread-block cluster to hold, spread over every SM. Each CTA reduces its own part of
// the row, writes that part's moments to global memory, meets the row's other CTAs at a barrier
// there (kjit/group_barrier.cuh: every CTA of a cooperative grid is resident, so a CTA that waits
// cannot keep another from starting) and merges all of them.
#pragma once

// The barrier needs sm_70's acquire/release atomics; row_norm refuses kCoop below it, and every
// other row_norm kernel still compiles there (without this header's barrier).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 700
#include "kjit/group_barrier.cuh"
#endif

namespace kjit {
namespace rownorm {

// A part of a row: its element count, mean and M2 about that mean (RMSNorm: `mean` carries the
// sum of squares, and m2 is unused).
struct Moments {
  float n, mean, m2;
};

// The parallel-variance rule (Chan, Golub and LeVeque): the moments of a and b together. It is
// not bitwise symmetric in its arguments, so callers pass the part of lower index as a: every
// thread that merges the same parts then gets the same bits.
__forceinline__ Moments merge_moments(Moments a, Moments b) {
  if (b.n == 0.f) return a;
  if (a.n == 0.f) return b;
  const float n = a.n + b.n, delta = b.mean - a.mean, rb = __fdividef(b.n, n);
  // (delta * (a.n rb)) * delta: a.n rb <= a.n, so the first product overflows only where the
  // squared term itself is past the float range.
  return {n, fmaf(delta, rb, a.mean), a.m2 + b.m2 + (delta * (a.n * rb)) * delta};
}

// The row's (mean, M2 / width), or for RMSNorm (mean of squares, -), from this CTA's part `own`
// and the other `coop` CTAs': part[k] is CTA k's slot of this row, bar the row's two barrier
// words. Warp 0 merges the parts, lane l taking parts l, l + 32, ... in order and xor shuffles
// merging lanes (lower lane first), so every CTA gets the same bits; `out` (shared) hands the
// result to the CTA. Every CTA of the row must call it (the barrier waits for all of them).
template <bool kRms>
__forceinline__ float2 coop_stats(Moments own, float4* part, unsigned* bar, int coop, int rank,
                                  int width, float2* out) {
  if (threadIdx.x == 0) {
    __stcg(part + rank, make_float4(own.n, own.mean, own.m2, 0.f));
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
    __trap();  // not reached: row_norm's static_assert refuses kCoop here
#else
    group_barrier(bar, static_cast<unsigned>(coop));
#endif
  }
  __syncthreads();  // thread 0 acquired every part of the row: now the CTA sees them
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    Moments acc{0.f, 0.f, 0.f};
#pragma unroll 4
    for (int k = lane; k < coop; k += 32) {
      const float4 v = __ldcg(part + k);  // L2: written by other SMs during this launch
      acc = kRms ? Moments{acc.n + v.x, acc.mean + v.y, 0.f}
                 : merge_moments(acc, Moments{v.x, v.y, v.z});
    }
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const Moments other{__shfl_xor_sync(0xffffffffu, acc.n, o),
                          __shfl_xor_sync(0xffffffffu, acc.mean, o),
                          __shfl_xor_sync(0xffffffffu, acc.m2, o)};
      if constexpr (kRms)
        acc.mean += other.mean;  // a + b and b + a are the same bits
      else
        acc = lane & o ? merge_moments(other, acc) : merge_moments(acc, other);
    }
    const float n = static_cast<float>(width);
    if (lane == 0) *out = make_float2(kRms ? acc.mean / n : acc.mean, kRms ? 0.f : acc.m2 / n);
  }
  __syncthreads();
  return *out;
}

}  // namespace rownorm
}  // namespace kjit
