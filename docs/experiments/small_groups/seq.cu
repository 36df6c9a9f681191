// Several groups per CTA, one after another: does a CTA that issues the loads of its next group
// before it merges and stores the current one overlap its store phase with loads, where one
// group per CTA (kjit's register kernel) cannot? f32 NCHW GroupNorm + SiLU, affine, exact
// two-pass statistics from registers (Chan merge over the CTA), timed like kjit-bench: graph
// replay on rotating buffers, median of 25 replays. Checked against a float64 reference.
#include "../few_groups/common.cuh"

#include <cmath>

namespace {

// kjit/gn_stats.cuh's Stat and merges, copied: that header is written for NVRTC's -default-device
// (no __device__ annotations) and does not compile under nvcc.
struct Stat {
  float n, mean, m2;
};
__device__ __forceinline__ Stat merge(Stat a, Stat b) {
  if (b.n == 0.f) return a;
  if (a.n == 0.f) return b;
  const float n = a.n + b.n, d = b.mean - a.mean, fb = __fdividef(b.n, n);
  return {n, fmaf(d, fb, a.mean), a.m2 + b.m2 + d * d * a.n * fb};
}
__device__ __forceinline__ Stat warp_merge(Stat s) {
  const unsigned lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    Stat t{__shfl_xor_sync(~0u, s.n, o), __shfl_xor_sync(~0u, s.mean, o),
           __shfl_xor_sync(~0u, s.m2, o)};
    s = (lane & o) ? merge(t, s) : merge(s, t);
  }
  return s;
}
template <int kThreads>
__device__ __forceinline__ Stat cta_merge(Stat s, float* red) {
  s = warp_merge(s);
  if (kThreads == 32) return s;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    red[warp] = s.n;
    red[32 + warp] = s.mean;
    red[64 + warp] = s.m2;
  }
  __syncthreads();
  Stat w = lane < kThreads / 32 ? Stat{red[lane], red[32 + lane], red[64 + lane]} : Stat{0, 0, 0};
  w = warp_merge(w);
  return w;
}

// kSeq groups per CTA: every load of every group goes out first, then each group in turn is
// merged and stored. kSeq = 1 is kjit's register kernel.
template <int kThreads, int kIters, int kSeq, int kCg, int kS>
__global__ void __launch_bounds__(kThreads)
    gn_seq(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ w,
           const float* __restrict__ b, int G, int num_groups) {
  constexpr int kL = kCg * kS;
  constexpr int kNvec = kL / 4;
  static_assert(kNvec <= kThreads * kIters, "a group must fit");
  __shared__ float red[2][96];
  __shared__ float ss[2][2][kCg];
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const int t = threadIdx.x;
  float4 raw[kSeq][kIters];
#pragma unroll
  for (int q = 0; q < kSeq; ++q) {
    const int grp = blockIdx.x * kSeq + q;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int vi = i * kThreads + t;
      raw[q][i] = make_float4(0, 0, 0, 0);
      if (grp < num_groups && vi < kNvec)
        raw[q][i] = reinterpret_cast<const float4*>(x + (long long)grp * kL)[vi];
    }
  }
#pragma unroll
  for (int q = 0; q < kSeq; ++q) {
    const int grp = blockIdx.x * kSeq + q;
    const int g = grp % G;
    float s = 0.f;
    int valid = 0;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const bool ok = grp < num_groups && i * kThreads + t < kNvec;
      valid += ok ? 4 : 0;
      s += raw[q][i].x + raw[q][i].y + raw[q][i].z + raw[q][i].w;
    }
    const float tm = valid ? __fdiv_rn(s, (float)valid) : 0.f;
    float m2 = 0.f;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      if (grp < num_groups && i * kThreads + t < kNvec) {
        const float4 v = raw[q][i];
        m2 += (v.x - tm) * (v.x - tm) + (v.y - tm) * (v.y - tm) + (v.z - tm) * (v.z - tm) +
              (v.w - tm) * (v.w - tm);
      }
    }
    const Stat st = cta_merge<kThreads>(Stat{(float)valid, tm, m2}, red[q & 1]);
    const float mean = st.mean, rstd = rsqrtf(st.m2 * (1.f / kL) + 1e-5f);
    for (int c = t; c < kCg; c += kThreads) {
      ss[q & 1][0][c] = w[g * kCg + c] * rstd;
      ss[q & 1][1][c] = b[g * kCg + c];
    }
    if (kThreads > 32)
      __syncthreads();
    else
      __syncwarp();
    if (grp < num_groups) {
#pragma unroll
      for (int i = 0; i < kIters; ++i) {
        const int vi = i * kThreads + t;
        if (vi < kNvec) {
          const int c = vi * 4 / kS;
          const float a = ss[q & 1][0][c], sh = ss[q & 1][1][c];
          float4 v = raw[q][i];
          float z;
          z = fmaf(v.x - mean, a, sh);
          v.x = __fdividef(z, 1.f + __expf(-z));
          z = fmaf(v.y - mean, a, sh);
          v.y = __fdividef(z, 1.f + __expf(-z));
          z = fmaf(v.z - mean, a, sh);
          v.z = __fdividef(z, 1.f + __expf(-z));
          z = fmaf(v.w - mean, a, sh);
          v.w = __fdividef(z, 1.f + __expf(-z));
          reinterpret_cast<float4*>(y + (long long)grp * kL)[vi] = v;
        }
      }
    }
  }
}

__global__ void silu_kernel(const float4* __restrict__ x, float4* __restrict__ y, long long n) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    float4 v = x[i];
    v.x = __fdividef(v.x, 1.f + __expf(-v.x));
    v.y = __fdividef(v.y, 1.f + __expf(-v.y));
    v.z = __fdividef(v.z, 1.f + __expf(-v.z));
    v.w = __fdividef(v.w, 1.f + __expf(-v.w));
    y[i] = v;
  }
}

struct Shape {
  int N, C, S, G;
};

double check(const Shape& sh, const std::vector<float>& hx, const std::vector<float>& hw,
             const std::vector<float>& hb, const float* dy) {
  const long long total = (long long)sh.N * sh.C * sh.S;
  std::vector<float> hy(total);
  CK(cudaMemcpy(hy.data(), dy, total * 4, cudaMemcpyDeviceToHost));
  const int cg = sh.C / sh.G;
  const long long L = (long long)cg * sh.S;
  double worst = 0;
  for (long long grp = 0; grp < (long long)sh.N * sh.G; ++grp) {
    const float* xg = hx.data() + grp * L;
    double m = 0, v = 0;
    for (long long e = 0; e < L; ++e) m += xg[e];
    m /= L;
    for (long long e = 0; e < L; ++e) v += (xg[e] - m) * (xg[e] - m);
    const double r = 1 / std::sqrt(v / L + 1e-5);
    for (long long e = 0; e < L; ++e) {
      const int c = (int)(grp % sh.G) * cg + (int)(e / sh.S);
      const double z = (xg[e] - m) * r * hw[c] + hb[c];
      const double ref = z / (1 + std::exp(-z));
      worst = std::max(worst, std::fabs(ref - hy[grp * L + e]) / (1e-4 + 1e-4 * std::fabs(ref)));
    }
  }
  return worst;  // <= 1: allclose(1e-4, 1e-4)
}

// One shape's inputs on the device (n rotating pairs of x and y), and their host copies.
struct Setup {
  Shape sh;
  std::vector<float*> xs, ys;
  float *w = nullptr, *b = nullptr;
  std::vector<float> hx, hw, hb;
  cudaStream_t s = nullptr;
};

template <int kThreads, int kIters, int kSeq, int kCg, int kS>
void run(const char* name, const Setup& d) {
  const Shape& sh = d.sh;
  const int groups = sh.N * sh.G;
  const int grid = (groups + kSeq - 1) / kSeq;
  auto k = gn_seq<kThreads, kIters, kSeq, kCg, kS>;
  auto call = [&](int i) {
    launch(d.s, k, grid, kThreads, 0, 1, true, (const float*)d.xs[i], d.ys[i], (const float*)d.w,
           (const float*)d.b, sh.G, groups);
  };
  CK(cudaMemset(d.ys[0], 0xff, (long long)sh.N * sh.C * sh.S * 4));
  call(0);
  CK(cudaStreamSynchronize(d.s));
  const double err = check(sh, d.hx, d.hw, d.hb, d.ys[0]);
  const float us = time_graph(d.s, (int)d.xs.size(), call);
  std::printf("%-34s T=%3d I=%2d seq=%d grid=%4d  %6.2f us  err/tol %.3f%s\n", name, kThreads,
              kIters, kSeq, grid, us, err, err <= 1 ? "" : "  WRONG");
}

template <class F>
void shape(const Shape& sh, F&& variants) {
  const long long total = (long long)sh.N * sh.C * sh.S;
  const int n = std::max(8, (int)((768ll << 20) / (total * 8)));
  Setup d;
  d.sh = sh;
  d.hx.resize(total);
  d.hw.resize(sh.C);
  d.hb.resize(sh.C);
  srand(1);
  for (auto& v : d.hx) v = 3.f * rand() / RAND_MAX - 1.f;
  for (auto& v : d.hw) v = 1.f + 0.5f * rand() / RAND_MAX;
  for (auto& v : d.hb) v = 0.5f * rand() / RAND_MAX - 0.25f;
  for (int i = 0; i < n; ++i) {
    float *a, *c;
    CK(cudaMalloc(&a, total * 4));
    CK(cudaMalloc(&c, total * 4));
    CK(cudaMemcpy(a, d.hx.data(), total * 4, cudaMemcpyHostToDevice));
    d.xs.push_back(a);
    d.ys.push_back(c);
  }
  CK(cudaMalloc(&d.w, sh.C * 4));
  CK(cudaMalloc(&d.b, sh.C * 4));
  CK(cudaMemcpy(d.w, d.hw.data(), sh.C * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d.b, d.hb.data(), sh.C * 4, cudaMemcpyHostToDevice));
  CK(cudaStreamCreateWithFlags(&d.s, cudaStreamNonBlocking));
  std::printf("%dx%dx%d/G%d f32, %d rotating pairs\n", sh.N, sh.C, sh.S, sh.G, n);
  const float silu = time_graph(d.s, n, [&](int i) {
    launch(d.s, silu_kernel, 132 * 8, 256, 0, 1, true, (const float4*)d.xs[i], (float4*)d.ys[i],
           total / 4);
  });
  std::printf("%-34s %6.2f us\n", "silu elementwise (floor)", silu);
  variants(d);
  for (int i = 0; i < n; ++i) {
    CK(cudaFree(d.xs[i]));
    CK(cudaFree(d.ys[i]));
  }
  CK(cudaFree(d.w));
  CK(cudaFree(d.b));
  CK(cudaStreamDestroy(d.s));
}

}  // namespace

int main() {
#define V(T, I, Q) run<T, I, Q, kCg, kS>(#T "x" #I " seq " #Q, d)
  {
    constexpr int kCg = 8, kS = 576;  // the seed shape
    shape({8, 256, kS, 32}, [](const Setup& d) {
      V(192, 6, 1);
      V(192, 6, 2);
      V(384, 3, 1);
      V(384, 3, 2);
      V(128, 9, 2);
      V(96, 12, 1);
      V(96, 12, 2);
      V(192, 6, 4);
      V(64, 18, 1);
      V(64, 18, 2);
    });
  }
  {
    constexpr int kCg = 1, kS = 1024;  // 32x64x32x32/G64
    shape({32, 64, kS, 64}, [](const Setup& d) {
      V(32, 8, 1);
      V(32, 8, 2);
      V(32, 8, 4);
      V(64, 4, 1);
      V(64, 4, 2);
      V(128, 2, 2);
    });
  }
  {
    constexpr int kCg = 40, kS = 256;  // 2x1280x16x16/G32
    shape({2, 1280, kS, 32}, [](const Setup& d) {
      V(320, 8, 1);
      V(640, 4, 1);
      V(1024, 3, 1);
    });
  }
  {
    constexpr int kCg = 128, kS = 64;  // 1x4096x8x8/G32
    shape({1, 4096, kS, 32}, [](const Setup& d) {
      V(256, 8, 1);
      V(512, 4, 1);
      V(1024, 2, 1);
    });
  }
  return 0;
}
