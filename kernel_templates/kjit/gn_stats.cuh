// GroupNorm statistics (count, mean, M2 merged with Chan's formula) over threads, warps, CTAs
// and clusters, and the fold of the activation into the normalization every GroupNorm kernel
// uses.
#pragma once

#include "kjit/activation.cuh"
#include "kjit/cluster.cuh"

namespace kjit {
namespace gn {

// Count, mean and sum of squared deviations of a set of values: merged pairwise with Chan's
// formula, which stays exact-ish where sum-of-squares would cancel, in one reduction.
struct Stat {
  float n, mean, m2;
};

// Chan et al.: the merge of two disjoint sets. Callers always pass the lower-ranked set first,
// so every thread that merges the same pair gets the same bits.
__forceinline__ Stat merge(const Stat& a, const Stat& b) {
  if (b.n == 0.f) return a;  // empty sets (idle lanes) merge exactly
  if (a.n == 0.f) return b;
  const float n = a.n + b.n;
  const float d = b.mean - a.mean;
  const float fb = __fdividef(b.n, n);  // counts are exact integers; ~2 ulp is plenty
  return {n, fmaf(d, fb, a.mean), a.m2 + b.m2 + d * d * a.n * fb};
}

// Butterfly over the lanes [0, width) of each aligned width-lane subgroup.
template <int kWidth>
__forceinline__ Stat warp_merge(Stat s) {
  const unsigned lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < kWidth; o <<= 1) {
    Stat t{__shfl_xor_sync(0xffffffffu, s.n, o), __shfl_xor_sync(0xffffffffu, s.mean, o),
           __shfl_xor_sync(0xffffffffu, s.m2, o)};
    s = (lane & o) ? merge(t, s) : merge(s, t);
  }
  return s;
}

// Merge over one team: shuffles for a team inside a warp; warps through shared memory (one
// barrier) for a whole CTA. `scratch` holds 3 * 32 floats.
template <int kThreads, int kTpg>
__forceinline__ Stat team_merge(Stat s, float* scratch) {
  // A partial last warp would leave its sum out of scratch (and hang the full-mask shuffles).
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps, at most 32 of them");
  static_assert(kTpg == kThreads || (kTpg <= 32 && (kTpg & (kTpg - 1)) == 0),
                "a team is a power of two inside a warp, or the whole CTA");
  if constexpr (kTpg == kThreads && kThreads > 32) {
    constexpr int kWarps = kThreads / 32;
    s = warp_merge<32>(s);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
      scratch[warp] = s.n;
      scratch[32 + warp] = s.mean;
      scratch[64 + warp] = s.m2;
    }
    __syncthreads();
    // Lanes past the last warp hold empty sets: a full-warp butterfly gives every lane the total.
    Stat w = lane < kWarps ? Stat{scratch[lane], scratch[32 + lane], scratch[64 + lane]}
                           : Stat{0.f, 0.f, 0.f};
    return warp_merge<32>(w);
  } else {
    return warp_merge<kTpg>(s);
  }
}

// Merge of one Stat per CTA over the cluster, through distributed shared memory. `slot` (3
// floats) must stay untouched until the cluster's final barrier; `bcast` (3 floats) is scratch.
// Only warp 0 touches the peers: thread 0 writes the slot and warp 0 arrives with .release (the
// other warps' .relaxed arrivals skip a fence each: ~3 us of 78 on 16x512x64x64 f32, PERF.md);
// after the .acquire wait warp 0 reads and merges the peers' slots and broadcasts the total.
template <int kCluster>
__forceinline__ Stat cluster_merge(Stat s, float* slot, float* bcast) {
  if constexpr (kCluster == 1) {
    return s;
  } else {
    if (threadIdx.x == 0) {
      slot[0] = s.n;
      slot[1] = s.mean;
      slot[2] = s.m2;
    }
    if (threadIdx.x < 32) {
      cluster_arrive();
    } else {
      cluster_arrive_relaxed();
    }
    cluster_wait();
    if (threadIdx.x < 32) {
      const unsigned lane = threadIdx.x;
      Stat r{0.f, 0.f, 0.f};
      if (lane < kCluster)
        r = Stat{cluster_load(slot, lane), cluster_load(slot + 1, lane),
                 cluster_load(slot + 2, lane)};
      r = warp_merge<32>(r);
      if (lane == 0) {
        bcast[0] = r.n;
        bcast[1] = r.mean;
        bcast[2] = r.m2;
      }
    }
    __syncthreads();
    return Stat{bcast[0], bcast[1], bcast[2]};
  }
}

// The arrival after cluster_merge: a CTA waits for it before exiting, so no peer's shared memory
// goes away while warp 0 may still read it. Warp 0 did the remote reads, so it releases them.
template <int kCluster>
__forceinline__ void cluster_merge_done() {
  if constexpr (kCluster > 1) {
    if (threadIdx.x < 32) {
      cluster_arrive();
    } else {
      cluster_arrive_relaxed();
    }
  }
}

// The Stat of kVec values held by one thread (exact two-pass on registers).
template <int kVec>
__forceinline__ Stat local_stat(const float (&v)[kVec], int valid) {
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < kVec; ++j) s += j < valid ? v[j] : 0.f;
  const float n = static_cast<float>(valid);
  const float mean = valid ? __fdividef(s, n) : 0.f;
  float m2 = 0.f;
#pragma unroll
  for (int j = 0; j < kVec; ++j) {
    const float d = v[j] - mean;
    m2 += j < valid ? d * d : 0.f;
  }
  return {n, mean, m2};
}

template <int kThreads, int kTpg>
__forceinline__ void team_barrier() {
  if constexpr (kTpg == kThreads && kThreads > 32) {
    __syncthreads();
  } else {
    __syncwarp();
  }
}

// 16-bit outputs compute y = Act::folded(h), h = (x - mean) * a + c, with the activation's
// Act::kFold (1/2 for SiLU: its half-argument form, kjit::act::Silu) folded into a = w * rstd *
// kFold and c = b * kFold (exact: a power of two), so h is fp32's z * kFold rounded once.
// Folding the mean into the shift as well (x * a + (c - mean * a), as PyTorch's CUDA affine path
// does) saves one FADD per element but rounds that shift: up to 2^-24 * |mean| * |a| absolute, so
// a constant group of 1e4 (rstd = 1/sqrt(eps)) would come out ~0.1 off the bias. Measured on the
// H200 (PERF.md): the FADD costs 0.7 us on 16x512x64x64 bf16 (1.5%) and is 0.3 us faster on
// 128x256x14x14; choosing per group was slower than either (two copies of the store loop).
// fp32 outputs do not fold: they compute z = (x - mean) * (w * rstd) + b and Act::apply(z).
template <class T, class Act>
struct Fold {
  static constexpr bool kOn = sizeof(T) == 2;
  static constexpr float kK = kOn ? Act::kFold : 1.f;
  // a, c for scale `sc` (weight * rstd) and `shift` (bias), when kOn.
  __forceinline__ static void coef(float sc, float shift, float* a, float* c) {
    *a = sc * kK;
    *c = shift * kK;
  }
  __forceinline__ static float h(float x, float mean, float a, float c) {
    return fmaf(x - mean, a, c);
  }
  __forceinline__ static float act(float h) { return Act::template folded<T>(h); }
};

}  // namespace gn

}  // namespace kjit
