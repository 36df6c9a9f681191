// Shared by the few-large-groups experiments: error check, graph-replay timing, launch helper.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                \
  do {                                                                       \
    cudaError_t e_ = (x);                                                    \
    if (e_ != cudaSuccess) {                                                 \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                          \
    }                                                                        \
  } while (0)

// Device us per call: `reps` calls of body(i) captured in one graph, median of 25 replays.
template <class F>
float time_graph(cudaStream_t s, int reps, F&& body) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < reps; ++i) body(i);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> t;
  for (int k = 0; k < 25; ++k) {
    CK(cudaEventRecord(e0, s));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1000.f / reps);
  }
  std::sort(t.begin(), t.end());
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  return t[t.size() / 2];
}

// cudaLaunchKernelEx with an optional cluster size (> 1) and programmatic dependent launch.
template <class K, class... A>
void launch(cudaStream_t s, K k, int grid, int threads, int smem, int cluster, bool pdl, A... a) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = threads;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute at[2];
  int n = 0;
  if (cluster > 1) {
    at[n].id = cudaLaunchAttributeClusterDimension;
    at[n].val.clusterDim.x = cluster;
    at[n].val.clusterDim.y = at[n].val.clusterDim.z = 1;
    ++n;
  }
  if (pdl) {
    at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cfg.attrs = at;
  cfg.numAttrs = n;
  CK(cudaLaunchKernelEx(&cfg, k, a...));
}

__device__ __forceinline__ void cluster_sync_all() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// n pairs of (x filled with byte `fill`, y) buffers of `bytes` each.
inline void alloc_rotating(long long bytes, int n, int fill, std::vector<uint4*>* xs,
                           std::vector<uint4*>* ys) {
  for (int i = 0; i < n; ++i) {
    uint4 *a, *b;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemset(a, fill, bytes));
    xs->push_back(a);
    ys->push_back(b);
  }
}

// A 16-byte store marked evict-first (st.global.cs), as kjit stores streamed outputs.
__device__ __forceinline__ void store_cs(uint4* p, uint4 u) {
  asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(u.x), "r"(u.y), "r"(u.z),
               "r"(u.w)
               : "memory");
}

__global__ void copy_kernel(const uint4* __restrict__ x, uint4* __restrict__ y, long long nvec) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < nvec;
       i += (long long)gridDim.x * blockDim.x)
    y[i] = x[i];
}

// Shared by the GroupNorm experiments (two_kernel.cu, pipelined.cu): 16-byte packs of float or
// bf16, conversions, loads with an L2 policy, and a CTA sum.
template <class T>
struct V16 {
  T v[16 / sizeof(T)];
};
__device__ __forceinline__ float to_f(float v) {
  return v;
}
__device__ __forceinline__ float to_f(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <class T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}

__device__ __forceinline__ unsigned long long l2_policy(bool keep) {
  unsigned long long p;
  if (keep)
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  else
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
template <class T>
__device__ __forceinline__ V16<T> load(const T* p, unsigned long long policy) {
  uint4 u;
  asm volatile("ld.global.nc.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
               : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w)
               : "l"(p), "l"(policy));
  V16<T> r;
  memcpy(&r, &u, 16);
  return r;
}

template <int kThreads>
__device__ float block_sum(float v, float* red) {
  for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(~0u, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < kThreads / 32; ++i) s += red[i];
  return s;
}

// (mean, M2) of the chunk a CTA holds in r (kPer packs a thread), exact two-pass; every thread
// gets them.
template <int kThreads, int kPer, class T>
__device__ float2 chunk_mean_m2(const V16<T> (&r)[kPer], float* red) {
  constexpr int kVec = 16 / sizeof(T);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < kPer; ++i)
#pragma unroll
    for (int j = 0; j < kVec; ++j) s += to_f(r[i].v[j]);
  const float mean = block_sum<kThreads>(s, red) * (1.f / (kThreads * kPer * kVec));
  float m2 = 0.f;
#pragma unroll
  for (int i = 0; i < kPer; ++i)
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const float d = to_f(r[i].v[j]) - mean;
      m2 += d * d;
    }
  return make_float2(mean, block_sum<kThreads>(m2, red));
}
