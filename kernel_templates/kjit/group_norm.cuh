// GroupNorm (+ activation) forward, specialized on the problem's sizes and the launch
// configuration.
//
// A "team" of kTpg threads owns one group: a few threads of a warp for tiny groups, the whole CTA
// for groups that fit one SM, or a whole cluster of kCluster CTAs (statistics exchanged through
// distributed shared memory) for large groups. The team holds its slice of the group in
// registers (kIters vectors of kVec elements per thread), so x is read once and y written once,
// and the statistics are exact two-pass (mean, then squared deviations) over the on-chip copy.
// Groups too large for a cluster's registers stream (kStream): two reads, one write. kKeepL2 (the
// host sets it when the tensor fits in L2): the first read asks L2 to keep x for the second, which
// drops it, and y is stored evict-first. Without it, a tensor larger than L2 would leave its last
// 60 MB marked evict-last for later kernels.
#pragma once

#include "kjit/gn_stats.cuh"
#include "kjit/pack.cuh"
#include "kjit/pdl.cuh"

namespace kjit {

// x, y: [N, C, S] (kNHWC = false) or [N, S, C] (kNHWC = true); w, b: [C] or null.
// One team per group; grid.x = ceil(N*G / teams per CTA) * kCluster.
template <class T, class P, bool kNHWC, int kCg, long long kS, int kThreads, int kTpg, int kVec,
          int kIters, int kCluster, bool kStream, bool kHasW, bool kHasB, class Act,
          bool kSmemAffine, bool kKeepL2>
__global__ void __launch_bounds__(kThreads)
    gn_fwd(const T* __restrict__ x, T* __restrict__ y, const P* __restrict__ w,
           const P* __restrict__ b, float eps, int G, long long num_groups) {
  constexpr long long kL = kCg * kS;
  constexpr int kNvec = static_cast<int>(kL / kVec);
  constexpr int kTeams = kThreads / kTpg;
  constexpr bool kAffine = kHasW || kHasB;
  static_assert(kL % kVec == 0, "a group must be a whole number of vectors");
  static_assert(!kNHWC || kCg % kVec == 0, "an NHWC vector must stay inside one group row");
  static_assert(kCluster == 1 || kTpg == kThreads, "a cluster team is whole CTAs");
  static_assert(!kStream || kTpg == kThreads, "streaming is for whole-CTA teams");

  pdl_wait();  // x, w, b and y may belong to the kernel before (programmatic launch)
  extern __shared__ float smem[];
  // The host reserves 128 floats before ss (group_norm_smem_bytes). No two regions overlap: a
  // warp may still read `red` while others have moved on to write slots or ss.
  float* red = smem;          // 96 floats: team_merge scratch
  float* slots = smem + 96;   // 3 floats: this CTA's partials for the cluster exchange
  float* bcast = smem + 100;  // 3 floats: the cluster's total, from warp 0
  float* ss = smem + 128;     // [kTeams][2][kCg]: per-channel scale and shift

  const int team = threadIdx.x / kTpg;
  const int t = threadIdx.x % kTpg;
  const unsigned rank = kCluster > 1 ? cluster_rank() : 0u;
  const long long group = static_cast<long long>(blockIdx.x / kCluster) * kTeams + team;
  const bool active = group < num_groups;
  const long long n = group / G;
  const int g = static_cast<int>(group - n * G);
  const long long C = static_cast<long long>(G) * kCg;
  const long long base = kNHWC ? n * kS * C + static_cast<long long>(g) * kCg
                               : (n * C + static_cast<long long>(g) * kCg) * kS;
  const T* __restrict__ xg = x + base;
  T* __restrict__ yg = y + base;

  // Element e of the group -> its offset from the group's first element, and its channel.
  // e >= 0 and < 2^31: unsigned 32-bit division by a constant is a shift or a multiply.
  auto offset = [&](int e) -> long long {
    if constexpr (kNHWC) {
      const unsigned u = static_cast<unsigned>(e);
      return static_cast<long long>(u / kCg) * C + u % kCg;
    } else {
      return e;
    }
  };
  auto channel = [&](int e) -> int {
    if constexpr (kNHWC) {
      return static_cast<int>(static_cast<unsigned>(e) % kCg);
    } else {
      return static_cast<int>(static_cast<unsigned>(e) / static_cast<unsigned>(kS));
    }
  };

  // Which vectors this thread owns: a CTA owns a contiguous run of its cluster's share.
  constexpr int kShare = kStream ? (kNvec + kCluster - 1) / kCluster : kIters * kTpg;
  const int first = static_cast<int>(rank) * kShare;
  const int last = first + kShare < kNvec ? first + kShare : kNvec;

  // Streaming: this thread's vectors of the CTA's share, kIters loads in flight at a time (all
  // issued before fn runs: fn may store, and a store's asm memory clobber would otherwise keep
  // the next load behind it).
  auto stream_slice = [&](auto&& fn, L2Hint hint) {
    const unsigned long long policy = kKeepL2 ? l2_policy(hint) : 0ull;
    for (int v0 = first + t; v0 < last; v0 += kTpg * kIters) {
      Pack<T, kVec> p[kIters];
#pragma unroll
      for (int i = 0; i < kIters; ++i) {
        const int vi = v0 + i * kTpg;
        if (vi < last) {
          const T* src = xg + offset(vi * kVec);
          if constexpr (kKeepL2) {
            p[i] = load_pack_hinted<T, kVec>(src, policy);
          } else {
            p[i] = load_pack<T, kVec>(src);
          }
        }
      }
#pragma unroll
      for (int i = 0; i < kIters; ++i) {
        const int vi = v0 + i * kTpg;
        if (vi < last) {
          float v[kVec];
          unpack_floats(p[i], v);
          fn(vi, v);
        }
      }
    }
  };

  // This thread's first channel's weight and bias, fetched now: loaded after the statistics,
  // their latency would add to every group's critical path.
  float w0 = 1.f, b0 = 0.f;
  if constexpr (kAffine && kSmemAffine) {
    if (t < kCg) {
      if constexpr (kHasW) w0 = to_float(w[g * kCg + t]);
      if constexpr (kHasB) b0 = to_float(b[g * kCg + t]);
    }
  }

  float mean, rstd;
  float held[kStream ? 1 : kIters][kVec];
  gn::Stat st{0.f, 0.f, 0.f};

  if constexpr (!kStream) {
    // Zero bits are 0.0 in every type: the sums below need no select per element.
    Pack<T, kVec> raw[kIters] = {};
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int vi = first + i * kTpg + t;
      if (active && vi < last) raw[i] = load_pack<T, kVec>(xg + offset(vi * kVec));
    }
    // Exact two-pass over everything this thread holds, then one merge over the team.
    float s = 0.f;
    int valid = 0;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int vi = first + i * kTpg + t;
      const bool ok = active && vi < last;
      valid += ok ? kVec : 0;
      unpack_floats(raw[i], held[i]);
#pragma unroll
      for (int j = 0; j < kVec; ++j) s += held[i][j];
    }
    const float tmean = valid ? __fdiv_rn(s, static_cast<float>(valid)) : 0.f;
    float m2 = 0.f;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int vi = first + i * kTpg + t;
      if (active && vi < last) {
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          const float d = held[i][j] - tmean;
          m2 += d * d;
        }
      }
    }
    st = gn::Stat{static_cast<float>(valid), tmean, m2};
  } else {
    // One read for the statistics (a Chan merge per vector), one more for the output.
    stream_slice(
        [&](int, const float(&v)[kVec]) { st = gn::merge(st, gn::local_stat<kVec>(v, kVec)); },
        L2Hint::kKeep);
  }
  st = gn::cluster_merge<kCluster>(gn::team_merge<kThreads, kTpg>(st, red), slots, bcast);
  mean = st.mean;
  rstd = rsqrtf(st.m2 * (1.f / static_cast<float>(kL)) + eps);
  // Peers may still read this CTA's slots: arrive now, wait before exiting.
  gn::cluster_merge_done<kCluster>();

  // y = (x - mean) * scale[c] + b[c] with scale = w * rstd. The mean is not folded into the
  // shift (x * scale + (b - mean * scale)): that cancels badly when |mean| >> std (gn::Fold).
  using Fold = gn::Fold<T, Act>;
  float* my_ss = ss + team * 2 * kCg;
  if constexpr (kAffine && kSmemAffine) {
    for (int c = t; c < kCg; c += kTpg) {
      const bool first_c = c == t;
      const float sc = (first_c ? w0 : kHasW ? to_float(w[g * kCg + c]) : 1.f) * rstd;
      const float shift = first_c ? b0 : kHasB ? to_float(b[g * kCg + c]) : 0.f;
      if constexpr (Fold::kOn) {
        Fold::coef(sc, shift, &my_ss[c], &my_ss[kCg + c]);
      } else {
        my_ss[c] = sc;
        my_ss[kCg + c] = shift;
      }
    }
    gn::team_barrier<kThreads, kTpg>();
  }
  float a_plain = 0.f, c_plain = 0.f;  // no affine, 16-bit
  if constexpr (Fold::kOn && !kAffine) Fold::coef(rstd, 0.f, &a_plain, &c_plain);
  auto apply = [&](float v, int c) -> float {
    if constexpr (Fold::kOn) {
      float a = a_plain, cc = c_plain;
      if constexpr (kAffine && kSmemAffine) {
        a = my_ss[c];
        cc = my_ss[kCg + c];
      } else if constexpr (kAffine) {
        Fold::coef((kHasW ? to_float(w[g * kCg + c]) : 1.f) * rstd,
                   kHasB ? to_float(b[g * kCg + c]) : 0.f, &a, &cc);
      }
      return Fold::act(Fold::h(v, mean, a, cc));
    } else {
      float z;
      if constexpr (!kAffine) {
        z = (v - mean) * rstd;
      } else if constexpr (kSmemAffine) {
        z = fmaf(v - mean, my_ss[c], my_ss[kCg + c]);
      } else {
        const float sc = (kHasW ? to_float(w[g * kCg + c]) : 1.f) * rstd;
        z = fmaf(v - mean, sc, kHasB ? to_float(b[g * kCg + c]) : 0.f);
      }
      return Act::template apply<T>(z);
    }
  };
  auto store = [&](int vi, const float(&vals)[kVec]) {
    float out[kVec];
    const int e0 = vi * kVec;
    // NCHW with S a multiple of the vector width: the whole vector is one channel.
    const int c0 = channel(e0);
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const int c = kNHWC ? c0 + j : (kS % kVec == 0 ? c0 : channel(e0 + j));
      out[j] = apply(vals[j], c);
    }
    // Streaming y evicts first from L2, where x waits for its second read.
    store_pack<T, kVec, kStream && kKeepL2>(yg + offset(e0), pack_floats<T, kVec>(out));
  };

  if (active) {
    if constexpr (!kStream) {
#pragma unroll
      for (int i = 0; i < kIters; ++i) {
        const int vi = first + i * kTpg + t;
        if (vi < last) store(vi, held[i]);
      }
    } else {
      stream_slice([&](int vi, const float(&v)[kVec]) { store(vi, v); }, L2Hint::kDrop);
    }
  }
  if constexpr (kCluster > 1) cluster_wait();
}

}  // namespace kjit
