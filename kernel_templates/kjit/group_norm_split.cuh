// GroupNorm (+ activation) forward as two kernels, for a few large groups in a tensor L2 holds
// (NCHW).
//
// A kernel that holds a group on chip waits, between its load and its store phase, for the
// slowest CTA of the group's cluster, and nothing overlaps the two phases. Here gn_partials reads
// x once at full speed (each CTA one chunk, asking L2 to keep it) and writes each chunk's
// (mean, M2); gn_apply merges its group's partials, reads x again (from L2, dropping it) and
// writes y evict-first. Statistics stay exact: two-pass within a thread, Chan merges beyond.
//
// Both kernels cut a group of kL elements into chunks of kThreads * kIters vectors of kVec (the
// last one may be short); grid.x = groups * chunks, one CTA per chunk.
#pragma once

#include "kjit/gn_stats.cuh"
#include "kjit/pack.cuh"
#include "kjit/pdl.cuh"

namespace kjit {
namespace gn_split {

template <long long kL, int kThreads, int kVec, int kIters>
struct Chunks {
  static constexpr int kNvec = static_cast<int>(kL / kVec);
  static constexpr int kChunk = kThreads * kIters;  // vectors
  static constexpr int kCount = (kNvec + kChunk - 1) / kChunk;
  static_assert(kL % kVec == 0, "a group must be a whole number of vectors");
};

// This thread's kIters vectors of the chunk starting at vector `first` (vectors past the group
// are zero: 0.0 in every type).
template <class T, int kThreads, int kVec, int kIters, int kNvec, bool kHinted>
__forceinline__ void load_chunk(const T* __restrict__ xg, int first, unsigned long long policy,
                                Pack<T, kVec> (&raw)[kIters]) {
#pragma unroll
  for (int i = 0; i < kIters; ++i) {
    const int vi = first + i * kThreads + static_cast<int>(threadIdx.x);
    if (vi < kNvec) {
      if constexpr (kHinted) {
        raw[i] = load_pack_hinted<T, kVec>(xg + static_cast<long long>(vi) * kVec, policy);
      } else {
        raw[i] = load_pack<T, kVec>(xg + static_cast<long long>(vi) * kVec);
      }
    } else {
      raw[i] = Pack<T, kVec>{};
    }
  }
}

// The statistics of a chunk this CTA holds in raw (every thread gets them). A correctly rounded
// per-thread mean: a constant chunk then has M2 = 0 exactly (see gn_fwd).
template <class T, int kThreads, int kVec, int kIters, int kNvec>
__forceinline__ gn::Stat chunk_stat(const Pack<T, kVec> (&raw)[kIters], int first, float* red) {
  float s = 0.f;
  int valid = 0;
#pragma unroll
  for (int i = 0; i < kIters; ++i) {
    const bool ok = first + i * kThreads + static_cast<int>(threadIdx.x) < kNvec;
    valid += ok ? kVec : 0;
    float f[kVec];
    unpack_floats(raw[i], f);
#pragma unroll
    for (int j = 0; j < kVec; ++j) s += f[j];
  }
  const float tmean = valid ? __fdiv_rn(s, static_cast<float>(valid)) : 0.f;
  float m2 = 0.f;
#pragma unroll
  for (int i = 0; i < kIters; ++i) {
    if (first + i * kThreads + static_cast<int>(threadIdx.x) < kNvec) {
      float f[kVec];
      unpack_floats(raw[i], f);
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const float d = f[j] - tmean;
        m2 += d * d;
      }
    }
  }
  return gn::team_merge<kThreads, kThreads>(gn::Stat{static_cast<float>(valid), tmean, m2}, red);
}

// The statistics of a group from its kCount partials pg, one (mean, M2) per piece of kPiece
// vectors (the last may be short, and pieces past the group empty). Every warp merges them
// itself: the same inputs in the same lanes give every warp of every CTA of the group the same
// bits, with no barrier. The partials are rewritten by every call: read from L2
// (ld.global.cg), never from a read-only or L1 copy, in asm volatile with a memory clobber, so
// no load moves above the caller's wait (the clobber left the sm_90 code byte-identical: it
// states the ordering rather than relying on the compiler's choice).
template <int kCount, int kNvec, int kPiece, int kVec>
__forceinline__ gn::Stat merge_partials(const float2* pg) {
  gn::Stat st{0.f, 0.f, 0.f};
  for (int k = static_cast<int>(threadIdx.x & 31); k < kCount; k += 32) {
    float2 m;
    asm volatile("ld.global.cg.v2.f32 {%0, %1}, [%2];"
                 : "=f"(m.x), "=f"(m.y)
                 : "l"(pg + k)
                 : "memory");
    const int nv = kNvec - k * kPiece < kPiece ? kNvec - k * kPiece : kPiece;
    if (nv > 0) st = gn::merge(st, gn::Stat{static_cast<float>(nv * kVec), m.x, m.y});
  }
  return gn::warp_merge<32>(st);
}

// Writes y for the chunk this CTA holds in raw, from its group's statistics st (M2 over all kL
// elements).
template <class T, class P, int kCg, long long kS, int kThreads, int kVec, int kIters, bool kHasW,
          bool kHasB, class Act, bool kEvictFirst>
__forceinline__ void apply_stat(const Pack<T, kVec> (&raw)[kIters], int first, gn::Stat st,
                                T* __restrict__ yg, const P* __restrict__ w,
                                const P* __restrict__ b, float eps, int g) {
  constexpr long long kL = kCg * kS;
  using Ch = Chunks<kL, kThreads, kVec, kIters>;
  const float mean = st.mean;
  const float rstd = rsqrtf(st.m2 * (1.f / static_cast<float>(kL)) + eps);

  using Fold = gn::Fold<T, Act>;
  // Scale and shift of channel c (of this group), as gn_fwd computes them.
  auto coef = [&](int c, float* a, float* sh) {
    const float sc = (kHasW ? to_float(w[g * kCg + c]) : 1.f) * rstd;
    const float bb = kHasB ? to_float(b[g * kCg + c]) : 0.f;
    if constexpr (Fold::kOn) {
      Fold::coef(sc, bb, a, sh);
    } else {
      *a = sc;
      *sh = bb;
    }
  };
  auto act = [&](float v, float a, float sh) -> float {
    if constexpr (Fold::kOn) {
      return Fold::act(Fold::h(v, mean, a, sh));
    } else {
      const float z = fmaf(v - mean, a, sh);
      return Act::template apply<T>(z);
    }
  };
#pragma unroll
  for (int i = 0; i < kIters; ++i) {
    const int vi = first + i * kThreads + static_cast<int>(threadIdx.x);
    if (vi < Ch::kNvec) {
      // An element's index in its group is < 2^31 (validate): unsigned division by the
      // constant kS is a multiply and a shift, where 64-bit would be a library call.
      const unsigned e0 = static_cast<unsigned>(vi) * kVec;
      constexpr unsigned kSu = static_cast<unsigned>(kS);
      float f[kVec], out[kVec];
      unpack_floats(raw[i], f);
      float a, sh;
      coef(static_cast<int>(e0 / kSu), &a, &sh);
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        // With kS a multiple of the vector width the whole vector is one channel.
        if (kS % kVec != 0 && j > 0 && (e0 + j) % kSu == 0)
          coef(static_cast<int>((e0 + j) / kSu), &a, &sh);
        out[j] = act(f[j], a, sh);
      }
      store_pack<T, kVec, kEvictFirst>(yg + e0, pack_floats<T, kVec>(out));
    }
  }
}

// Merges the group's partials pg (one (mean, M2) per chunk) and writes y for the chunk this CTA
// holds in raw.
template <class T, class P, int kCg, long long kS, int kThreads, int kVec, int kIters, bool kHasW,
          bool kHasB, class Act, bool kEvictFirst>
__forceinline__ void apply_chunk(const Pack<T, kVec> (&raw)[kIters], int first, const float2* pg,
                                 T* __restrict__ yg, const P* __restrict__ w,
                                 const P* __restrict__ b, float eps, int g) {
  using Ch = Chunks<kCg * kS, kThreads, kVec, kIters>;
  apply_stat<T, P, kCg, kS, kThreads, kVec, kIters, kHasW, kHasB, Act, kEvictFirst>(
      raw, first, merge_partials<Ch::kCount, Ch::kNvec, Ch::kChunk, kVec>(pg), yg, w, b, eps, g);
}

}  // namespace gn_split

// x: [N*G groups][kL]; part: [N*G][chunks] of (mean, M2) per chunk.
template <class T, long long kL, int kThreads, int kVec, int kIters, bool kKeepL2>
__global__ void __launch_bounds__(kThreads)
    gn_partials(const T* __restrict__ x, float2* __restrict__ part) {
  using Ch = gn_split::Chunks<kL, kThreads, kVec, kIters>;
  __shared__ float red[96];
  pdl_wait();  // x may come from the kernel before (programmatic launch)
  // gn_apply's CTAs may be scheduled now, to wait in place for these partials: its launch
  // latency then overlaps this kernel.
  pdl_launch_dependents();
  const long long group = blockIdx.x / Ch::kCount;
  const int first = static_cast<int>(blockIdx.x % Ch::kCount) * Ch::kChunk;
  const T* __restrict__ xg = x + group * kL;
  Pack<T, kVec> raw[kIters];
  gn_split::load_chunk<T, kThreads, kVec, kIters, Ch::kNvec, kKeepL2>(
      xg, first, kKeepL2 ? l2_policy(L2Hint::kKeep) : 0ull, raw);
  const gn::Stat st = gn_split::chunk_stat<T, kThreads, kVec, kIters, Ch::kNvec>(raw, first, red);
  if (threadIdx.x == 0) part[blockIdx.x] = make_float2(st.mean, st.m2);
}

// x, y: [N, C, kS] (y may be x); part: gn_partials' output; w, b: [C] or null.
template <class T, class P, int kCg, long long kS, int kThreads, int kVec, int kIters, bool kHasW,
          bool kHasB, class Act, bool kKeepL2>
__global__ void __launch_bounds__(kThreads)
    gn_apply(const T* __restrict__ x, T* __restrict__ y, const float2* part,
             const P* __restrict__ w, const P* __restrict__ b, float eps, int G) {
  constexpr long long kL = kCg * kS;
  using Ch = gn_split::Chunks<kL, kThreads, kVec, kIters>;
  const long long group = blockIdx.x / Ch::kCount;
  const int first = static_cast<int>(blockIdx.x % Ch::kCount) * Ch::kChunk;
  const int g = static_cast<int>(group % G);

  // Nothing is read before the wait. Reading x before it (it was complete before gn_partials
  // triggered) was 0.2-0.7 us faster on the H200, but gave wrong results now and then: the
  // programmatic-launch contract makes no promise about reads before the wait, and an SM's L1 may
  // still hold lines of an earlier buffer at the same address.
  pdl_wait();  // the partials; x; y, which the kernel before the pair may still read
  Pack<T, kVec> raw[kIters];
  gn_split::load_chunk<T, kThreads, kVec, kIters, Ch::kNvec, kKeepL2>(
      x + group * kL, first, kKeepL2 ? l2_policy(L2Hint::kDrop) : 0ull, raw);
  gn_split::apply_chunk<T, P, kCg, kS, kThreads, kVec, kIters, kHasW, kHasB, Act, kKeepL2>(
      raw, first, part + group * Ch::kCount, y + group * kL, w, b, eps, g);
}

}  // namespace kjit
