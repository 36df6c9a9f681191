// GroupNorm (+ activation) forward in one cooperative kernel, for a few large groups (NCHW).
//
// The split pair (group_norm_split.cuh) reads x twice, the second time from L2, and costs two
// launches. Here every CTA of the grid is resident at once (a cooperative launch, which the
// runtime sizes to the device), so a CTA can hold its chunk in registers while its group's
// CTAs exchange statistics: each writes its chunk's (mean, M2), meets the others at a barrier in
// global memory, merges all of them as gn_apply does, and writes y from the registers. One read
// of x, one write of y, one launch.
#pragma once

#include "kjit/group_barrier.cuh"
#include "kjit/group_norm_split.cuh"

namespace kjit {

// x, y: [N, C, kS] (y may be x); part: a float2 per chunk; bar: two words per group, whose first
// is 0 (group_barrier); w, b: [C] or null. grid.x = groups * chunks, one CTA per chunk.
template <class T, class P, int kCg, long long kS, int kThreads, int kVec, int kIters, bool kHasW,
          bool kHasB, class Act>
__global__ void __launch_bounds__(kThreads)
    gn_coop(const T* __restrict__ x, T* __restrict__ y, float2* part, unsigned* bar,
            const P* __restrict__ w, const P* __restrict__ b, float eps, int G) {
  constexpr long long kL = kCg * kS;
  using Ch = gn_split::Chunks<kL, kThreads, kVec, kIters>;
  __shared__ float red[96];
  const long long group = blockIdx.x / Ch::kCount;
  const int first = static_cast<int>(blockIdx.x % Ch::kCount) * Ch::kChunk;

  pdl_wait();  // x, y, the workspace: the kernel before may still use them
  Pack<T, kVec> raw[kIters];
  gn_split::load_chunk<T, kThreads, kVec, kIters, Ch::kNvec, false>(x + group * kL, first, 0ull,
                                                                    raw);
  const gn::Stat st = gn_split::chunk_stat<T, kThreads, kVec, kIters, Ch::kNvec>(raw, first, red);
  if (threadIdx.x == 0) {
    part[blockIdx.x] = make_float2(st.mean, st.m2);
    group_barrier(bar + 2 * group, Ch::kCount);
  }
  __syncthreads();  // the group's partials are all visible (thread 0 acquired them)
  gn_split::apply_chunk<T, P, kCg, kS, kThreads, kVec, kIters, kHasW, kHasB, Act, false>(
      raw, first, part + group * Ch::kCount, y + group * kL, w, b, eps,
      static_cast<int>(group % G));
}

}  // namespace kjit
