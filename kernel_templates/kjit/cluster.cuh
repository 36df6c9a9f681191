// Thread-block cluster primitives (sm_90) in inline PTX: rank, barrier, and reads of another
// CTA's shared memory (distributed shared memory). No cooperative_groups header needed.
#pragma once

namespace kjit {

__forceinline__ unsigned cluster_rank() {
#if __CUDA_ARCH__ >= 900
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
#else
  return 0;
#endif
}

// The barrier instructions are the .aligned forms, which every thread of the warp must execute
// together: each primitive first reconverges the warp (__syncwarp), since code before it (a lane
// writing a slot) may have left it diverged, and a diverged .aligned barrier is undefined. Every
// thread of a warp must call them.
__forceinline__ void cluster_arrive() {
#if __CUDA_ARCH__ >= 900
  __syncwarp();
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
#endif
}

// An arrival that orders none of this thread's earlier memory accesses for the peers: for threads
// that wrote nothing the peers read after the barrier (a release arrive costs a fence per warp).
__forceinline__ void cluster_arrive_relaxed() {
#if __CUDA_ARCH__ >= 900
  __syncwarp();
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#endif
}

__forceinline__ void cluster_wait() {
#if __CUDA_ARCH__ >= 900
  __syncwarp();
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}

// The 32-bit shared-state-space address of `p` (a shared-memory address of this CTA).
__forceinline__ unsigned shared_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

#if __CUDA_ARCH__ >= 900
// The address of `local` (a shared-memory address of this CTA) in CTA `rank` of the cluster.
__forceinline__ unsigned cluster_map(const void* local, unsigned rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(remote)
               : "r"(shared_addr(local)), "r"(rank));
  return remote;
}
#endif

// Reads the float at `local` (a shared-memory address of this CTA) in CTA `rank` of the cluster.
__forceinline__ float cluster_load(const float* local, unsigned rank) {
#if __CUDA_ARCH__ >= 900
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];"
               : "=f"(v)
               : "r"(cluster_map(local, rank))
               : "memory");
  return v;
#else
  return *local;
#endif
}

// Writes v to the float at `local` (a shared-memory address of this CTA) in CTA `rank` of the
// cluster. That CTA must be running: a cluster barrier after the kernel's start says so.
__forceinline__ void cluster_store(float* local, unsigned rank, float v) {
#if __CUDA_ARCH__ >= 900
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(cluster_map(local, rank)), "f"(v)
               : "memory");
#else
  *local = v;
#endif
}

// One-sided messages between the CTAs of a cluster: a sender's st.async writes 8 or 16 bytes into
// the receiver's shared memory and counts them on the receiver's mbarrier, which completes its
// phase once every expected byte has landed. Unlike a cluster barrier, nobody waits for a peer to
// arrive, and no CTA needs to outlive its peers' reads: the receiver waits for what it receives.
//
// Protocol, one inbox (and its slots) per exchange, each used once per launch (phase 0): one
// thread calls inbox_init for every inbox before the kernel's first cluster arrive (the
// arrive/wait pair publishes the initialized barriers to the peers); one thread calls
// inbox_expect with the bytes to come; senders call cluster_wait before their first send (every
// peer's inboxes are initialized; later exchanges need no further wait) and then send; receivers
// call inbox_wait and read the slots.
__forceinline__ void inbox_init(unsigned long long* bar) {
#if __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_addr(bar)) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

// The single arrival the phase needs, with the bytes it waits for. The peers' bytes may land
// before this call: the transaction count may run negative until it.
__forceinline__ void inbox_expect(unsigned long long* bar, unsigned bytes) {
#if __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_addr(bar)),
               "r"(bytes)
               : "memory");
#endif
}

// Returns once phase 0 completed: every expected byte landed, visible to the calling thread.
__forceinline__ void inbox_wait(unsigned long long* bar) {
#if __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n .reg .pred done;\n"
      "kjit_inbox_wait:\n"
      " mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], 0;\n"
      " @!done bra kjit_inbox_wait;\n}" ::"r"(shared_addr(bar))
      : "memory");
#endif
}

// Writes v to `slot` in CTA `rank` and counts its bytes (8 or 16) on that CTA's inbox `bar` (both
// are this CTA's addresses of the same variables). Before sm_90 (no clusters: rank 0 is this CTA)
// a plain store, as inbox_expect and inbox_wait are no-ops there.
__forceinline__ void inbox_send(float4* slot, unsigned long long* bar, unsigned rank, float4 v) {
#if __CUDA_ARCH__ >= 900
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, "
      "[%5];" ::"r"(cluster_map(slot, rank)),
      "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(cluster_map(bar, rank))
      : "memory");
#else
  (void)bar;
  (void)rank;
  *slot = v;
#endif
}

__forceinline__ void inbox_send(float2* slot, unsigned long long* bar, unsigned rank, float2 v) {
#if __CUDA_ARCH__ >= 900
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(
          cluster_map(slot, rank)),
      "f"(v.x), "f"(v.y), "r"(cluster_map(bar, rank))
      : "memory");
#else
  (void)bar;
  (void)rank;
  *slot = v;
#endif
}

}  // namespace kjit
