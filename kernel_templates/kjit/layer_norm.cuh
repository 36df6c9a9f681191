// LayerNorm and RMSNorm over the rows of a [rows, width] tensor, with an optional residual add
// before and an activation after (kjit/ops/layer_norm.hpp has the semantics).
//
// A team of kTpr threads owns a row: a few threads or a warp for short rows, the whole CTA for
// medium ones, or a thread-block cluster of kCluster CTAs (one team each, sm_90) for long rows.
// The team holds its row in registers (kIters vectors of kVec elements per thread): x is read
// once and y written once. kStream: rows no cluster holds are read twice, once for the statistics
// and once to normalize (from L2 when the row fits there, from L1 where a CTA streams an fp32 row
// of at most 16 KB alone; LayerNorm then reads such a row a third time, from L1, for its
// deviations).
//
// Statistics in fp32. LayerNorm is two-pass over what a CTA holds (its sum, then the squared
// deviations from its own mean); streaming, each thread keeps Welford's (count, mean, M2) in the
// one statistics read instead, except where the row is in L1 (a streamed cluster's CTA then
// combines them in one reduction). A streamed cluster's CTAs then send (count, sum, M2, mean) to
// one another through distributed shared memory and combine them with the parallel-variance
// formula. A held cluster's CTAs send their sums of values and squares instead, one CTA reduction
// and one exchange, and take a second of each about the row's mean only where Q - S mean would lose
// over 3 bits of M2. RMSNorm sums squares. NaN and inf propagate as in PyTorch: a NaN in a row, or
// an inf (whose deviation is inf - inf), makes the row's statistics NaN.
#pragma once

#include "kjit/activation.cuh"
#include "kjit/cluster.cuh"
#include "kjit/pack.cuh"
#include "kjit/pdl.cuh"
#include "kjit/reduce.cuh"
#include "kjit/row_coop.cuh"

namespace kjit {
namespace rownorm {

// Sum over aligned groups of kLanes (a power of two <= 32) lanes of a warp, by xor shuffles: every
// lane of a group gets the same bits.
template <int kLanes>
__forceinline__ float xor_sum(float v) {
#pragma unroll
  for (int o = kLanes / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// xor_sum of two values, their shuffle chains interleaved: the latency of one.
template <int kLanes>
__forceinline__ float2 xor_sum2(float2 v) {
#pragma unroll
  for (int o = kLanes / 2; o > 0; o >>= 1) {
    v.x += __shfl_xor_sync(0xffffffffu, v.x, o);
    v.y += __shfl_xor_sync(0xffffffffu, v.y, o);
  }
  return v;
}

// Sum over a team: a power of two <= 32 lanes of a warp (xor shuffles: every lane gets the same
// bits), or the whole CTA through `scratch` (kThreads / 32 floats, used by this one reduction:
// a kernel's reductions each have their own, so none needs a barrier after it).
template <int kThreads, int kTpr>
__forceinline__ float team_sum(float v, float* scratch) {
  if constexpr (kTpr == kThreads && kThreads > 32) {
    constexpr int kWarps = kThreads / 32;
    v = warp_sum(v);
    if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
    __syncthreads();
    float total = 0.f;
    if constexpr (kWarps <= 8) {  // every thread adds the warps' sums in the same order
#pragma unroll
      for (int k = 0; k < kWarps; ++k) total += scratch[k];
    } else {
      const int lane = threadIdx.x & 31;
      total = warp_sum(lane < kWarps ? scratch[lane] : 0.f);
    }
    return total;
  } else {
    return xor_sum<kTpr>(v);
  }
}

// team_sum of two values over a whole CTA: the two shuffle chains interleave and one barrier
// serves both. `scratch` holds kThreads / 32 float2s, used by this one reduction.
template <int kThreads>
__forceinline__ float2 cta_sum2(float u, float v, float2* scratch) {
  const float2 warp = xor_sum2<32>(make_float2(u, v));
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = warp;
  __syncthreads();
  float2 total = make_float2(0.f, 0.f);
#pragma unroll
  for (int k = 0; k < kThreads / 32; ++k) {  // every thread adds the warps' sums in one order
    const float2 w = scratch[k];
    total.x += w.x;
    total.y += w.y;
  }
  return total;
}

// A running (count, mean, M2 about that mean), updated a vector at a time: the vector's own mean
// and M2, merged by the parallel-variance rule (Welford's update for one element). Stable where
// a sum of squares minus the squared sum cancels.
struct Welford {
  float n = 0.f, mean = 0.f, m2 = 0.f;
  template <int kV>
  __forceinline__ void add(const float (&f)[kV]) {
    // The vector's mean as a sum of f / kV: no vector of values in the float range overflows it
    // (kV is a power of two: the bits of the sum times 1 / kV).
    float mv = 0.f;
#pragma unroll
    for (int j = 0; j < kV; ++j) mv = fmaf(f[j], 1.f / kV, mv);
    float m2v = 0.f;
#pragma unroll
    for (int j = 0; j < kV; ++j) m2v = fmaf(f[j] - mv, f[j] - mv, m2v);
    // r: counts are exact integers and r only weighs the update, so ~2 ulp (no IEEE division,
    // which sat on the stream's dependent chain once per vector) is plenty.
    const float total = n + kV, delta = mv - mean, r = __fdividef(static_cast<float>(kV), total);
    mean = fmaf(delta, r, mean);
    m2 += m2v + (delta * (n * r)) * delta;  // n = 0 first: 0, where delta^2 may overflow
    n = total;
  }
};

// kV consecutive parameters (weight or bias, of type P) in loads of at most 16 bytes: an fp32
// weight next to bf16 x takes two 16-byte loads per 8-element vector.
template <class P, int kV>
struct Params {
  static constexpr int kPer = static_cast<int>(16 / sizeof(P)) < kV ? 16 / sizeof(P) : kV;
  Pack<P, kPer> raw[kV / kPer];
  __forceinline__ void load(const P* p) {
#pragma unroll
    for (int k = 0; k < kV / kPer; ++k) raw[k] = load_pack<P, kPer>(p + k * kPer);
  }
  __forceinline__ void floats(float (&f)[kV]) const {
#pragma unroll
    for (int k = 0; k < kV / kPer; ++k) {
      float g[kPer];
      unpack_floats(raw[k], g);
#pragma unroll
      for (int j = 0; j < kPer; ++j) f[k * kPer + j] = g[j];
    }
  }
};

constexpr int pow2_at_least(int v) {
  return v <= 1 ? 1 : 2 * pow2_at_least((v + 1) / 2);
}

// 2^e as a float, for -126 <= e <= 127.
__forceinline__ float exp2i(int e) {
  return __int_as_float((127 + e) << 23);
}

// LayerNorm sums a row's values (and a held cluster's exact pass its deviations) times 2^-k, k =
// ceil(log2 width): a sum of `width` values then stays in the float range wherever the values do,
// as PyTorch's Welford mean does (a constant row of 2^127 gives y = bias, not NaN). Scaling by a
// power of two changes no rounding except where a scaled partial sum falls below 2^-126
// (subnormal: an absolute error near n 2^(k - 150), negligible), so the statistics keep their
// bits (S 2^-k / (n 2^-k) is S / n; S 2^-k times 2^k / n is S times 1 / n), and the sum costs an
// fma where it took an add.
struct SumScale {
  float scale, unscale;  // 2^-k, 2^k
  __forceinline__ explicit SumScale(int width) {
    const int k = width > 1 ? 32 - __clz(width - 1) : 0;
    scale = exp2i(-k);
    unscale = exp2i(k);
  }
};

// A CTA's (mean, M2 about it) from each thread's own (n, m, m2 about m), in one CTA barrier
// instead of two (a sum, then the squared deviations from its mean). Each warp sums its lanes'
// moments about lane 0's mean r_w, the CTA its warps' about warp 0's r_0: e = sum n (m - r) = c
// (mean - r) and a = sum (m2 + n (m - r)^2) = M2 + c (mean - r)^2, so M2 = a - e (e / c), which
// loses log2(a / M2) bits. As r is the mean of one thread's own values, which M2 counts, a / M2 is
// at most 1 + c / n whatever the row (33 in a warp, 257 in a CTA of 256), and near 1 on most rows.
// Past 3 bits, in a warp or in the CTA (r an outlier, or a row whose first values differ from the
// rest), the CTA sums each thread's m2 moved to the mean (the parallel-variance rule, exact) with
// a second barrier, as when a overflows. NaN or inf values make M2 NaN (an inf's deviation is
// inf - inf) by that path; squared deviations from the mean past the float range make it inf.
// The e sums are scaled by sc (SumScale of the row), so that they stay in the float range
// wherever the values do: a CTA half at 2^120 and half at 0 has a finite mean and an M2 of inf
// (PyTorch's rstd = 0), not NaN from an e of inf. The scaling changes no rounding but where a
// scaled term falls below 2^-126: deviations of ~2^(k - 126) (1e-32 for k = 20) or less, whose
// squares underflow to a variance of 0 anyway, get an absolute error up to ~2^(k - 150) in the
// mean, as SumScale's sums of values do.
template <int kThreads>
__forceinline__ float2 cta_moments(float n, float m, float m2, float cnt, SumScale sc,
                                   float4* warps, float* scratch) {
  constexpr int kWarps = kThreads / 32;
  const float r = __shfl_sync(0xffffffffu, m, 0);
  const float d = n > 0.f ? m - r : 0.f;
  float c = n, e = n * sc.scale * d, a = fmaf(n * d, d, m2);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    c += __shfl_xor_sync(0xffffffffu, c, o);
    e += __shfl_xor_sync(0xffffffffu, e, o);
    a += __shfl_xor_sync(0xffffffffu, a, o);
  }
  if ((threadIdx.x & 31) == 0) warps[threadIdx.x >> 5] = make_float4(c, e, a, r);
  __syncthreads();
  // Lane l takes warp l % kGroup's moments, moved from its r_k to ref (e + c dl and
  // a + dl (2 e + c dl)), and xor shuffles add them within groups of kGroup lanes: the same tree,
  // so the same bits, in every lane (one shared load each: 8 float4s per thread took 26 registers).
  constexpr int kGroup = pow2_at_least(kWarps);
  const int k = (threadIdx.x & 31) % kGroup;
  const float ref = warps[0].w;
  const float4 v = k < kWarps ? warps[k] : make_float4(0.f, 0.f, 0.f, 0.f);
  const float dl = v.x > 0.f ? v.w - ref : 0.f;
  const float ew = v.y * sc.unscale;  // the warp's e, unscaled (inf only where its a is)
  float ec = fmaf(v.x * sc.scale, dl, v.y), ac = fmaf(dl, fmaf(v.x, dl, 2.f * ew), v.z);
  // A warp's own M2 below a / 8 (or NaN): a NaN sum sends the CTA to the exact path.
  if (v.x > 0.f && !(fmaf(-ew, __fdividef(ew, v.x), v.z) * 8.f >= v.z))
    ac = __int_as_float(0x7fffffff);
#pragma unroll
  for (int o = kGroup / 2; o > 0; o >>= 1) {
    ec += __shfl_xor_sync(0xffffffffu, ec, o);
    ac += __shfl_xor_sync(0xffffffffu, ac, o);
  }
  if (!(cnt > 0.f)) return make_float2(0.f, 0.f);
  const float dm = ec / cnt * sc.unscale, mean = ref + dm, m2c = fmaf(-ec * sc.unscale, dm, ac);
  // a may overflow where M2 does not (it is up to 1 + c / n times M2): inf, like NaN, falls
  // through to the exact path, which gives inf only when M2 itself overflows.
  if (m2c * 8.f >= ac && !isinf(ac)) return make_float2(mean, m2c);
  const float dt = n > 0.f ? m - mean : 0.f;
  return make_float2(mean, team_sum<kThreads, kThreads>(fmaf(n * dt, dt, m2), scratch));
}

// One message exchange across a cluster: lane k of each CTA's warp 0 sends the CTA's `msg` to CTA
// k's inbox (see kjit/cluster.cuh); then lane l of every warp of every CTA reads message
// l % kGroup (kCluster rounded up to a power of two; one shared load per warp; past kCluster an
// empty message), so that xor shuffles within groups of kGroup lanes add them by the same tree,
// to the same bits, in every lane of every CTA: a branch on the result is taken cluster-wide. No
// CTA barrier, and no cluster barrier on the row's critical path (on the H200, one row of 65536:
// 2.41 us against 2.65 for slots pushed under a cluster barrier, kjit-row-floor --pdl).
// Each exchange has its own slots and inbox, initialized by the caller before the cluster arrive
// at its start; kFirst: this is the launch's first exchange, whose cluster wait says every peer's
// inboxes are ready. M: float4, or float2 where two values are all a message carries (a held
// cluster's sums: 8 bytes per message, one 8-byte shared load per lane).
template <int kCluster, bool kFirst, class M>
__forceinline__ M cluster_exchange(M msg, M (&slots)[kCluster], unsigned long long* inbox) {
  constexpr int kGroup = pow2_at_least(kCluster);
  static_assert(kGroup <= 32, "at most 32 messages");
  if (threadIdx.x == 0) inbox_expect(inbox, kCluster * sizeof(M));
  if constexpr (kFirst) cluster_wait();
  if (threadIdx.x < kCluster) inbox_send(&slots[cluster_rank()], inbox, threadIdx.x, msg);
  inbox_wait(inbox);
  const int k = (threadIdx.x & 31) % kGroup;
  return k < kCluster ? slots[k] : M{};
}

// The cluster-wide sums of two values (cluster_exchange's tree: the same bits in every thread).
template <int kCluster, bool kFirst>
__forceinline__ float2 cluster_sum2(float u, float v, float2 (&slots)[kCluster],
                                    unsigned long long* inbox) {
  return xor_sum2<pow2_at_least(kCluster)>(
      cluster_exchange<kCluster, kFirst>(make_float2(u, v), slots, inbox));
}

// A row's statistics across a cluster from each CTA's (count, sum, M2 about its own mean, that
// mean; for RMSNorm only the sum counts), exchanged once. `n` is the row's element count, sc its
// SumScale. Returns (mean, M2 / n), or for RMSNorm (mean of squares, -).
template <int kCluster, bool kRms>
__forceinline__ float2 cluster_stats(float cnt, float s, float m2, float local_mean, float n,
                                     SumScale sc, float4 (&slots)[kCluster],
                                     unsigned long long* inbox) {
  constexpr int kGroup = pow2_at_least(kCluster);
  const float4 v =
      cluster_exchange<kCluster, true>(make_float4(cnt, s, m2, local_mean), slots, inbox);
  if constexpr (kRms) return make_float2(xor_sum<kGroup>(v.y) / n, 0.f);
  // LayerNorm: everything about one reference, CTA 0's mean r (CTA 0 always holds part of the
  // row), so that one xor tree sums both e = sum_c n_c (mean_c - r) = n (mean - r) and
  //   a = sum_c (M2_c + n_c (mean_c - r)^2),  M2 = a - n (mean - r)^2 = a - e (e / n):
  // the latency of one chain of shuffles, not two. r is the mean of n / kCluster of the values,
  // so n (mean - r)^2 is at most kCluster times the spread of the CTAs' means that the
  // subtraction leaves (it loses at most log2(kCluster) + 1 bits of it, whatever the row), and
  // e / n carries its rounding relative to mean - r, not to the mean (rows far from zero).
  // A NaN or inf in the row makes a CTA's M2 NaN, so M2 is NaN; a squared deviation past the
  // float range makes a inf, and M2 with it (not inf - inf). Both e and a are summed scaled by sc
  // (e as cta_moments sums its own; a here too), so that they stay in the float range wherever
  // the values and M2 do: a about r is up to kCluster + 1 times M2, and unscaled it overflowed
  // where M2 does not (a row of 2^20 whose first sixteenth is 0 and the rest 2^55.5, on 8 CTAs:
  // a = 2^129, M2 = 2^126.9; y = bias where PyTorch normalizes it). So M2 is inf where it is
  // past the float range itself (a row half at 2^120 and half at 0: PyTorch's rstd = 0 too),
  // with a finite mean where the CTAs' means differ by less than the float range (halves at
  // +-2^127.5 give an infinite difference, and NaN). The scaling changes no rounding but where a
  // scaled term falls below 2^-126: a CTA's M2 below ~2^(k - 126), which eps swamps.
  const float r = slots[0].w;
  const float d = v.x > 0.f ? v.w - r : 0.f;
  const float cs = v.x * sc.scale;  // the CTA's count times 2^-k
  const float2 ea = xor_sum2<kGroup>(make_float2(cs * d, fmaf(cs * d, d, v.z * sc.scale)));
  const float dm = ea.x / n * sc.unscale;
  const float m2_scaled = isinf(ea.y) ? ea.y : fmaf(-ea.x, dm, ea.y);
  const float m2_all = m2_scaled * sc.unscale;  // inf where M2 is past the float range
  return make_float2(r + dm, (m2_all <= 0.f ? 0.f : m2_all) / n);  // rounding below 0; NaN stays
}

// A held LayerNorm cluster's (mean, M2 / n) from this thread's sums of its values (times
// sc.scale) and of their squares: the row's S and Q from one CTA reduction, sent to the peers
// undivided (a division before the message would delay it, as RMSNorm's). M2 = Q - S mean loses
// log2(Q / M2) = log2(1 + mean^2 / var) bits of Q. Within 3 bits (the row's mean within 2.6
// standard deviations of zero, as most activations are) that is the M2; past them, or where Q is
// NaN or inf (NaN or inf values, or squares past the float range), `exact` is set and the caller
// takes row_exact_stats. Every thread of the cluster holds the same bits of S and Q, so all set
// the same `exact`: one that waited alone for the exact pass's exchange would hang.
template <int kThreads, int kCluster>
__forceinline__ float2 row_sums_stats(float part, float squares, int width, SumScale sc,
                                      float2* red, float2 (&slots)[kCluster],
                                      unsigned long long* inbox, bool& exact) {
  const float inv_n = 1.f / static_cast<float>(width);
  const float2 cta = cta_sum2<kThreads>(part, squares, red);
  const float2 row = cluster_sum2<kCluster, true>(cta.x, cta.y, slots, inbox);
  // row.x is S 2^-k (SumScale): mean has the bits of S (1 / n), and the fma's product is S mean
  // exactly (mean 2^k overflows only where Q does, which sends the row to the exact pass).
  const float mean = row.x * (inv_n * sc.unscale), m2 = fmaf(-row.x, mean * sc.unscale, row.y);
  exact = !(m2 * 8.f >= row.y) || isinf(row.y);
  return make_float2(mean, (m2 < 0.f ? 0.f : m2) * inv_n);  // rounding below 0; NaN stays
}

// row_sums_stats's exact pass: every CTA takes the deviations from the sums' mean m0 in a second
// reduction and exchange: e = n (mean - m0) and a = M2 + e (e / n), exact as m0 is off the mean
// only by S's rounding, far below the row's spread (which S's rounding, on rows far from zero, is
// not). `deviations(m0)` returns this thread's (sum times sc.scale, sum of squares) of its values'
// deviations from m0 (scaled as S is: a row half at 2^120 and half at 0 has CTA sums past 2^128).
// Its own scratch, slots and inbox (not the sums'). Returns (mean, M2 / n).
template <int kThreads, int kCluster, class Deviations>
__forceinline__ float2 row_exact_stats(float m0, int width, SumScale sc,
                                       const Deviations& deviations, float2* red,
                                       float2 (&slots)[kCluster], unsigned long long* inbox) {
  const float inv_n = 1.f / static_cast<float>(width);
  const float2 own = deviations(m0);
  const float2 dev = cta_sum2<kThreads>(own.x, own.y, red);
  const float2 ea = cluster_sum2<kCluster, false>(dev.x, dev.y, slots, inbox);
  const float dm = ea.x * (inv_n * sc.unscale);
  const float m2 = isinf(ea.y) ? ea.y : fmaf(-ea.x, dm * sc.unscale, ea.y);
  return make_float2(m0 + dm, (m2 < 0.f ? 0.f : m2) * inv_n);  // rounding below 0; NaN stays
}

// A count for stream_pass's batch, as a type (a lambda's constant argument).
template <int N>
struct Batch {
  static constexpr int value = N;
};

template <class Act>
struct is_none {
  static constexpr bool value = false;
};
template <>
struct is_none<act::None> {
  static constexpr bool value = true;
};

// The most bytes of a row a CTA's statistics pass keeps in L1 for its second pass (16 KB: an fp32
// row of 4096; 5 CTAs an SM keep 80 KB of the H200's 256 KB of L1 and shared memory). With the
// hint the second pass measured faster (its L1 hit rate was not profiled): H200, tools/bench.py's
// method, fp32 16384 x 4096, us: LayerNorm 128.3-128.7 -> 127.8-127.9 (256 x 4), RMSNorm 512 x 2
// 127.7-127.8 -> 126.5-126.7. Larger shares (long rows split over clusters or cooperative CTAs,
// up to megabytes a CTA) would not fit beside the other CTAs' and the parameters' lines; they were
// not measured with it and keep the plain L1 policy.
constexpr int kL1KeepBytes = 16384;

// The kernel's CTAs per SM to fit in registers (__launch_bounds__; 0: no cap). A 256-thread fp32
// stream without a residual is held to 48 registers, 5 CTAs per SM (LayerNorm 16384x4096 on the
// H200: 130.2 -> 128.7 us, with 8 bytes spilled); with a residual that cap cost 284 -> 305 us.
// 16-bit streams were not measured with it.
template <class T>
constexpr int min_ctas(bool stream, bool residual, int threads) {
  return stream && !residual && threads == 256 && sizeof(T) == 4 ? 5 : 0;
}

}  // namespace rownorm

// x, r, y, sum: [rows, width]; w, b: [width] (null when absent). grid.x = ceil(rows / teams per
// CTA) * kCluster * kReplicas. y may be x or r, sum may be x or r: each element is read before it
// is written, by the thread that writes it (a streaming second pass reads back the `sum` its
// thread wrote in the first; with replicas, which its CTA wrote, after a CTA barrier). Except
// with kReplicas > 1: kReplicas clusters (or CTAs) each read the whole row for its statistics and
// each write only their share of it (loading that share of the weight and bias), so few rows
// spread over more SMs, each loading and storing less; a replica's writes would land under
// another's reads, so no output may alias an input (the host runs kReplicas = 1 then).
// trigger != 0: let the stream's next kernel be scheduled at once (the host sets it for grids of
// at most one wave, where that hides the next launch's latency; its pdl_wait still waits for this
// kernel to complete). Never with clusters: see layer_norm.cpp.
// kWidth > 0: the row length, fixed at compile time (the host passes it as width_arg too); 0:
// width_arg. A constant width folds the runs' bounds, loop counts, SumScale and 1 / width.
// kCoop: `coop` CTAs per row (grid.x = rows * coop, a cooperative launch), each holding or
// streaming an even share of it, their statistics merged through `coop_part` (a float4 per CTA)
// and a barrier on `coop_bar` (two words per row, the first 0 between launches, the second a
// generation: group_barrier).
// Unused otherwise (null, 1).
template <class T, class P, class Act, bool kRms, bool kHasW, bool kHasB, bool kResidual, int kVec,
          int kThreads, int kTpr, int kIters, int kCluster, int kReplicas, bool kStream, bool kCoop,
          int kWidth>
__global__ void __launch_bounds__(kThreads, rownorm::min_ctas<T>(kStream, kResidual, kThreads))
    row_norm(const T* x, const T* r, T* y, T* sum, const P* __restrict__ w, const P* __restrict__ b,
             float eps, int width_arg, long long rows, int trigger, float4* coop_part,
             unsigned* coop_bar, int coop) {
  const int width = kWidth > 0 ? kWidth : width_arg;
  constexpr int kTeams = kThreads / kTpr;
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps, at most 1024 threads");
  static_assert(kTpr == kThreads || (kTpr <= 32 && (kTpr & (kTpr - 1)) == 0),
                "a team is a power of two inside a warp, or the whole CTA");
  static_assert((kCluster == 1 && !kStream) || kTpr == kThreads, "clusters stream whole CTAs");
  static_assert(!(kRms && kHasB), "RMSNorm has no bias");
  static_assert(kCluster >= 1 && kCluster <= 32, "cluster_exchange: one lane of warp 0 per peer");
  static_assert(kReplicas >= 1 && (kReplicas == 1 || kTpr == kThreads), "replicas of CTA teams");
  static_assert(!kCoop || (kTpr == kThreads && kCluster == 1 && kReplicas == 1),
                "a cooperative row is split over whole CTAs, without clusters or replicas");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  static_assert(kCluster == 1, "thread-block clusters need sm_90 or newer");
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
  static_assert(!kCoop, "cooperative rows need sm_70 or newer (acquire/release atomics)");
#endif

  // A held LayerNorm cluster sends its CTAs' sums of values and squares (see Pass 1).
  constexpr bool kRowSums = !kRms && kCluster > 1 && !kStream;
  __shared__ float red1[32], red2[32];                     // one per team reduction
  __shared__ float2 red12[kRowSums ? kThreads / 32 : 1];   // kRowSums' CTA reductions:
  __shared__ float2 red12b[kRowSums ? kThreads / 32 : 1];  // the sums, the exact pass
  __shared__ float4 warp_moments[kThreads / 32];     // LayerNorm's per-warp moments (cta_moments)
  __shared__ float4 slots[kRowSums ? 1 : kCluster];  // the statistics, one message per CTA
  __shared__ float2 sum_slots[kRowSums ? kCluster : 1];  // kRowSums' messages: the sums,
  __shared__ float2 slots2[kRowSums ? kCluster : 1];     // and the exact pass's, when taken
  __shared__ unsigned long long inbox, inbox2;           // count the messages' bytes
  if constexpr (kCluster > 1) {
    if (threadIdx.x == 0) {
      inbox_init(&inbox);
      if constexpr (kRowSums) inbox_init(&inbox2);
    }
    cluster_arrive_relaxed();  // this CTA runs and its inboxes are ready (cluster_exchange)
  }
  if (trigger) pdl_launch_dependents();
  pdl_wait();  // x, r, w, b and the outputs may belong to the kernel before (programmatic launch)

  const int team = threadIdx.x / kTpr, t = threadIdx.x % kTpr;
  // A cluster, a cooperative row's CTAs, or a CTA.
  const unsigned group = blockIdx.x / (kCoop ? static_cast<unsigned>(coop) : kCluster);
  const int replica = static_cast<int>(group % kReplicas);
  const long long row = static_cast<long long>(group / kReplicas) * kTeams + team;
  const bool active = row < rows;
  const int rank = kCoop          ? static_cast<int>(blockIdx.x % static_cast<unsigned>(coop))
                   : kCluster > 1 ? static_cast<int>(cluster_rank())
                                  : 0;
  const int nv = width / kVec;
  // This CTA's run of the row's vectors: [first, last), empty for a row past the end. Streamed
  // and cooperative rows are split evenly (a held cooperative run fits kIters * kTpr: the host
  // checks coop * kTpr * kIters * kVec >= width).
  const int parts = kCoop ? coop : kCluster;
  const int share = kStream || kCoop ? (nv + parts - 1) / parts : kIters * kTpr;
  const int first = min(rank * share, nv);
  const int last = active ? min(first + share, nv) : first;
  // The vectors of that run this replica writes: [own_lo, own_hi).
  const int own_lo =
      first + static_cast<int>(static_cast<long long>(last - first) * replica / kReplicas);
  const int own_hi =
      first + static_cast<int>(static_cast<long long>(last - first) * (replica + 1) / kReplicas);
  auto owned = [&](int vi) { return kReplicas == 1 ? vi < last : vi >= own_lo && vi < own_hi; };
  const long long base = active ? row * width : 0;
  const T* xr = x + base;
  const T* rr = kResidual ? r + base : nullptr;
  T* yr = y + base;
  T* sr = kResidual ? sum + base : nullptr;

  // Held rows: x (or x + r rounded to T, as written to sum) as loaded, zero past the row's end.
  // 16-bit values stay packed (half the registers of floats: more rows in flight per SM) and are
  // widened again in each pass, one instruction per element.
  Pack<T, kVec> held[kStream ? 1 : kIters] = {};
  rownorm::Params<P, kVec> pw[kHasW && !kStream ? kIters : 1], pb[kHasB && !kStream ? kIters : 1];
  if constexpr (!kStream) {
    Pack<T, kVec> pr[kResidual ? kIters : 1] = {};
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int vi = first + i * kTpr + t;
      if (vi < last) {
        held[i] = load_pack<T, kVec>(xr + vi * kVec);
        if constexpr (kResidual) pr[i] = load_pack<T, kVec>(rr + vi * kVec);
      }
    }
    // The parameters now: their latency hides under the statistics.
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int vi = first + i * kTpr + t;
      if (owned(vi)) {
        if constexpr (kHasW) pw[i].load(w + vi * kVec);
        if constexpr (kHasB) pb[i].load(b + vi * kVec);
      }
    }
    if constexpr (kResidual) {
#pragma unroll
      for (int i = 0; i < kIters; ++i) {
        float f[kVec], rv[kVec];
        unpack_floats(held[i], f);
        unpack_floats(pr[i], rv);
#pragma unroll
        for (int j = 0; j < kVec; ++j) f[j] += rv[j];
        held[i] = pack_floats<T, kVec>(f);  // as PyTorch's x + r in T
        const int vi = first + i * kTpr + t;
        if (owned(vi)) store_pack<T, kVec>(sr + vi * kVec, held[i]);
      }
    }
  }

  // Streaming: fn(vi, values, w, b) for this thread's vectors of the CTA's run (the first pass)
  // or of this replica's share of it (the second), `batch` loads in flight at a time (kIters;
  // kIters / 2 in a second pass that loads the parameters with them, below). The first pass
  // reads x (+ r, whose rounded sum it writes over the share); the second reads the values to
  // normalize back (sum, or x). With replicas the second pass maps vectors to other threads than
  // the first did, so a CTA barrier sits between them (team_sum's is none on one warp).
  // An fp32 stream without an activation loads the parameters with the values in its second
  // pass, one latency for both instead of one per vector, in batches half as deep (all kIters
  // with them spill on the 48-register 256-thread stream). H200, kjit-bench: LayerNorm fp32
  // 16384x4096 128.2 -> 127.3 us, 1 x 2^20 13.7 -> 13.0, RMSNorm fp32 4 x 2^20 18.4 -> 17.8. Not
  // where it measured slower: with SiLU (128.5 -> 131.0 us) and bf16 (1 x 2^20: 9.8 -> 9.9).
  constexpr bool kParamsEarly = kStream && (kHasW || kHasB) && rownorm::is_none<Act>::value &&
                                sizeof(T) == 4 && kIters % 2 == 0;
  // A statistics pass (kKeep) of an fp32 CTA streaming a row alone (no replicas) in 16-byte
  // vectors, whose run fits rownorm::kL1KeepBytes, also keeps it in L1, so that the second pass
  // reads it from there rather than from L2 (kL1KeepBytes). Measured there only: other streams
  // (16-bit, clusters, cooperative rows, replicas) keep the plain policy.
  constexpr bool kL1Keeps =
      kStream && kCluster == 1 && !kCoop && kReplicas == 1 && sizeof(T) == 4 && kVec == 4;
  auto l1_kept = [](int lo, int hi) {
    return kL1Keeps && hi - lo <= rownorm::kL1KeepBytes / static_cast<int>(kVec * sizeof(T));
  };
  auto stream_pass = [&](auto batch, bool first_pass, L2Hint hint, auto&& fn) {
    constexpr int kB = decltype(batch)::value;
    const unsigned long long policy = l2_policy(hint);
    const T* src = first_pass || !kResidual ? xr : sr;
    const int lo = first_pass ? first : own_lo, hi = first_pass ? last : own_hi;
    const bool keep_l1 = hint == L2Hint::kKeep && l1_kept(lo, hi);
    for (int v0 = lo + t; v0 < hi; v0 += kThreads * kB) {
      Pack<T, kVec> p[kB], q[kResidual ? kB : 1];
      rownorm::Params<P, kVec> sw[kParamsEarly && kHasW ? kB : 1];
      rownorm::Params<P, kVec> sb[kParamsEarly && kHasB ? kB : 1];
#pragma unroll
      for (int i = 0; i < kB; ++i) {
        const int vi = v0 + i * kThreads;
        if (vi < hi) {
          p[i] = keep_l1 ? load_pack_hinted<T, kVec, true>(src + vi * kVec, policy)
                         : load_pack_hinted<T, kVec>(src + vi * kVec, policy);
          if (kResidual && first_pass)
            q[kResidual ? i : 0] = load_pack_hinted<T, kVec>(rr + vi * kVec, policy);
          if (kParamsEarly && !first_pass) {
            if constexpr (kParamsEarly && kHasW) sw[i].load(w + vi * kVec);
            if constexpr (kParamsEarly && kHasB) sb[i].load(b + vi * kVec);
          }
        }
      }
#pragma unroll
      for (int i = 0; i < kB; ++i) {
        const int vi = v0 + i * kThreads;
        if (vi >= hi) continue;
        float f[kVec];
        unpack_floats(p[i], f);
        if (kResidual && first_pass) {
          float rv[kVec];
          unpack_floats(q[kResidual ? i : 0], rv);
#pragma unroll
          for (int j = 0; j < kVec; ++j) f[j] += rv[j];
          const Pack<T, kVec> s = pack_floats<T, kVec>(f);
          if (owned(vi)) store_pack<T, kVec>(sr + vi * kVec, s);
          unpack_floats(s, f);
        }
        fn(vi, f, sw[kParamsEarly && kHasW ? i : 0], sb[kParamsEarly && kHasB ? i : 0]);
      }
    }
  };

  // Pass 1: sum (LayerNorm) or sum of squares (RMSNorm) over what this CTA or team holds.
  // Streaming LayerNorm also keeps each thread's (count, mean, M2) by Welford's update, one
  // vector at a time, so that the squared deviations need no second pass over memory; except a
  // CTA streaming a row alone whose share its first pass keeps in L1 (fp32, no residual), which
  // reads it there a second time for the squared deviations from the CTA's mean, as held rows
  // take them (H200, tools/bench.py's method, fp32 16384 x 4096: 128.2-128.3 -> 128.0 us, 8192 x
  // 4096: 66.00 -> 65.94; Welford's per-vector update costs more than an L1 read). A streamed
  // cluster then combines those in one CTA reduction instead of two (rownorm::cta_moments; one
  // fp32 row of 2^20 on the H200: 14.7 -> 13.9 us). Held clusters do not take moments: with
  // them (Welford's or two passes over the registers) one row of 65536 took 2.43 -> 2.76-2.84 us.
  // Held clusters sum the squares alongside instead (kRowSums, below). Nor does the stream
  // without a cluster: under its 48-register cap cta_moments spills 48 bytes (LayerNorm fp32
  // 16384x4096: 127.3 -> 158.8 us).
  constexpr bool kSplit = kCluster > 1 || kCoop;  // a row over several CTAs
  constexpr bool kCtaMoments = !kRms && kSplit && kStream;
  // LayerNorm streams that may read an L1-kept row a second time instead of Welford's update.
  constexpr bool kRereadable = !kRms && kL1Keeps && !kResidual;
  const bool reread = kRereadable && l1_kept(first, last);
  const rownorm::SumScale sc(width);  // LayerNorm's `part` is its values' sum times sc.scale
  float part = 0.f, squares = 0.f;
  rownorm::Welford own;
  auto add1 = [&](const float(&f)[kVec]) {
    if constexpr (!kCtaMoments) {
#pragma unroll
      for (int j = 0; j < kVec; ++j) part = fmaf(f[j], kRms ? f[j] : sc.scale, part);
    }
    if constexpr (kRowSums) {
#pragma unroll
      for (int j = 0; j < kVec; ++j) squares = fmaf(f[j], f[j], squares);
    }
    if constexpr (kStream && !kRms) {
      if (!reread) own.add(f);
    }
  };
  if constexpr (kStream) {
    stream_pass(rownorm::Batch<kIters>{}, true, kResidual ? L2Hint::kDrop : L2Hint::kKeep,
                [&](int, const float(&f)[kVec], const auto&, const auto&) { add1(f); });
  } else {
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      float f[kVec];
      unpack_floats(held[i], f);
      add1(f);
    }
  }
  // This thread's held values' deviations from `about`: (their sum times sc.scale, the sum of
  // their squares). Generic, so that a streamed kernel (which holds no values) never
  // instantiates it.
  auto held_deviations = [&](auto about) {
    float e = 0.f, a = 0.f;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      if (first + i * kTpr + t >= last) continue;
      float f[kVec];
      unpack_floats(held[i], f);
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const float d = f[j] - about;
        e = fmaf(d, sc.scale, e);  // (row_sums_stats)
        a = fmaf(d, d, a);
      }
    }
    return make_float2(e, a);
  };
  float mean = 0.f, var = 0.f;
  bool exact = false;  // kRowSums: the sums lost too many bits; row_exact_stats after the stores
  if constexpr (kRowSums) {
    const float2 st = rownorm::row_sums_stats<kThreads, kCluster>(part, squares, width, sc, red12,
                                                                  sum_slots, &inbox, exact);
    mean = st.x;
    var = st.y;
  } else {
    const float cnt = static_cast<float>(kSplit ? (last - first) * kVec : width);
    float s1 = 0.f, local_mean = 0.f, m2 = 0.f;
    if constexpr (kCtaMoments) {
      // A streamed cluster's LayerNorm: each thread's own moments, then one CTA reduction.
      const float2 mm =
          rownorm::cta_moments<kThreads>(own.n, own.mean, own.m2, cnt, sc, warp_moments, red2);
      local_mean = mm.x;
      m2 = mm.y;  // (s1 stays 0: a LayerNorm cluster's message carries the mean and M2)
    } else {
      s1 = rownorm::team_sum<kThreads, kTpr>(part, red1);
      // A cluster's RMSNorm divides once, after the exchange: this division would delay its
      // message (one fp32 row of 65536 on the H200: 2.34 us against 2.40, kjit-bench).
      // LayerNorm's s1 is scaled by sc.scale, so is the count it divides by: S / n's bits.
      local_mean =
          cnt > 0.f && !(kRms && kSplit) ? __fdiv_rn(s1, kRms ? cnt : cnt * sc.scale) : 0.f;
      if constexpr (!kRms) {
        // Pass 2 (LayerNorm): squared deviations from this CTA's (or team's) own mean: over the
        // held values or a stream's row re-read from L1, or when streaming otherwise, each
        // thread's M2 moved to that mean (the parallel-variance rule).
        float dev = 0.f;
        if (reread) {
          stream_pass(rownorm::Batch<kIters>{}, true, L2Hint::kKeep,
                      [&](int, const float(&f)[kVec], const auto&, const auto&) {
#pragma unroll
                        for (int j = 0; j < kVec; ++j)
                          dev = fmaf(f[j] - local_mean, f[j] - local_mean, dev);
                      });
        } else if constexpr (kStream) {
          const float d = own.n > 0.f ? own.mean - local_mean : 0.f;
          dev = own.m2 + own.n * d * d;
        } else {
          dev = held_deviations(local_mean).y;
        }
        m2 = rownorm::team_sum<kThreads, kTpr>(dev, red2);
      }
    }
    mean = local_mean;
    var = cnt > 0.f ? m2 / cnt : 0.f;
    if constexpr (kCluster > 1) {
      const float2 st =
          rownorm::cluster_stats<kCluster, kRms>(cnt, s1, m2, local_mean, width, sc, slots, &inbox);
      mean = st.x;
      var = st.y;
    }
    if constexpr (kCoop) {
      __shared__ float2 row_stats;
      const float2 st = rownorm::coop_stats<kRms>(
          {cnt, kRms ? s1 : local_mean, m2}, coop_part + static_cast<long long>(group) * coop,
          coop_bar + 2 * static_cast<long long>(group), coop, rank, width, &row_stats);
      mean = st.x;
      var = st.y;
    }
  }
  // RMSNorm: `mean` is the mean of squares.
  float rstd = rsqrtf((kRms ? mean : var) + eps);

  // z = (s - mean) * (w * rstd) + b, or s * (w * rstd): the mean is subtracted first (folded
  // into the shift, it would cancel badly for rows far from zero).
  auto normalize = [&](const float(&f)[kVec], const rownorm::Params<P, kVec>& wv,
                       const rownorm::Params<P, kVec>& bv, float(&out)[kVec]) {
    float wf[kVec], bf[kVec];
    if constexpr (kHasW) wv.floats(wf);
    if constexpr (kHasB) bv.floats(bf);
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const float scale = kHasW ? wf[j] * rstd : rstd;
      const float d = kRms ? f[j] : f[j] - mean;
      const float z = kHasB ? fmaf(d, scale, bf[j]) : d * scale;
      out[j] = Act::template apply<T>(z);
    }
  };
  if constexpr (kStream) {
    if constexpr (kReplicas > 1 && kResidual) __syncthreads();  // the sums other threads wrote
    constexpr int kBatch = kParamsEarly ? kIters / 2 : kIters;
    stream_pass(rownorm::Batch<kBatch>{}, false, L2Hint::kDrop,
                [&](int vi, const float(&f)[kVec], const auto& early_w, const auto& early_b) {
                  float out[kVec];
                  if constexpr (kParamsEarly) {
                    normalize(f, early_w, early_b, out);
                  } else {
                    rownorm::Params<P, kVec> wv, bv;
                    if constexpr (kHasW) wv.load(w + vi * kVec);
                    if constexpr (kHasB) bv.load(b + vi * kVec);
                    normalize(f, wv, bv, out);
                  }
                  store_pack<T, kVec, true>(yr + vi * kVec, pack_floats<T, kVec>(out));
                });
  } else {
    auto write_held = [&] {
#pragma unroll
      for (int i = 0; i < kIters; ++i) {
        const int vi = first + i * kTpr + t;
        if (owned(vi)) {
          float f[kVec], out[kVec];
          unpack_floats(held[i], f);
          normalize(f, pw[kHasW ? i : 0], pb[kHasB ? i : 0], out);
          store_pack<T, kVec>(yr + vi * kVec, pack_floats<T, kVec>(out));
        }
      }
    };
    write_held();
    // A held cluster whose sums lost too many bits writes its share again, with the exact pass's
    // statistics (the same threads over the same addresses: the second stores land last; the
    // values are still in registers, so a call in place re-reads nothing). The first stores go
    // out as the common case's would, so that the rare path sits past them in the kernel's code
    // rather than between the exchange and the stores, where the common case jumped over it:
    // one row of 65536 on the H200 (tools/bench.py's method, one process) fp32 2.47 -> 2.41 us,
    // bf16 2.32 -> 2.25; without the exact pass at all, fp32 2.37.
    if constexpr (kRowSums) {
      if (exact) {
        const float2 st = rownorm::row_exact_stats<kThreads, kCluster>(
            mean, width, sc, held_deviations, red12b, slots2, &inbox2);
        mean = st.x;
        rstd = rsqrtf(st.y + eps);
        write_held();
      }
    }
  }
}

}  // namespace kjit
