// A 16 MB copy shaped like an on-chip GroupNorm: every CTA loads its whole slice, optionally
// waits at a cluster barrier, then stores it. Measures what the load -> barrier -> store phase
// structure costs before any statistics are computed.
#include "common.cuh"

namespace {

constexpr long long kBytes = 16ll << 20;
constexpr int kBuffers = 12;  // 384 MB of rotating buffers, far more than L2
std::vector<uint4*> xs, ys;
cudaStream_t stream;

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// One bulk copy of `bytes` into shared memory, then the threads store it.
template <int kCluster, int kThreads>
__global__ void __launch_bounds__(kThreads)
    staged(const uint4* __restrict__ x, uint4* __restrict__ y, int bytes) {
  extern __shared__ __align__(128) unsigned char sm[];
  auto* bar = reinterpret_cast<unsigned long long*>(sm);
  uint4* d = reinterpret_cast<uint4*>(sm + 128);
  const uint4* src = x + (long long)blockIdx.x * (bytes / 16);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bar)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)),
                 "r"(bytes)
                 : "memory");
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
            "r"(smem_addr(d)),
        "l"(src), "r"(bytes), "r"(smem_addr(bar))
        : "memory");
  }
  __syncthreads();
  unsigned done = 0;
  do {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; "
        "selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(smem_addr(bar))
        : "memory");
  } while (!done);
  if (kCluster > 1) cluster_sync_all();
  uint4* dst = y + (long long)blockIdx.x * (bytes / 16);
  for (int i = threadIdx.x; i < bytes / 16; i += kThreads) store_cs(dst + i, d[i]);
}

// kPer vectors per thread loaded into registers, a barrier, then stored.
template <int kCluster, int kThreads, int kPer>
__global__ void __launch_bounds__(kThreads)
    held(const uint4* __restrict__ x, uint4* __restrict__ y) {
  const long long base = (long long)blockIdx.x * kThreads * kPer;
  uint4 r[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) r[i] = x[base + i * kThreads + threadIdx.x];
  __syncthreads();
  if (kCluster > 1) cluster_sync_all();
#pragma unroll
  for (int i = 0; i < kPer; ++i) store_cs(y + base + i * kThreads + threadIdx.x, r[i]);
}

template <int kCluster, int kThreads>
void run_staged(int slice) {
  auto k = staged<kCluster, kThreads>;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, slice + 128));
  if (kCluster > 8) CK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  const int grid = static_cast<int>(kBytes / slice);
  const float t = time_graph(stream, 20, [&](int i) {
    launch(stream, k, grid, kThreads, slice + 128, kCluster, false, (const uint4*)xs[i % kBuffers],
           ys[i % kBuffers], slice);
  });
  std::printf("staged  cluster=%2d threads=%d slice=%6d grid=%5d: %.2f us\n", kCluster, kThreads,
              slice, grid, t);
}

template <int kCluster, int kThreads, int kPer>
void run_held() {
  auto k = held<kCluster, kThreads, kPer>;
  if (kCluster > 8) CK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  const int grid = static_cast<int>(kBytes / (16 * kThreads * kPer));
  const float t = time_graph(stream, 20, [&](int i) {
    launch(stream, k, grid, kThreads, 0, kCluster, false, (const uint4*)xs[i % kBuffers],
           ys[i % kBuffers]);
  });
  std::printf("held    cluster=%2d threads=%d per=%d grid=%5d: %.2f us\n", kCluster, kThreads, kPer,
              grid, t);
}

}  // namespace

int main() {
  CK(cudaStreamCreate(&stream));
  alloc_rotating(kBytes, kBuffers, 1, &xs, &ys);
  const float t = time_graph(stream, 20, [&](int i) {
    copy_kernel<<<132 * 8, 512, 0, stream>>>(xs[i % kBuffers], ys[i % kBuffers], kBytes / 16);
  });
  std::printf("copy 16 MB: %.2f us\n", t);
  run_staged<1, 256>(65536);
  run_staged<8, 256>(65536);
  run_staged<1, 256>(32768);
  run_staged<16, 256>(32768);
  run_staged<1, 256>(131072);
  run_staged<4, 256>(131072);
  run_held<1, 256, 16>();
  run_held<8, 256, 16>();
  run_held<1, 1024, 8>();
  return 0;
}
