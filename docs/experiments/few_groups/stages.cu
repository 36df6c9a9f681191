// A clustered, register-held bf16 GroupNorm over 16 MB (1x128x256x256/G32) built up stage by
// stage, to see what each costs: 0 = copy through the same registers, 1 = + statistics (a sum
// and a sum of squared deviations, each merged over the CTA and the cluster), 2 = + affine,
// 3 = + SiLU through tanh.approx, 4 = SiLU through exp and a divide.
#include <cuda_bf16.h>

#include "common.cuh"

namespace {

using bf16 = __nv_bfloat16;
struct Bf16x8 {
  bf16 v[8];
};
constexpr long long kBytes = 16ll << 20;
constexpr int kBuffers = 12;
std::vector<uint4*> xs, ys;
float *weight, *bias;
cudaStream_t stream;

__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

__device__ __forceinline__ float cluster_load(const float* local, unsigned rank) {
  unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(local)), remote;
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
  return v;
}

// Sum of v over the CTA (one barrier) and then over the cluster (one cluster barrier).
template <int kCluster, int kThreads>
__device__ float cluster_sum(float v, float* red, float* slot) {
  for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(~0u, v, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = (threadIdx.x & 31) < kThreads / 32 ? red[threadIdx.x & 31] : 0.f;
  for (int o = 16; o; o >>= 1) t += __shfl_xor_sync(~0u, t, o);
  if (threadIdx.x == 0) *slot = t;
  cluster_sync_all();
  float u = (threadIdx.x & 31) < kCluster ? cluster_load(slot, threadIdx.x & 31) : 0.f;
  for (int o = 16; o; o >>= 1) u += __shfl_xor_sync(~0u, u, o);
  return u;
}

template <int kCluster, int kThreads, int kPer, int kStage, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    gn(const uint4* __restrict__ x, uint4* __restrict__ y, const float* __restrict__ w,
       const float* __restrict__ b) {
  __shared__ float red[2][32];
  __shared__ float slot[2];
  asm volatile("griddepcontrol.wait;" ::: "memory");
  constexpr float kCount = float(kCluster) * kThreads * kPer * 8;
  const long long base = (long long)blockIdx.x * kThreads * kPer;
  uint4 r[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) r[i] = x[base + i * kThreads + threadIdx.x];
  float mean = 0.f, rstd = 1.f;
  if (kStage >= 1) {
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      Bf16x8 p;
      memcpy(&p, &r[i], 16);
#pragma unroll
      for (int j = 0; j < 8; ++j) s += __bfloat162float(p.v[j]);
    }
    mean = cluster_sum<kCluster, kThreads>(s, red[0], &slot[0]) / kCount;
    float m2 = 0.f;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      Bf16x8 p;
      memcpy(&p, &r[i], 16);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float d = __bfloat162float(p.v[j]) - mean;
        m2 += d * d;
      }
    }
    rstd = rsqrtf(cluster_sum<kCluster, kThreads>(m2, red[1], &slot[1]) / kCount + 1e-5f);
  }
  const int ch = (blockIdx.x / kCluster) * 4 + (cluster_rank() * 4) / kCluster;  // 4 per group
  const float sc = kStage >= 2 ? w[ch] * rstd : rstd, sh = kStage >= 2 ? b[ch] : 0.f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    uint4 o = r[i];
    if (kStage >= 1) {
      Bf16x8 p;
      memcpy(&p, &r[i], 16);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float z = (__bfloat162float(p.v[j]) - mean) * sc + sh;
        if (kStage == 3) {
          float th;
          asm("tanh.approx.f32 %0, %1;" : "=f"(th) : "f"(0.5f * z));
          z = z * fmaf(0.5f, th, 0.5f);
        }
        if (kStage == 4) z = __fdividef(z, 1.f + __expf(-z));
        p.v[j] = __float2bfloat16(z);
      }
      memcpy(&o, &p, 16);
    }
    y[base + i * kThreads + threadIdx.x] = o;
  }
  if (kCluster > 1) cluster_sync_all();
}

template <int kCluster, int kThreads, int kPer, int kStage, int kMinBlocks = 1>
void run() {
  auto k = gn<kCluster, kThreads, kPer, kStage, kMinBlocks>;
  if (kCluster > 8) CK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  const int grid = static_cast<int>(kBytes / (16 * kThreads * kPer));
  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, k));
  const float t = time_graph(stream, 20, [&](int i) {
    launch(stream, k, grid, kThreads, 0, kCluster, true, (const uint4*)xs[i % kBuffers],
           ys[i % kBuffers], (const float*)weight, (const float*)bias);
  });
  std::printf(
      "cluster=%2d threads=%d per=%2d stage=%d min_blocks=%d regs=%d spill=%d grid=%d: %.2f us\n",
      kCluster, kThreads, kPer, kStage, kMinBlocks, fa.numRegs, static_cast<int>(fa.localSizeBytes),
      grid, t);
}

}  // namespace

int main() {
  CK(cudaStreamCreate(&stream));
  alloc_rotating(kBytes, kBuffers, 0x3c, &xs, &ys);
  CK(cudaMalloc(&weight, 4096));
  CK(cudaMalloc(&bias, 4096));
  CK(cudaMemset(weight, 0, 4096));
  CK(cudaMemset(bias, 0, 4096));
  run<8, 256, 16, 0>();
  run<8, 256, 16, 1>();
  run<8, 256, 16, 2>();
  run<8, 256, 16, 3>();
  run<8, 256, 16, 4>();
  run<8, 256, 16, 1, 2>();  // capped at 128 registers: spills, no faster
  run<16, 128, 8, 1, 4>();
  run<16, 128, 8, 3, 4>();
  return 0;
}
