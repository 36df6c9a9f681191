// GroupNorm (+ activation) forward for NCHW groups staged in shared memory (sm_90).
//
// Each CTA owns a contiguous slice of a group (a cluster of kCluster CTAs per group, or, in
// gn_coop_smem, CTAs of a cooperative launch that meet through global memory). One thread
// issues the slice as one bulk copy into shared memory; the threads then take the statistics from
// that on-chip copy (exact two-pass per thread, Chan merge over the CTA and the cluster) and
// write y straight from it: one read of x, one write of y. Threads hold no data in registers, so
// an SM runs several CTAs and one CTA's stores overlap another's loads, which the register-held
// kernel (group_norm.cuh) cannot do when its slice takes the whole register file.
//
// A double-buffered persistent variant (the next group's copy in flight while the current one is
// stored) was measured on the H200 and lost everywhere (1x128x256x256 f32: 46 us against 36 us):
// two buffers leave room for one CTA per SM, and several independent CTAs per SM overlap better.
#pragma once

#include "kjit/bulk_copy.cuh"
#include "kjit/gn_stats.cuh"
#include "kjit/group_norm_split.cuh"
#include "kjit/pack.cuh"
#include "kjit/pdl.cuh"
#if __CUDA_ARCH__ >= 900
#include "kjit/group_barrier.cuh"
#endif

namespace kjit {

// Dynamic shared memory layout, mirrored by the host (group_norm_smem_bytes).
struct GnSmemLayout {
  static constexpr int kBars = 0;      // 1 mbarrier
  static constexpr int kRed = 64;      // 96 floats: CTA reduction scratch
  static constexpr int kSlots = 448;   // 3 floats: this CTA's partials for the cluster
  static constexpr int kBcast = 464;   // 3 floats: the cluster's total
  static constexpr int kAffine = 512;  // [Cg] float2: (weight, bias); 16-bit: then (a, c)
  static constexpr int data(int cg, bool affine) {
    return kAffine + (affine ? (cg * 8 + 127) / 128 * 128 : 0);
  }
};

// CTAs per SM the register budget is cut for: held vectors (4 registers each) leave up to 64
// (held <= 8) or 128 (held <= 16) registers per thread; without them, one CTA is enough.
constexpr int gn_smem_min_blocks(int threads, int held) {
  const int per_thread = held > 8 ? 128 : 64;
  return held == 0 || threads * per_thread > 65536 ? 1 : 65536 / (threads * per_thread);
}

namespace gn_smem {

// The staged kernels' body. x, y: [N, C, S]; w, b: [C] or null; x, y 16-byte aligned and Cg * S
// a multiple of 16 / sizeof(T). Each group is cut into kParts slices of kShare vectors, one per
// CTA: grid.x = N * G * kParts. The CTAs of a group merge their statistics either over a
// thread-block cluster (kCoop false: kParts is the cluster size, distributed shared memory) or,
// in a cooperative launch (kCoop), through `part` (a float2 per CTA) and a group_barrier on
// `bar` (two words per group).
//
// kHeld > 0: the last kThreads * kHeld vectors of the slice are loaded by the threads into
// registers instead, so the slice takes less shared memory and four CTAs fit on an SM (a 1 MB
// fp32 group over a 16-CTA cluster is 64 KB per CTA: three fit in shared memory alone, which
// leaves 32 such groups in two waves).
template <class T, class P, int kCg, long long kS, int kThreads, int kShare, int kHeld, int kParts,
          bool kCoop, bool kHasW, bool kHasB, class Act>
__forceinline__ void body(const T* __restrict__ x, T* __restrict__ y, float2* part, unsigned* bar,
                          const P* __restrict__ w, const P* __restrict__ b, float eps, int G) {
  constexpr int kCluster = kCoop ? 1 : kParts;
  constexpr int kVec = 16 / sizeof(T);
  constexpr long long kL = kCg * kS;
  constexpr int kNvec = static_cast<int>(kL / kVec);
  constexpr bool kAffine = kHasW || kHasB;
  // Vectors per thread; loops over them unroll by 4 only: the data stays in shared memory, and a
  // full unroll of 100+ iterations costs seconds of NVRTC time for nothing.
  constexpr int kStaged = kShare - kThreads * kHeld;  // vectors in shared memory
  constexpr int kPer = (kStaged + kThreads - 1) / kThreads;
  static_assert(kStaged > 0, "the held part must leave some of the slice to stage");
  static_assert(kL % kVec == 0, "a group must be a whole number of 16-byte vectors");
  using V = Pack<T, kVec>;
#if __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char smem[];
  auto* bars = reinterpret_cast<unsigned long long*>(smem + GnSmemLayout::kBars);
  float* red = reinterpret_cast<float*>(smem + GnSmemLayout::kRed);
  float* slots = reinterpret_cast<float*>(smem + GnSmemLayout::kSlots);
  float* bcast = reinterpret_cast<float*>(smem + GnSmemLayout::kBcast);
  auto* aff = reinterpret_cast<float2*>(smem + GnSmemLayout::kAffine);
  V* data = reinterpret_cast<V*>(smem + GnSmemLayout::data(kCg, kAffine));

  const int t = threadIdx.x;
  const unsigned rank = kCoop ? blockIdx.x % kParts : kCluster > 1 ? cluster_rank() : 0u;
  const long long group = blockIdx.x / kParts;  // the grid is exact: kParts CTAs per group
  const long long n = group / G;
  const int g = static_cast<int>(group - n * G);
  const int first = static_cast<int>(rank) * kShare;
  const int total = kNvec - first < kShare ? kNvec - first : kShare;  // may be <= 0
  const int count = total < kStaged ? total : kStaged;                // staged vectors

  pdl_wait();  // x, w, b and y may belong to the kernel before (programmatic launch)
  // One thread copies the staged part (NCHW: a group is contiguous); an empty one copies nothing.
  const T* __restrict__ xg = x + group * kL + static_cast<long long>(first) * kVec;
  if (t == 0) {
    mbar_init(&bars[0]);
    mbar_init_fence();
    if (count > 0) {
      mbar_expect_tx(&bars[0], count * 16u);
      bulk_load(data, xg, count * 16u, &bars[0]);
    }
  }
  // The held part: vector kStaged + t + r * kThreads of the slice.
  V held[kHeld > 0 ? kHeld : 1];
#pragma unroll
  for (int r = 0; r < kHeld; ++r) {
    const int i = kStaged + t + r * kThreads;
    if (i < total) held[r] = load_pack<T, kVec>(xg + static_cast<long long>(i) * kVec);
  }
  if constexpr (kAffine) {  // fetched while the slice lands
    for (int c = t; c < kCg; c += kThreads)
      aff[c] = make_float2(kHasW ? to_float(w[g * kCg + c]) : 1.f,
                           kHasB ? to_float(b[g * kCg + c]) : 0.f);
  }
  __syncthreads();  // the barrier is initialised before anyone waits on it
  if (count > 0) mbar_wait(&bars[0], 0);

  // fn(i, v) for each of this thread's vectors: staged ones (shared memory), then held ones.
  auto visit = [&](auto&& fn) {
#pragma unroll 4
    for (int k = 0; k < kPer; ++k) {
      const int i = t + k * kThreads;
      // load_pack: one 16-byte shared load (copying data[i] itself gave 8 ld.shared.u16 per
      // bf16 vector; ncu counted 26 instructions per element).
      if (i < count) fn(i, load_pack<T, kVec>(reinterpret_cast<const T*>(data + i)));
    }
#pragma unroll
    for (int r = 0; r < kHeld; ++r) {
      const int i = kStaged + t + r * kThreads;
      if (i < total) fn(i, held[r]);
    }
  };
  // Exact two-pass over this thread's vectors, then one merge over the cluster.
  float s = 0.f;
  int valid = 0;
  visit([&](int, const V& v) {
    float f[kVec];
    unpack_floats(v, f);
#pragma unroll
    for (int j = 0; j < kVec; ++j) s += f[j];
    valid += kVec;
  });
  const float tmean = valid ? __fdiv_rn(s, static_cast<float>(valid)) : 0.f;
  float m2 = 0.f;
  visit([&](int, const V& v) {
    float f[kVec];
    unpack_floats(v, f);
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const float d = f[j] - tmean;
      m2 += d * d;
    }
  });
  gn::Stat st =
      gn::team_merge<kThreads, kThreads>(gn::Stat{static_cast<float>(valid), tmean, m2}, red);
  if constexpr (kCoop) {
    if (t == 0) {
      part[blockIdx.x] = make_float2(st.mean, st.m2);
      group_barrier(bar + 2 * group, kParts);
    }
    __syncthreads();  // the group's partials are all visible (thread 0 acquired them)
    st = gn_split::merge_partials<kParts, kNvec, kShare, kVec>(part + group * kParts);
  } else {
    (void)part;
    (void)bar;
    st = gn::cluster_merge<kCluster>(st, slots, bcast);
  }
  const float mean = st.mean;
  const float rstd = rsqrtf(st.m2 * (1.f / static_cast<float>(kL)) + eps);
  gn::cluster_merge_done<kCluster>();  // peers may still read slots until the end

  // (weight, bias) -> the store's (a, c) of gn::Fold, or (w * rstd, b) for fp32.
  using Fold = gn::Fold<T, Act>;
  auto coef = [&](float2 wb) {
    float a = wb.x * rstd, c = wb.y;
    if constexpr (Fold::kOn) Fold::coef(wb.x * rstd, wb.y, &a, &c);
    return make_float2(a, c);
  };
  // 16-bit: each channel's (a, c) once per CTA, not once per vector (three FMULs per 8 elements).
  // H200: 16x512x64x64 bf16 43.6 us vs 45.9. fp32 (one FMUL per 4 elements) keeps the per-vector
  // product: the extra barrier cost more (2x320x64x64 f32 11.1 us vs 10.8).
  constexpr bool kPrecomputed = kAffine && Fold::kOn;
  if constexpr (kPrecomputed) {
    for (int c = t; c < kCg; c += kThreads) aff[c] = coef(aff[c]);
    __syncthreads();
  }
  auto coef_of = [&](unsigned c) { return kPrecomputed ? aff[c] : coef(aff[c]); };
  const float2 plain = coef(make_float2(1.f, 0.f));

  T* __restrict__ yg = y + group * kL + static_cast<long long>(first) * kVec;
  auto store = [&](int i, const V& v) {
    // e0 >= 0 and < 2^31: unsigned division by the constant kS is a shift or a multiply.
    const unsigned e0 = static_cast<unsigned>(first + i) * kVec;
    const unsigned c0 = e0 / static_cast<unsigned>(kS);
    float f[kVec], out[kVec];
    unpack_floats(v, f);
    float2 ac = kAffine ? coef_of(c0) : plain;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      if (kAffine && kS % kVec != 0 && j > 0 && (e0 + j) % static_cast<unsigned>(kS) == 0)
        ac = coef_of((e0 + j) / static_cast<unsigned>(kS));
      if constexpr (Fold::kOn) {  // 16-bit: see gn::Fold
        out[j] = Fold::act(Fold::h(f[j], mean, ac.x, ac.y));
      } else {
        const float z = fmaf(f[j] - mean, ac.x, ac.y);
        out[j] = Act::template apply<T>(z);
      }
    }
    store_pack<T, kVec>(yg + static_cast<long long>(i) * kVec, pack_floats<T, kVec>(out));
  };
  visit(store);
  if constexpr (kCluster > 1) cluster_wait();
#else
  __trap();  // the host only picks these kernels on sm_90 and newer
#endif
}

}  // namespace gn_smem

// A group per cluster of kCluster CTAs (1: a CTA). num_groups: unused, the grid is exact.
template <class T, class P, int kCg, long long kS, int kThreads, int kShare, int kHeld,
          int kCluster, bool kHasW, bool kHasB, class Act>
__global__ void __launch_bounds__(kThreads, gn_smem_min_blocks(kThreads, kHeld))
    gn_fwd_smem(const T* __restrict__ x, T* __restrict__ y, const P* __restrict__ w,
                const P* __restrict__ b, float eps, int G, long long num_groups) {
  (void)num_groups;
  gn_smem::body<T, P, kCg, kS, kThreads, kShare, kHeld, kCluster, false, kHasW, kHasB, Act>(
      x, y, nullptr, nullptr, w, b, eps, G);
}

// A group per kParts CTAs of a cooperative launch (every CTA resident at once), meeting through
// global memory: no cluster, so a group may span more CTAs than a cluster holds and the CTAs may
// sit on any SM. part: a float2 per CTA; bar: two words per group, whose first is 0
// (group_barrier). Parameters as gn_coop's.
template <class T, class P, int kCg, long long kS, int kThreads, int kShare, int kHeld, int kParts,
          bool kHasW, bool kHasB, class Act>
__global__ void __launch_bounds__(kThreads, gn_smem_min_blocks(kThreads, kHeld))
    gn_coop_smem(const T* __restrict__ x, T* __restrict__ y, float2* part, unsigned* bar,
                 const P* __restrict__ w, const P* __restrict__ b, float eps, int G) {
  gn_smem::body<T, P, kCg, kS, kThreads, kShare, kHeld, kParts, true, kHasW, kHasB, Act>(
      x, y, part, bar, w, b, eps, G);
}

}  // namespace kjit
