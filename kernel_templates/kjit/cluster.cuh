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

#if __CUDA_ARCH__ >= 900
// The address of `local` (a shared-memory address of this CTA) in CTA `rank` of the cluster.
__forceinline__ unsigned cluster_map(const float* local, unsigned rank) {
  unsigned addr, remote;
  asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }"
               : "=r"(addr)
               : "l"(local));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
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

}  // namespace kjit
