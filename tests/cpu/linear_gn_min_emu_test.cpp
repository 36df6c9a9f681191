// Runs the fused GroupNorm -> min -> + bias kernel (kernel_templates/kjit/gn_min.cuh) on the CPU,
// so its index math, reductions and barriers are checked without a GPU: each CUDA thread of a
// CTA is a std::thread, __syncthreads a barrier, a warp shuffle an exchange through per-warp
// slots behind a warp barrier, and the dynamic shared memory one array (poisoned with NaN before
// each CTA, guarded by a canary after the size the host computes). A barrier that not every
// thread reaches (divergence) times out and fails the case instead of hanging. Outputs are
// compared with a float64 reference; out is poisoned and guarded too.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kjit/ops/linear_gn_min.hpp"
#include "test_util.hpp"

// ---- the CUDA surface gn_min.cuh uses, on the host -------------------------------------
namespace emu {

struct Dim {
  unsigned x = 0, y = 0, z = 0;
};

std::atomic<bool> failed{false};
std::string failure;  // first failure (written once under fail_mu)
std::mutex fail_mu;

void fail(const std::string& why) {
  std::lock_guard l(fail_mu);
  if (!failed.exchange(true)) failure = why;
}

class Barrier {
 public:
  void reset(int n) {
    n_ = n;
    count_ = 0;
    broken_ = false;
  }
  void wait(const char* what) {
    std::unique_lock l(m_);
    if (broken_) return;
    const uint64_t gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
      return;
    }
    if (!cv_.wait_for(l, std::chrono::seconds(20), [&] { return gen_ != gen || broken_; })) {
      fail(std::string(what) + ": not every thread arrived (divergent barrier)");
      broken_ = true;
      cv_.notify_all();
    }
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int n_ = 0, count_ = 0;
  uint64_t gen_ = 0;
  bool broken_ = false;
};

struct Block {
  Barrier block_bar;
  Barrier warp_bar[32];
  float slots[32][32];
};

Block* block = nullptr;  // the CTA being run (CTAs run one after another)

}  // namespace emu

thread_local emu::Dim threadIdx, blockIdx, gridDim;

inline void __syncthreads() {
  emu::block->block_bar.wait("__syncthreads");
}

inline float __shfl_xor_sync(unsigned mask, float v, int lane_mask) {
  emu::Block& b = *emu::block;
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (mask != 0xffffffffu) emu::fail("__shfl_xor_sync with a partial mask");
  b.slots[warp][lane] = v;
  b.warp_bar[warp].wait("__shfl_xor_sync");
  const float r = b.slots[warp][lane ^ static_cast<unsigned>(lane_mask)];
  b.warp_bar[warp].wait("__shfl_xor_sync");
  return r;
}

inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}

template <class T>
inline T __ldg(const T* p) {
  return *p;
}

#define __global__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__
#define KJIT_GN_MIN_UNROLL

#include "../../kernel_templates/kjit/gn_min.cuh"

namespace kjit {
// The kernel's `extern __shared__ F4 gn_min_smem[]` (a block-scope extern declaration in
// namespace kjit refers to this object).
constexpr size_t kEmuSmemF4 = (256 * 1024) / 16;
gnmin::F4 gn_min_smem[kEmuSmemF4];
}  // namespace kjit

// ---- the cases -----------------------------------------------------------------------------
namespace {

using kjit::ops::GnMinConfig;
using kjit::ops::LinearGnMinProblem;

constexpr uint32_t kCanary = 0x7f7f7f7fu;

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// out[c * M + m] = min_m + bias[c] in float64, min_m of the GroupNorm'd, affine row m of y. Also
// each row's tolerance: the kernel's fp32 group mean is off by about (2 + sqrt(C/G)) ulp(max |y|),
// and the min moves with it by the normalization's gain, rstd * |gamma| of the channels near the
// min (large when a group's spread is tiny: e.g. 2 nearly equal channels).
struct Reference {
  std::vector<double> out;
  std::vector<double> row_tol;
};

Reference reference(int64_t M, int N, int G, const float* y, const std::vector<float>& ga,
                    const std::vector<float>& be, const std::vector<float>& bias, double eps) {
  const int cg = N / G;
  Reference r;
  r.out.resize(static_cast<size_t>(M) * N);
  r.row_tol.resize(static_cast<size_t>(M));
  std::vector<double> z(static_cast<size_t>(N)), g_of(static_cast<size_t>(N));
  for (int64_t m = 0; m < M; ++m) {
    const float* row = y + m * N;
    double mn = INFINITY, ymax = 0;
    bool nan = false;
    for (int g = 0; g < G; ++g) {
      double s = 0;
      for (int c = g * cg; c < (g + 1) * cg; ++c) s += row[c];
      const double mean = s / cg;
      double m2 = 0;
      for (int c = g * cg; c < (g + 1) * cg; ++c) m2 += (row[c] - mean) * (row[c] - mean);
      const double rstd = 1.0 / std::sqrt(m2 / cg + eps);
      for (int c = g * cg; c < (g + 1) * cg; ++c) {
        z[c] = (row[c] - mean) * rstd * ga[c] + be[c];
        g_of[c] = rstd * std::fabs(ga[c]);
        if (std::isnan(z[c])) nan = true;
        mn = std::min(mn, z[c]);
        ymax = std::max(ymax, std::fabs(static_cast<double>(row[c])));
      }
    }
    // The largest gain among the channels that could be the min after rounding.
    double gain = 0;
    for (int c = 0; c < N; ++c)
      if (z[c] <= mn + 1e-3) gain = std::max(gain, g_of[c]);
    if (nan) mn = NAN;
    r.row_tol[static_cast<size_t>(m)] = 4 * gain * ymax * 0x1p-24 * (2 + std::sqrt(cg));
    for (int c = 0; c < N; ++c) r.out[static_cast<size_t>(c) * M + m] = mn + bias[c];
  }
  return r;
}

template <int kN, int kG, int kThreads, int kSlice, int kSub, int kSeq, int kVec, bool kPad,
          bool kSmem, bool kAffine, bool kOutVec, bool kLinBias = false, bool kSplit = false,
          bool kScaled = false>
struct Case {
  static GnMinConfig config() {
    GnMinConfig c;
    c.threads = kThreads;
    c.slice = kSlice;
    c.sub = kSub;
    c.seq = kSeq;
    c.vec = kVec;
    c.pad = kPad;
    c.smem = kSmem;
    c.affine_smem = kAffine;
    c.out_vec = kOutVec;
    c.linear_bias = kLinBias;
    c.split = kSplit;
    return c;
  }

  static std::string name() {
    return "kjit::gn_min_fwd<" + std::to_string(kN) + ", " + std::to_string(kG) + ", " +
           std::to_string(kThreads) + ", " + std::to_string(kSlice) + ", " + std::to_string(kSub) +
           ", " + std::to_string(kSeq) + ", " + std::to_string(kVec) + ", " +
           (kPad ? "true" : "false") + ", " + (kSmem ? "true" : "false") + ", " +
           (kAffine ? "true" : "false") + ", " + (kOutVec ? "true" : "false") + ", " +
           (kLinBias ? "true" : "false") + ", " + (kSplit ? "true" : "false") + ", " +
           (kScaled ? "true" : "false") + ">";
  }

  // M rows; nan_row >= 0 puts a NaN into that row (torch.min propagates it); out_offset shifts
  // out by one float (only without kOutVec, which needs 16-byte alignment).
  static void run(int64_t M, int64_t nan_row, bool out_offset, uint64_t seed) {
    LinearGnMinProblem p;
    p.M = M;
    p.K = 1;
    p.N = kN;
    p.G = kG;
    if (kScaled) p.precision = kjit::ops::Precision::Fp32x3;
    const GnMinConfig c = config();
    CAPTURE(name());
    CAPTURE(M);
    CAPTURE(out_offset);
    kjit::ops::validate(p, c);  // the host accepts what the template is instantiated with
    CHECK(kjit::ops::gn_min_spec(p, c).instantiation() == name());
    const size_t smem = kjit::ops::gn_min_smem_bytes(p, c);
    REQUIRE(smem % 16 == 0);
    REQUIRE(smem + 64 <= sizeof(kjit::gn_min_smem));

    std::mt19937_64 gen(seed);
    std::normal_distribution<float> d(0.f, 1.f);
    // y: row-major [M, N], 16-byte aligned; an offset mean exercises the two-pass variance.
    std::vector<kjit::gnmin::F4> ystore((static_cast<size_t>(M) * kN + 3) / 4 + 1);
    float* y = reinterpret_cast<float*>(ystore.data());
    for (int64_t i = 0; i < M * kN; ++i) y[i] = 3.f + 2.f * d(gen);
    if (nan_row >= 0 && nan_row < M) y[nan_row * kN + kN / 2] = NAN;
    // kScaled: y as the split GEMM leaves it, y[m, c] * 2^-(row_exp[m] + col_exp[c]); the kernel
    // undoes the powers of two exactly, so the reference sees the values above.
    const std::vector<float> y_true(y, y + M * kN);
    std::vector<int> row_exp(static_cast<size_t>(M)), col_exp(kN);
    if (kScaled) {
      std::uniform_int_distribution<int> ex(-40, 40);
      for (int& e : row_exp) e = ex(gen);
      for (int& e : col_exp) e = ex(gen);
      for (int64_t i = 0; i < M * kN; ++i)
        y[i] = std::ldexp(
            y[i], -(row_exp[static_cast<size_t>(i / kN)] + col_exp[static_cast<size_t>(i % kN)]));
    }
    std::vector<float> ga(kN), be(kN), bias(kN), lb(kN, 0.f);
    for (int i = 0; i < kN; ++i) {
      ga[i] = 0.8f + 0.5f * d(gen);
      be[i] = 0.1f + 0.5f * d(gen);
      bias[i] = d(gen);
      if (kLinBias) lb[i] = 4.f * d(gen);
    }
    const float eps = 1e-5f;
    const size_t n_out = static_cast<size_t>(M) * kN;
    std::vector<kjit::gnmin::F4> ostore(n_out / 4 + 8);
    float* obase = reinterpret_cast<float*>(ostore.data());
    std::memset(obase, 0xFF, ostore.size() * 16);  // NaN: unwritten outputs fail
    float* out = obase + (out_offset ? 1 : 0);
    for (size_t i = n_out; i < n_out + 16; ++i) std::memcpy(out + i, &kCanary, 4);
    // kSplit: the row minima (NaN-poisoned, canaries after), then the broadcast kernel.
    std::vector<float> mins(static_cast<size_t>(M) + 16);
    std::fill(mins.begin(), mins.end(), NAN);
    for (size_t i = static_cast<size_t>(M); i < mins.size(); ++i)
      std::memcpy(&mins[i], &kCanary, 4);

    const int64_t rows = c.rows();
    const int64_t grid = (M + rows - 1) / rows;
    emu::Block blk;
    emu::block = &blk;
    emu::failed = false;
    for (int64_t b = 0; b < grid && !emu::failed; ++b) {
      blk.block_bar.reset(kThreads);
      for (auto& w : blk.warp_bar) w.reset(32);
      // Shared memory: NaN up to the host's size (reading unwritten smem shows), canary after.
      auto* sm = reinterpret_cast<unsigned char*>(kjit::gn_min_smem);
      std::memset(sm, 0xFF, smem);
      for (size_t i = smem; i < smem + 64; i += 4) std::memcpy(sm + i, &kCanary, 4);
      std::vector<std::thread> threads;
      threads.reserve(kThreads);
      for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
          threadIdx.x = static_cast<unsigned>(t);
          blockIdx.x = static_cast<unsigned>(b);
          kjit::gn_min_fwd<kN, kG, kThreads, kSlice, kSub, kSeq, kVec, kPad, kSmem, kAffine,
                           kOutVec, kLinBias, kSplit, kScaled>(
              y, kLinBias ? lb.data() : nullptr, ga.data(), be.data(), bias.data(), eps,
              kSplit ? mins.data() : out, static_cast<long long>(M),
              kScaled ? row_exp.data() : nullptr, kScaled ? col_exp.data() : nullptr);
        });
      for (auto& th : threads) th.join();
      for (size_t i = smem; i < smem + 64; i += 4) {
        uint32_t v;
        std::memcpy(&v, sm + i, 4);
        if (v != kCanary) emu::fail("shared memory written past gn_min_smem_bytes");
      }
    }
    emu::block = nullptr;
    CHECK_MESSAGE(!emu::failed, emu::failure);
    if constexpr (kSplit) {
      for (size_t i = static_cast<size_t>(M); i < mins.size(); ++i) CHECK(bits(mins[i]) == kCanary);
      broadcast(mins.data(), bias.data(), out, M);
    }
    for (size_t i = n_out; i < n_out + 16; ++i) CHECK(bits(out[i]) == kCanary);  // no overrun

    // The kernel adds lb in fp32, as cuBLASLt's bias epilogue does: the reference sees the same Y.
    std::vector<float> yb = y_true;
    for (int64_t i = 0; i < M * kN; ++i)
      yb[static_cast<size_t>(i)] += lb[static_cast<size_t>(i % kN)];
    const Reference ref = reference(M, kN, kG, yb.data(), ga, be, bias, eps);
    int64_t bad = 0, first_bad = -1;
    for (size_t i = 0; i < n_out; ++i) {
      const double r = ref.out[i];
      const float o = out[i];
      const double tol = 1e-5 + 1e-5 * std::fabs(r) + ref.row_tol[i % static_cast<size_t>(M)];
      const bool ok = std::isnan(r) ? std::isnan(o) : std::isfinite(o) && std::fabs(o - r) <= tol;
      if (!ok) {
        if (first_bad < 0) first_bad = static_cast<int64_t>(i);
        ++bad;
      }
    }
    if (first_bad >= 0) {
      const int64_t cbad = first_bad / M, mbad = first_bad % M;
      MESSAGE("first mismatch: out[c=" << cbad << ", m=" << mbad << "] = " << out[first_bad]
                                       << ", reference "
                                       << ref.out[static_cast<size_t>(first_bad)]);
    }
    CHECK(bad == 0);
  }

  // gn_min_broadcast over the grid the runtime launches, but with 3 channel strides (gridDim.y) so
  // that every thread walks several channels.
  static void broadcast(const float* mins, const float* bias, float* out, int64_t M) {
    constexpr int kBVec = kOutVec ? 4 : 1;
    constexpr int kT = kjit::ops::kGnMinBroadcastThreads;
    gridDim.x = static_cast<unsigned>((M + kT * kBVec - 1) / (kT * kBVec));
    gridDim.y = static_cast<unsigned>(std::min(kN, 3));
    for (unsigned bx = 0; bx < gridDim.x; ++bx)
      for (unsigned by = 0; by < gridDim.y; ++by)
        for (unsigned t = 0; t < static_cast<unsigned>(kT); ++t) {
          blockIdx.x = bx;
          blockIdx.y = by;
          threadIdx.x = t;
          kjit::gn_min_broadcast<kT, kBVec>(mins, bias, out, static_cast<long long>(M), kN);
        }
  }

  // A few batch sizes around the rows per CTA (tails), and a NaN row.
  static void run_all() {
    const int64_t rows = config().rows();
    const uint64_t seed = kjit_test::seed();
    const int64_t step = kOutVec ? 4 : 1;  // kOutVec is only chosen for M % 4 == 0
    for (int64_t M : {step, rows + step, 2 * rows + (kOutVec ? 4 : 3)}) {
      run(M, -1, false, seed + static_cast<uint64_t>(M));
      if (!kOutVec) run(M, -1, true, seed + 7 * static_cast<uint64_t>(M));
    }
    run(rows + step, rows / 2 + 1, false, seed + 99);
  }
};

}  // namespace

// Shapes: N, G, threads, slice, sub, seq, vec, pad, smem, affine_smem, out_vec.
TEST_CASE("emulated gn_min: a thread per group, several rows at once (seed-like regime)") {
  Case<256, 16, 128, 16, 1, 2, 4, true, true, true, true>::run_all();
}
TEST_CASE("emulated gn_min: sub-teams of 8, odd rows per CTA, scalar stores") {
  Case<96, 4, 64, 32, 8, 3, 4, true, true, false, false>::run_all();
}
TEST_CASE("emulated gn_min: the whole CTA per group (block reductions), multi-warp slice") {
  Case<512, 2, 64, 64, 64, 4, 4, false, true, false, true>::run_all();
}
TEST_CASE("emulated gn_min: whole-CTA groups too long to hold in registers") {
  Case<4000, 2, 64, 64, 64, 1, 4, false, true, false, false>::run_all();
}
TEST_CASE("emulated gn_min: rows read from global memory, idle sub-teams") {
  Case<300, 3, 128, 128, 32, 2, 1, false, false, false, false>::run_all();
}
TEST_CASE("emulated gn_min: the Linear's bias added by the kernel, staged and global rows") {
  Case<96, 4, 64, 32, 8, 3, 4, true, true, false, false, true>::run_all();
  Case<256, 16, 128, 16, 1, 2, 4, false, true, true, true, true>::run_all();
  Case<300, 3, 128, 128, 32, 2, 1, false, false, false, false, true>::run_all();
  Case<6, 3, 32, 2, 1, 2, 4, true, true, true, true, true>::run_all();
}
TEST_CASE("emulated gn_min: fp32x3's scaled Y, the powers of two undone as rows are read") {
  Case<96, 4, 64, 32, 8, 3, 4, true, true, false, false, true, false, true>::run_all();
  Case<300, 3, 128, 128, 32, 2, 1, false, false, false, false, true, false, true>::run_all();
  Case<256, 16, 128, 16, 1, 2, 4, true, true, true, true, true, true, true>::run_all();
  Case<45, 9, 32, 4, 1, 1, 1, true, true, true, true, true, true, true>::run_all();
}
TEST_CASE("emulated gn_min: split into row minima and the broadcast kernel") {
  Case<256, 16, 128, 16, 1, 2, 4, true, true, true, true, false, true>::run_all();
  Case<96, 4, 64, 32, 8, 3, 4, true, true, false, false, true, true>::run_all();
  Case<300, 3, 128, 128, 32, 2, 1, false, false, false, false, false, true>::run_all();
  Case<45, 9, 32, 4, 1, 1, 1, true, true, true, true, false, true>::run_all();
}
TEST_CASE("emulated gn_min: scalar loads, 5-channel groups over 3 iterations") {
  Case<45, 9, 32, 4, 1, 1, 1, true, true, true, false>::run_all();
}
TEST_CASE("emulated gn_min: N = 6 with 16-byte loads across rows") {
  Case<6, 3, 32, 2, 1, 2, 4, true, true, true, true>::run_all();
}
TEST_CASE("emulated gn_min: one channel per group (zero variance: beta)") {
  Case<64, 64, 32, 8, 1, 1, 4, true, true, false, true>::run_all();
}
TEST_CASE("emulated gn_min: two rows at once in 128-thread slices") {
  Case<2048, 32, 256, 128, 4, 1, 4, true, true, true, false>::run_all();
}
TEST_CASE("emulated gn_min: a warp per group, not held (1024 channels)") {
  Case<1024, 1, 32, 32, 32, 4, 4, false, true, false, true>::run_all();
}
TEST_CASE("emulated gn_min: global memory with the whole CTA per group") {
  Case<640, 2, 128, 128, 128, 1, 1, false, false, false, false>::run_all();
}
TEST_CASE("emulated gn_min: sub-teams of 2 over two iterations") {
  Case<192, 12, 64, 16, 2, 2, 4, true, true, true, true>::run_all();
}
TEST_CASE("emulated gn_min: gamma/beta staged without padding (warp sub-teams)") {
  Case<128, 4, 64, 64, 32, 4, 4, false, true, true, true>::run_all();
}
TEST_CASE("emulated gn_min: the seed problem's heuristic shape on a short batch") {
  using C = Case<8192, 512, 512, 512, 1, 2, 4, true, true, true, true, false, true>;
  LinearGnMinProblem p;
  p.M = 1024;
  p.K = 8192;
  p.N = 8192;
  p.G = 512;
  CHECK(kjit::ops::gn_min_heuristic(p, 90).describe() == C::config().describe());
  C::run(8, -1, false, kjit_test::seed());
}
