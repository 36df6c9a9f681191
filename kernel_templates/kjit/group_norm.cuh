// GroupNorm (+ SiLU) forward, specialized on the problem's sizes and the launch configuration.
//
// A "team" of kTpg threads owns one group: a few threads of a warp for tiny groups, the whole CTA
// for groups that fit one SM, or a whole cluster of kCluster CTAs (statistics exchanged through
// distributed shared memory) for large groups. The team holds its slice of the group in
// registers (kIters vectors of kVec elements per thread), so x is read once and y written once,
// and the statistics are exact two-pass (mean, then squared deviations) over the on-chip copy.
// Groups too large for a cluster's registers stream (kStream): two reads, one write.
#pragma once

#include "kjit/cluster.cuh"
#include "kjit/types.cuh"

namespace kjit {

template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// The memory access behind a Pack: one 16/8/4-byte instruction. Copying the struct itself lets
// the compiler split stores into per-element ones (seen in the PTX: 8 x st.global.u16 per bf16
// vector), which multiplies L2 transactions.
template <int kBytes>
struct Word;
template <>
struct Word<16> {
  using type = uint4;
};
template <>
struct Word<8> {
  using type = uint2;
};
template <>
struct Word<4> {
  using type = unsigned int;
};
template <>
struct Word<2> {
  using type = unsigned short;
};

template <class T, int V>
__forceinline__ Pack<T, V> load_pack(const T* p) {
  using W = typename Word<sizeof(T) * V>::type;
  const W w = *reinterpret_cast<const W*>(p);
  Pack<T, V> r;
  *reinterpret_cast<W*>(&r) = w;
  return r;
}

__forceinline__ unsigned bits_of(float v) {
  return __float_as_uint(v);
}
__forceinline__ unsigned bits_of(half v) {
  return v.bits;
}
__forceinline__ unsigned bits_of(bfloat16 v) {
  return v.bits;
}

// 32-bit word k of a pack, assembled from its elements' bits.
template <class T, int V>
__forceinline__ unsigned word_of(const Pack<T, V>& v, int k) {
  if constexpr (sizeof(T) == 4) {
    return bits_of(v.v[k]);
  } else {
    return bits_of(v.v[2 * k]) | (bits_of(v.v[2 * k + 1]) << 16);
  }
}

// Builds the vector register first so the store is one st.global.v4 (or v2 / scalar).
template <class T, int V>
__forceinline__ void store_pack(T* p, const Pack<T, V>& v) {
  constexpr int kBytes = sizeof(T) * V;
  // Inline PTX: NVVM split a plain uint4 store of assembled words into scalar stores.
  if constexpr (kBytes == 16) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(word_of(v, 0)),
                 "r"(word_of(v, 1)), "r"(word_of(v, 2)), "r"(word_of(v, 3))
                 : "memory");
  } else if constexpr (kBytes == 8) {
    asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(p), "r"(word_of(v, 0)), "r"(word_of(v, 1))
                 : "memory");
  } else {
    *p = v.v[0];
  }
}

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

// Merge of one Stat per CTA over the cluster, through distributed shared memory. `slot` holds
// 3 floats and must stay untouched until the cluster's final barrier.
template <int kCluster>
__forceinline__ Stat cluster_merge(Stat s, float* slot) {
  if constexpr (kCluster == 1) {
    return s;
  } else {
    if (threadIdx.x == 0) {
      slot[0] = s.n;
      slot[1] = s.mean;
      slot[2] = s.m2;
    }
    cluster_sync();
    const unsigned lane = threadIdx.x & 31;
    Stat r{0.f, 0.f, 0.f};
    if (lane < kCluster)
      r = Stat{cluster_load(slot, lane), cluster_load(slot + 1, lane),
               cluster_load(slot + 2, lane)};
    return warp_merge<32>(r);  // every lane gets the cluster's total
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

__forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// silu(z) = z * sigmoid(z). fp32 outputs: exp and a fast divide (~2 ulp, two MUFU ops);
// 16-bit outputs: sigmoid through one tanh.approx (error far below a bf16/fp16 ulp).
template <class T>
__forceinline__ float silu(float z) {
  if constexpr (sizeof(T) == 4) {
    return __fdividef(z, 1.f + __expf(-z));
  } else {
    return z * fmaf(0.5f, tanh_approx(0.5f * z), 0.5f);
  }
}

}  // namespace gn

// x, y: [N, C, S] (kNHWC = false) or [N, S, C] (kNHWC = true); w, b: [C] or null.
// One team per group; grid.x = ceil(N*G / teams per CTA) * kCluster.
template <class T, class P, bool kNHWC, int kCg, long long kS, int kThreads, int kTpg, int kVec,
          int kIters, int kCluster, bool kStream, bool kHasW, bool kHasB, bool kSilu,
          bool kSmemAffine>
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

  extern __shared__ float smem[];
  float* red = smem;         // 32 floats: block reduction scratch
  float* slots = smem + 32;  // 2 floats: this CTA's partials for the cluster exchange
  float* ss = smem + 64;     // [kTeams][2][kCg]: per-channel scale and shift

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
  auto offset = [&](int e) -> long long {
    if constexpr (kNHWC) {
      return static_cast<long long>(e / kCg) * C + e % kCg;
    } else {
      return e;
    }
  };
  auto channel = [&](int e) -> int {
    if constexpr (kNHWC) {
      return e % kCg;
    } else {
      return static_cast<int>(e / kS);
    }
  };

  // Which vectors this thread owns: a CTA owns a contiguous run of its cluster's share.
  constexpr int kShare = kStream ? (kNvec + kCluster - 1) / kCluster : kIters * kTpg;
  const int first = static_cast<int>(rank) * kShare;
  const int last = first + kShare < kNvec ? first + kShare : kNvec;

  // Streaming: this thread's vectors of the CTA's share, kIters loads in flight at a time.
  auto stream_slice = [&](auto&& fn) {
    for (int v0 = first + t; v0 < last; v0 += kTpg * kIters) {
#pragma unroll
      for (int i = 0; i < kIters; ++i) {
        const int vi = v0 + i * kTpg;
        if (vi < last) {
          const Pack<T, kVec> p = load_pack<T, kVec>(xg + offset(vi * kVec));
          float v[kVec];
#pragma unroll
          for (int j = 0; j < kVec; ++j) v[j] = to_float(p.v[j]);
          fn(vi, v);
        }
      }
    }
  };

  float mean, rstd;
  float held[kStream ? 1 : kIters][kVec];
  gn::Stat st{0.f, 0.f, 0.f};

  if constexpr (!kStream) {
    Pack<T, kVec> raw[kIters];
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
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        held[i][j] = ok ? to_float(raw[i].v[j]) : 0.f;
        s += held[i][j];
      }
    }
    const float tmean = valid ? __fdividef(s, static_cast<float>(valid)) : 0.f;
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
        [&](int, const float(&v)[kVec]) { st = gn::merge(st, gn::local_stat<kVec>(v, kVec)); });
  }
  st = gn::cluster_merge<kCluster>(gn::team_merge<kThreads, kTpg>(st, red), slots);
  mean = st.mean;
  rstd = rsqrtf(st.m2 * (1.f / static_cast<float>(kL)) + eps);
  // Peers may still read this CTA's slots: arrive now, wait before exiting.
  if constexpr (kCluster > 1) cluster_arrive();

  // y = (x - mean) * scale[c] + b[c] with scale = w * rstd. Folding the mean into the shift
  // (x * scale + (b - mean * scale)) saves a subtraction but cancels badly when |mean| >> std.
  float* my_ss = ss + team * 2 * kCg;
  if constexpr (kAffine && kSmemAffine) {
    for (int c = t; c < kCg; c += kTpg) {
      my_ss[c] = (kHasW ? to_float(w[g * kCg + c]) : 1.f) * rstd;
      my_ss[kCg + c] = kHasB ? to_float(b[g * kCg + c]) : 0.f;
    }
    gn::team_barrier<kThreads, kTpg>();
  }
  auto apply = [&](float v, int c) -> float {
    float z;
    if constexpr (!kAffine) {
      z = (v - mean) * rstd;
    } else if constexpr (kSmemAffine) {
      z = fmaf(v - mean, my_ss[c], my_ss[kCg + c]);
    } else {
      const float sc = (kHasW ? to_float(w[g * kCg + c]) : 1.f) * rstd;
      z = fmaf(v - mean, sc, kHasB ? to_float(b[g * kCg + c]) : 0.f);
    }
    return kSilu ? gn::silu<T>(z) : z;
  };
  auto store = [&](int vi, const float(&vals)[kVec]) {
    Pack<T, kVec> out;
    const int e0 = vi * kVec;
    // NCHW with S a multiple of the vector width: the whole vector is one channel.
    const int c0 = channel(e0);
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const int c = kNHWC ? c0 + j : (kS % kVec == 0 ? c0 : channel(e0 + j));
      out.v[j] = from_float<T>(apply(vals[j], c));
    }
    store_pack<T, kVec>(yg + offset(e0), out);
  };

  if (active) {
    if constexpr (!kStream) {
#pragma unroll
      for (int i = 0; i < kIters; ++i) {
        const int vi = first + i * kTpg + t;
        if (vi < last) store(vi, held[i]);
      }
    } else {
      stream_slice([&](int vi, const float(&v)[kVec]) { store(vi, v); });
    }
  }
  if constexpr (kCluster > 1) cluster_wait();
}

}  // namespace kjit
