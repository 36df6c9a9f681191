// GroupNorm (+ activation) forward as one pipelined launch, for large groups in a tensor L2 cannot
// hold (NCHW).
//
// A kernel that holds a group on chip, or the split pair, runs a load phase and then a store
// phase; where the tensor does not fit on chip that is several rounds of both, and a streamed
// kernel reads x from HBM twice. Here a persistent grid takes work items in ticket order: S(c)
// reads chunk c of x (asking L2 to keep it) and publishes the chunk's (mean, M2); A(c) reads the
// chunk again, from L2, waits until its group's statistics are complete, and writes y. The
// tickets interleave S items `lag` chunks ahead of A items, so HBM reads of later groups overlap
// the stores of earlier ones, as in a copy. HBM traffic: one read of x, one write of y, while a
// group and the lag fit in L2 (a larger group is read from HBM twice, as by any one-pass order).
//
// Forward progress without a cooperative launch (any grid size, any residency, MPS limits): a
// CTA takes a ticket only while it runs, and an item waits only for S items of smaller tickets
// (lag >= chunks per group), which never wait themselves. A CTA takes its next ticket early only
// once it will not wait again in the current item, so no ticket is held behind a wait.
//
// Statistics stay exact and deterministic: two-pass within a thread, Chan merges in a fixed
// order beyond. The last S item of a group to arrive merges the group's partials once and
// publishes the result for the group's A items.
#pragma once

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
#error "kjit/group_norm_pipe.cuh needs sm_70 (acquire/release atomics)"
#endif

#include "kjit/group_norm_split.cuh"

namespace kjit {
namespace gn_pipe {

// Item t of 2 * n (n chunks, `per_group` to a group): the first `lag` tickets are S(0..lag-1),
// then S and A alternate (S(lag + k), A slot k), then the last lag A slots. A slot k applies a
// chunk of slot k's group, in reverse: the chunks read last are applied first, while L2 is most
// likely to still have them. (Meant for groups larger than L2; on the H200 it measured no
// different from in order, 65.6 against 64.4 us for one 64 MB group, and costs nothing.) Slot
// k's ticket is the same either way, so the order keeps the wait-only-for-earlier-tickets
// property.
__forceinline__ void item_of(unsigned t, unsigned n, unsigned lag, unsigned per_group, bool* apply,
                             unsigned* c) {
  unsigned k;
  if (t < lag) {
    *apply = false;
    k = t;
  } else if (t < 2 * n - lag) {
    *apply = ((t - lag) & 1) != 0;
    k = (t - lag) >> 1;
    if (!*apply) k += lag;
  } else {
    *apply = true;
    k = t - n;
  }
  *c = *apply ? (k / per_group * 2 + 1) * per_group - 1 - k : k;
}

__forceinline__ unsigned take_ticket(unsigned* counter) {
  unsigned t;
  asm volatile("atom.relaxed.gpu.global.add.u32 %0, [%1], 1;" : "=r"(t) : "l"(counter) : "memory");
  return t;
}

__forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Publishes chunk c's partial statistics and counts it in: returns the group's chunks counted
// before it (acquire-release: the last one sees every other chunk's partial).
__forceinline__ unsigned arrive(float2* part, unsigned c, const gn::Stat& st, unsigned* count) {
  part[c] = make_float2(st.mean, st.m2);
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(count) : "memory");
  return old;
}

// The group's statistics for its A items, then one more count: they wait for chunks + 1.
__forceinline__ void publish(float2* gstat, const gn::Stat& gs, unsigned* count) {
  *gstat = make_float2(gs.mean, gs.m2);
  asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(count) : "memory");
}

// The statistics of a group from its kCount partials pg, one (mean, M2) per chunk of kPiece
// vectors (the last may be short), merged by the whole CTA: a group of a thousand chunks costs
// each thread a load or two instead of one warp a long chain of them, on the path every A item
// of the group waits on. A fixed order (thread k takes k, k + kThreads, ...; then team_merge):
// the same bits every call.
template <int kThreads, unsigned kCount, int kNvec, int kPiece, int kVec>
__forceinline__ gn::Stat merge_group(const float2* pg, float* red) {
  gn::Stat st{0.f, 0.f, 0.f};
  for (unsigned k = threadIdx.x; k < kCount; k += kThreads) {
    float2 m;
    asm volatile("ld.global.cg.v2.f32 {%0, %1}, [%2];"
                 : "=f"(m.x), "=f"(m.y)
                 : "l"(pg + k)
                 : "memory");
    const int nv = kNvec - static_cast<int>(k) * kPiece < kPiece
                       ? kNvec - static_cast<int>(k) * kPiece
                       : kPiece;
    st = gn::merge(st, gn::Stat{static_cast<float>(nv * kVec), m.x, m.y});
  }
  return gn::team_merge<kThreads, kThreads>(st, red);
}

}  // namespace gn_pipe

// x, y: [N, C, kS] (y may be x). part: a float2 per chunk (N * G * chunks), then a float2 per
// group. bar: the stream's barrier words, of which this kernel uses the even ones and leaves
// them 0 when it ends: [0] the next ticket, [2] CTAs finished, [4 + 2 * group] the group's
// arrivals (chunks, then one more once its statistics are published). w, b: [C] or null.
// n: chunks in the tensor; lag: S items ahead of A items (raised to the chunks per group).
// Any grid size works; the runtime launches as many CTAs as the device holds at once.
template <class T, class P, int kCg, long long kS, int kThreads, int kVec, int kIters, bool kHasW,
          bool kHasB, class Act>
__global__ void __launch_bounds__(kThreads)
    gn_pipe_fwd(const T* __restrict__ x, T* __restrict__ y, float2* part, unsigned* bar,
                const P* __restrict__ w, const P* __restrict__ b, float eps, int G, unsigned n,
                unsigned lag) {
  constexpr long long kL = kCg * kS;
  using Ch = gn_split::Chunks<kL, kThreads, kVec, kIters>;
  constexpr unsigned kCount = static_cast<unsigned>(Ch::kCount);
  __shared__ float red[96];
  __shared__ unsigned next;
  __shared__ float2 group_stat;
  __shared__ bool last_in_group, last_out;
  if (lag < kCount) lag = kCount;  // below that, an A item could wait for a later ticket
  if (lag > n) lag = n;
  float2* const gstat = part + n;
  unsigned* const arrive = bar + 4;

  pdl_wait();  // x, y, the workspace: the kernel before may still use them
  if (threadIdx.x == 0) next = gn_pipe::take_ticket(bar);
  __syncthreads();
  unsigned t = next;
  while (t < 2 * n) {
    __syncthreads();  // every thread has read `next`
    bool apply;
    unsigned c;
    gn_pipe::item_of(t, n, lag, kCount, &apply, &c);
    if (!apply && threadIdx.x == 0) next = gn_pipe::take_ticket(bar);  // S items never wait
    const unsigned group = c / kCount;
    const int first = static_cast<int>(c % kCount) * Ch::kChunk;
    const T* __restrict__ xg = x + static_cast<long long>(group) * kL;
    Pack<T, kVec> raw[kIters];
    gn_split::load_chunk<T, kThreads, kVec, kIters, Ch::kNvec, true>(
        xg, first, l2_policy(apply ? L2Hint::kDrop : L2Hint::kKeep), raw);
    if (!apply) {
      const gn::Stat st =
          gn_split::chunk_stat<T, kThreads, kVec, kIters, Ch::kNvec>(raw, first, red);
      if constexpr (kCount <= 128) {
        // Up to 4 partials a lane: warp 0 alone merges, and the other warps go on. (A CTA-wide
        // merge, below, costs every S item a barrier: 1x128x512x512 f32 took 95.9 us against
        // 92.5 with it, H200.)
        if (threadIdx.x < 32) {
          unsigned old = 0;
          if (threadIdx.x == 0) old = gn_pipe::arrive(part, c, st, arrive + 2 * group);
          old = __shfl_sync(0xffffffffu, old, 0);
          if (old == kCount - 1) {  // the group's last chunk: merge once, publish
            // Lane 0 acquired the other chunks' partials; every lane acquires them too rather
            // than lean on __syncwarp carrying lane 0's acquire (once per group).
            __syncwarp();
            gn_pipe::load_acquire(arrive + 2 * group);
            const gn::Stat gs = gn_split::merge_partials<Ch::kCount, Ch::kNvec, Ch::kChunk, kVec>(
                part + static_cast<long long>(group) * kCount);
            if (threadIdx.x == 0) gn_pipe::publish(gstat + group, gs, arrive + 2 * group);
          }
        }
      } else {
        // Hundreds of partials: the whole CTA merges them, a load or two a thread, where one
        // warp's long chain of loads would hold up every A item of the group (one 64 MB group
        // of 1024 chunks, 1x64x512x512/G1 f32: 61.2 us against 65.6, H200).
        if (threadIdx.x == 0)
          last_in_group = gn_pipe::arrive(part, c, st, arrive + 2 * group) == kCount - 1;
        __syncthreads();  // also: every thread is done with `red` from chunk_stat
        if (last_in_group) {
          gn_pipe::load_acquire(arrive + 2 * group);  // as above, every thread acquires
          const gn::Stat gs = gn_pipe::merge_group<kThreads, kCount, Ch::kNvec, Ch::kChunk, kVec>(
              part + static_cast<long long>(group) * kCount, red);
          if (threadIdx.x == 0) gn_pipe::publish(gstat + group, gs, arrive + 2 * group);
        }
      }
    } else {
      if (threadIdx.x == 0) {
        while (gn_pipe::load_acquire(arrive + 2 * group) <= kCount) {
        }
        next = gn_pipe::take_ticket(bar);
        float2 s;
        asm volatile("ld.global.cg.v2.f32 {%0, %1}, [%2];"
                     : "=f"(s.x), "=f"(s.y)
                     : "l"(gstat + group)
                     : "memory");
        group_stat = s;
      }
      __syncthreads();
      const gn::Stat gs{static_cast<float>(kL), group_stat.x, group_stat.y};
      gn_split::apply_stat<T, P, kCg, kS, kThreads, kVec, kIters, kHasW, kHasB, Act, true>(
          raw, first, gs, y + static_cast<long long>(group) * kL, w, b, eps,
          static_cast<int>(group % static_cast<unsigned>(G)));
    }
    __syncthreads();  // `next` is written
    t = next;
  }
  // Every ticket is taken. The last CTA out returns the words it used to 0 for the next launch
  // on this workspace (stream order: it begins after this grid has completed).
  if (threadIdx.x == 0) {
    unsigned out;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;"
                 : "=r"(out)
                 : "l"(bar + 2)
                 : "memory");
    last_out = out == gridDim.x - 1;
  }
  __syncthreads();
  if (last_out) {
    for (unsigned g = threadIdx.x; g < n / kCount; g += kThreads) arrive[2 * g] = 0;
    if (threadIdx.x == 0) {
      bar[0] = 0;
      bar[2] = 0;
    }
  }
}

}  // namespace kjit
