// A barrier in global memory for the CTAs of one group of a cooperative launch (every CTA of the
// grid is resident, so a CTA that waits cannot keep one that has not started from running).
//
// bar[0] counts this round's arrivals and is 0 between rounds: the last arrival resets it, so
// rounds of different sizes (other problems on the same workspace) may follow each other. bar[1]
// is a generation the last arrival bumps; the others wait for it to change. A round must not
// begin before the previous one on the same words has ended: kjit runs one kernel at a time per
// workspace (stream order; a programmatic launch waits in pdl_wait before it arrives).
#pragma once

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
#error "kjit/group_barrier.cuh needs sm_70 (acquire/release atomics)"
#endif

namespace kjit {

// Called by one thread of each of `count` CTAs. Everything the calling thread wrote before it
// (and, through its CTA's earlier __syncthreads, its CTA) is visible to every CTA of the round
// after it returns: release on arrival, acquire on the way out.
__forceinline__ void group_barrier(unsigned* bar, unsigned count) {
#if defined(__CUDA_ARCH__)
  unsigned gen, old;
  // Read before arriving (the acq_rel add keeps it there): the generation cannot move on before
  // this CTA has arrived.
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(gen) : "l"(bar + 1) : "memory");
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(bar) : "memory");
  if (old == count - 1) {
    asm volatile("st.relaxed.gpu.global.u32 [%0], 0;" ::"l"(bar) : "memory");
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(bar + 1) : "memory");
  } else {
    unsigned now, spins = 0;
    unsigned long long start = 0;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(now) : "l"(bar + 1) : "memory");
      // A round that never completes (a grid launched with fewer CTAs than `count`, a barrier
      // word not left at 0) traps after ~10 s, an error the host sees, rather than a hang: the
      // others are resident and merely computing, so a real wait lasts micro- to milliseconds.
      if ((++spins & 1023u) == 0) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        if (start == 0) start = t;
        if (t - start > 10000000000ull) __trap();
      }
    } while (now == gen);
  }
#endif
}

}  // namespace kjit
