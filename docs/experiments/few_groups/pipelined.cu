// GroupNorm + SiLU for few large groups as one pipelined launch (NCHW): a persistent grid takes
// work items in ticket order. Item S(c) reads chunk c of x (asking L2 to keep it) and publishes
// the chunk's (mean, M2); item A(c) reads chunk c again (from L2), waits until every chunk of
// its group has published, merges, and writes y. The ticket order interleaves S items `lag`
// chunks ahead of A items, so HBM reads of later groups overlap the writes of earlier ones, as
// in a copy, instead of a load phase followed by a store phase.
//
// Forward progress without a cooperative launch: tickets are taken by running CTAs in order and
// an item only waits for items with smaller tickets, so the smallest unfinished ticket is always
// being worked on and never waits.
#include <cuda_bf16.h>

#include <cmath>
#include <cstring>
#include <random>

#include "common.cuh"

namespace {

struct Work {
  unsigned* ticket;  // [0] next ticket, [1] CTAs exited; then arrive[groups]
  float2* part;      // one (mean, M2) per chunk
  int nchunks, cpg, lag, spatial, cg, channels;
};

__device__ __forceinline__ void item_of(const Work& w, int t, bool* apply, int* c) {
  const int n = w.nchunks, L = w.lag;
  if (t < L) {
    *apply = false, *c = t;
  } else if (t < 2 * n - L) {
    const int k = (t - L) >> 1;
    *apply = (t - L) & 1;
    *c = *apply ? k : L + k;
  } else {
    *apply = true, *c = t - n;
  }
}

template <class T, int kThreads, int kPer>
__global__ void __launch_bounds__(kThreads)
    gn_pipe(const T* __restrict__ x, T* __restrict__ y, const float* __restrict__ wt,
            const float* __restrict__ bs, Work w) {
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kChunk = kThreads * kPer * kVec;  // elements
  __shared__ float red[32];
  __shared__ int next_t;
  __shared__ float2 stat;
  asm volatile("griddepcontrol.wait;" ::: "memory");
  unsigned* arrive = w.ticket + 2;
  const unsigned long long keep = l2_policy(true), drop = l2_policy(false);
  if (threadIdx.x == 0) next_t = atomicAdd(w.ticket, 1u);
  __syncthreads();
  int t = next_t;
  while (t < 2 * w.nchunks) {
    __syncthreads();  // everyone has read next_t
    bool apply;
    int c;
    item_of(w, t, &apply, &c);
    // The next ticket is taken only by a CTA that will not wait any more in this item, so a
    // ticket held ahead is never stuck behind a wait.
    if (threadIdx.x == 0 && !apply) next_t = atomicAdd(w.ticket, 1u);
    const int g = c / w.cpg;
    const long long off = (long long)c * kChunk;
    V16<T> r[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i)
      r[i] = load(x + off + (i * kThreads + threadIdx.x) * kVec, apply ? drop : keep);
    if (!apply) {
      const float2 st = chunk_mean_m2<kThreads>(r, red);
      if (threadIdx.x == 0) {
        w.part[c] = st;
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(arrive + g) : "memory");
      }
    } else {
      if (threadIdx.x < 32) {
        if (threadIdx.x == 0) {
          unsigned now;
          do {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];"
                         : "=r"(now)
                         : "l"(arrive + g)
                         : "memory");
          } while (now < (unsigned)w.cpg);
          next_t = atomicAdd(w.ticket, 1u);
        }
        __syncwarp();
        asm volatile("fence.acq_rel.gpu;" ::: "memory");
        const int lane = threadIdx.x;
        float2 pv[4];
        float sm = 0.f;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const int p = lane + 32 * k;
          pv[k] = p < w.cpg ? __ldcg(&w.part[g * w.cpg + p]) : make_float2(0.f, 0.f);
          sm += pv[k].x;
        }
        for (int p = lane + 128; p < w.cpg; p += 32) sm += __ldcg(&w.part[g * w.cpg + p]).x;
        for (int o = 16; o; o >>= 1) sm += __shfl_xor_sync(~0u, sm, o);
        const float mean = sm / w.cpg;
        float q = 0.f;
#pragma unroll
        for (int k = 0; k < 4; ++k)
          if (lane + 32 * k < w.cpg) q += pv[k].y + kChunk * (pv[k].x - mean) * (pv[k].x - mean);
        for (int p = lane + 128; p < w.cpg; p += 32) {
          const float2 a = __ldcg(&w.part[g * w.cpg + p]);
          q += a.y + kChunk * (a.x - mean) * (a.x - mean);
        }
        for (int o = 16; o; o >>= 1) q += __shfl_xor_sync(~0u, q, o);
        if (lane == 0) stat = make_float2(mean, rsqrtf(q / ((float)kChunk * w.cpg) + 1e-5f));
      }
      __syncthreads();
      const float mean = stat.x, rstd = stat.y;
      const long long goff = off - (long long)g * w.cpg * kChunk;
      const int first_ch = (g * w.cg) % w.channels;
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const long long e = goff + (i * kThreads + threadIdx.x) * kVec;
        const int ch = first_ch + static_cast<int>(e / w.spatial);
        const float sc = wt[ch] * rstd, sh = bs[ch] - mean * sc;
        V16<T> o;
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          const float z = fmaf(to_f(r[i].v[j]), sc, sh);
          o.v[j] = from_f<T>(__fdividef(z, 1.f + __expf(-z)));
        }
        uint4 u;
        memcpy(&u, &o, 16);
        store_cs(reinterpret_cast<uint4*>(y + off + (i * kThreads + threadIdx.x) * kVec), u);
      }
    }
    __syncthreads();
    t = next_t;
  }
  // The last CTA out resets the counters for the next launch on this workspace.
  if (threadIdx.x == 0) {
    unsigned out;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;"
                 : "=r"(out)
                 : "l"(w.ticket + 1)
                 : "memory");
    if (out == gridDim.x - 1) {
      w.ticket[0] = 0;
      w.ticket[1] = 0;
      for (int g = 0; g < w.nchunks / w.cpg; ++g) arrive[g] = 0;
      __threadfence();
    }
  }
}

__global__ void fill(float* p, long long n, unsigned seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    p[i] = (h & 0xffffff) * (1.f / 16777216.f) * 4.f - 1.5f;
  }
}
template <class T>
__global__ void convert(const float* s, T* d, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    d[i] = from_f<T>(s[i]);
}

float host_f(float v) {
  return v;
}
float host_f(__nv_bfloat16 v) {
  unsigned short u;
  memcpy(&u, &v, 2);
  unsigned b = (unsigned)u << 16;
  float f;
  memcpy(&f, &b, 4);
  return f;
}

template <class T, int kThreads, int kPer>
void run(int N, int C, int H, int W, int G, const std::vector<int>& lags,
         std::vector<int> per_sm = {4}) {
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kChunk = kThreads * kPer * kVec;
  const long long S = (long long)H * W, numel = (long long)N * C * S, group = C / G * S;
  if (group % kChunk) {
    std::printf("skip: group %lld not a multiple of chunk %d\n", group, kChunk);
    return;
  }
  const long long bytes = numel * sizeof(T);
  const int nchunks = (int)(numel / kChunk), cpg = (int)(group / kChunk), groups = N * G;
  const int nb = (int)std::max<long long>(2, (400ll << 20) / (2 * bytes));
  std::vector<T*> xs(nb), ys(nb);
  float* tmp;
  CK(cudaMalloc(&tmp, numel * 4));
  for (int i = 0; i < nb; ++i) {
    CK(cudaMalloc(&xs[i], bytes));
    CK(cudaMalloc(&ys[i], bytes));
    fill<<<1024, 256>>>(tmp, numel, 1234u + i);
    convert<T><<<1024, 256>>>(tmp, xs[i], numel);
  }
  std::vector<float> hw(C), hb(C);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int c = 0; c < C; ++c) hw[c] = 1.f + 0.5f * u(rng), hb[c] = 0.5f * u(rng);
  float *w, *b;
  CK(cudaMalloc(&w, C * 4));
  CK(cudaMalloc(&b, C * 4));
  CK(cudaMemcpy(w, hw.data(), C * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b, hb.data(), C * 4, cudaMemcpyHostToDevice));
  unsigned* ticket;
  float2* part;
  CK(cudaMalloc(&ticket, (2 + groups) * 4));
  CK(cudaMemset(ticket, 0, (2 + groups) * 4));
  CK(cudaMalloc(&part, nchunks * sizeof(float2)));
  auto k = gn_pipe<T, kThreads, kPer>;
  int occ = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k, kThreads, 0));
  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, k));
  const int sms = 132;
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  const float copy = time_graph(s, 20, [&](int i) {
    copy_kernel<<<132 * 8, 512, 0, s>>>(reinterpret_cast<const uint4*>(xs[i % nb]),
                                        reinterpret_cast<uint4*>(ys[i % nb]), bytes / 16);
  });
  std::printf(
      "%s %dx%dx%dx%d/G%d (%.0f MB, chunk %d KB, %d per group, %d regs, occ %d): copy %.2f us\n",
      sizeof(T) == 4 ? "f32" : "bf16", N, C, H, W, G, bytes / 1048576.0,
      kChunk * (int)sizeof(T) / 1024, cpg, fa.numRegs, occ, copy);
  // Reference (float64 statistics) for xs[0], computed once.
  std::vector<T> hx(numel), hy(numel);
  std::vector<float> ref(numel);
  CK(cudaMemcpy(hx.data(), xs[0], bytes, cudaMemcpyDeviceToHost));
  for (int gi = 0; gi < groups; ++gi) {
    const long long o = gi * group;
    double m = 0, v = 0;
    for (long long e = 0; e < group; ++e) m += host_f(hx[o + e]);
    m /= group;
    for (long long e = 0; e < group; ++e) v += (host_f(hx[o + e]) - m) * (host_f(hx[o + e]) - m);
    const double rs = 1 / std::sqrt(v / group + 1e-5);
    for (long long e = 0; e < group; ++e) {
      const int ch = (int)(((o + e) / S) % C);
      const double z = (host_f(hx[o + e]) - m) * rs * hw[ch] + hb[ch];
      ref[o + e] = (float)(z / (1 + std::exp(-z)));
    }
  }
  for (int ps : per_sm) {
    if (ps > occ) continue;
    const int resident = sms * ps;
    for (int lg : lags) {
      // At least a group's chunks: below that an A item could wait for a later ticket.
      Work wk{ticket, part, nchunks, cpg, std::min(nchunks, std::max(cpg, lg)), (int)S, C / G, C};
      CK(cudaMemset(ys[0], 0xff, bytes));
      launch(s, k, resident, kThreads, 0, 1, true, (const T*)xs[0], ys[0], (const float*)w,
             (const float*)b, wk);
      CK(cudaStreamSynchronize(s));
      CK(cudaMemcpy(hy.data(), ys[0], bytes, cudaMemcpyDeviceToHost));
      double num = 0, den = 0;
      for (long long e = 0; e < numel; ++e) {
        const double d = (double)host_f(hy[e]) - ref[e];
        num += d * d, den += (double)ref[e] * ref[e];
      }
      const float t = time_graph(s, 20, [&](int i) {
        launch(s, k, resident, kThreads, 0, 1, true, (const T*)xs[i % nb], ys[i % nb],
               (const float*)w, (const float*)b, wk);
      });
      std::printf("  %d CTAs/SM, lag %d chunks: %.2f us (%.1f%% of copy), rel L2 %.2e\n", ps,
                  wk.lag, t, 100.f * copy / t, std::sqrt(num / den));
    }
  }
  for (int i = 0; i < nb; ++i) {
    CK(cudaFree(xs[i]));
    CK(cudaFree(ys[i]));
  }
  CK(cudaFree(tmp));
  CK(cudaFree(w));
  CK(cudaFree(b));
  CK(cudaFree(ticket));
  CK(cudaFree(part));
  CK(cudaStreamDestroy(s));
}

}  // namespace

int main() {
  const std::vector<int> lags = {256, 384, 512, 640};
  run<float, 256, 8>(1, 128, 512, 512, 32, lags, {3, 4});
  run<float, 256, 16>(1, 128, 512, 512, 32, lags, {2});
  run<float, 128, 8>(1, 128, 512, 512, 32, {512, 768, 1024}, {6, 8});
  run<float, 512, 8>(1, 128, 512, 512, 32, {256, 384, 512}, {2});
  run<float, 256, 8>(1, 64, 1024, 1024, 32, lags, {4});
  run<float, 256, 8>(1, 128, 1024, 1024, 32, lags, {4});
  run<float, 256, 8>(1, 256, 256, 256, 32, lags, {4});
  run<float, 256, 8>(2, 128, 256, 256, 32, lags, {4});
  run<__nv_bfloat16, 256, 4>(1, 128, 512, 512, 32, lags, {4});
  run<__nv_bfloat16, 256, 4>(1, 64, 1024, 1024, 32, lags, {4});
  return 0;
}
