// Linear -> GroupNorm -> min -> + bias against float64 references (GEMM in double) on the seed
// problem and >= 100 random problems, in strict FP32, TF32 and BF16-input modes.
//
// Every random call passes its own workspace, so the test can read the GEMM's output Y back and
// check three things per checked row:
//   gemm:    Y against the float64 GEMM (+ linear bias);
//   kernel:  out against float64 GroupNorm -> min -> + bias of the device's own Y (the fused
//            kernel's accuracy, independent of the GEMM);
//   end to end: out against the float64 reference of the whole module, allclose(atol = rtol =
//            1e-4). The min of a row moves with the GEMM's rounding by the normalization's gain
//            (rstd * |gamma| of the channel that is the min), which is large when that channel's
//            group has a tiny spread (e.g. two nearly equal channels). Rows where that gain times
//            the measured GEMM error exceeds half the tolerance are reported as ill-conditioned and
//            checked against the tolerance plus that bound instead.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <future>
#include <limits>
#include <optional>
#include <random>
#include <thread>

#include "f16_split_host.hpp"
#include "gpu_env.hpp"
#include "kjit/c_api.h"
#include "kjit/ops/linear_gn_min.hpp"
#include "test_util.hpp"

using kjit::ops::LinearGnMinOptions;
using kjit::ops::LinearGnMinProblem;
using kjit::ops::Precision;
using kjit_test::runtime;

namespace {

// ---- data -------------------------------------------------------------------------------------

struct Rng {  // splitmix64: fast enough for the seed problem's 64M weights
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uni(float lo, float hi) {
    return lo + (hi - lo) * static_cast<float>(next() >> 40) * 0x1p-24f;
  }
};

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float from_bf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Host copies of the module's inputs, as float values (bf16-representable when bf16 is set).
struct Data {
  int64_t M = 0, K = 0, N = 0, G = 0;
  bool bf16 = false;
  std::vector<float> x, w;  // [M, K], [N, K]
  std::vector<float> lb, gamma, beta, bias;
  float eps = 1e-5f;
};

// x ~ U(-1, 1), weight and linear bias as nn.Linear initializes them (U(+-1/sqrt(K))) plus a
// per-channel offset, and random affine values (neither 1 nor 0).
Data make_data(int64_t M, int64_t K, int64_t N, int64_t G, bool bf16, uint64_t seed) {
  Data d;
  d.M = M;
  d.K = K;
  d.N = N;
  d.G = G;
  d.bf16 = bf16;
  Rng r{seed};
  const float a = 1.f / std::sqrt(static_cast<float>(K));
  d.x.resize(static_cast<size_t>(M * K));
  d.w.resize(static_cast<size_t>(N * K));
  for (auto& v : d.x) v = r.uni(-1.f, 1.f);
  for (auto& v : d.w) v = r.uni(-a, a);
  if (bf16) {
    for (auto& v : d.x) v = from_bf16(to_bf16(v));
    for (auto& v : d.w) v = from_bf16(to_bf16(v));
  }
  d.lb.resize(static_cast<size_t>(N));
  d.gamma.resize(static_cast<size_t>(N));
  d.beta.resize(static_cast<size_t>(N));
  d.bias.resize(static_cast<size_t>(N));
  for (int64_t c = 0; c < N; ++c) {
    d.lb[c] = r.uni(-a, a) + r.uni(-0.5f, 0.5f);
    d.gamma[c] = r.uni(0.25f, 1.5f) * (r.next() & 1 ? 1.f : -1.f);
    d.beta[c] = r.uni(-1.f, 1.f);
    d.bias[c] = r.uni(-2.f, 2.f);
  }
  return d;
}

// ---- float64 reference --------------------------------------------------------------------------

// GroupNorm -> affine -> min over one row of Y (any element type). *gain: the largest
// normalization gain rstd * |gamma| among the channels within `margin` of the min (those that
// can become the min when Y moves a little); *ymax: max |Y|.
template <class T>
double gn_min_row(const T* y, const Data& d, double margin, double* gain, double* ymax = nullptr) {
  const int64_t cg = d.N / d.G;
  std::vector<double> z(static_cast<size_t>(d.N)), g_of(static_cast<size_t>(d.N));
  double mn = INFINITY, mx = 0;
  for (int64_t g = 0; g < d.G; ++g) {
    double s = 0;
    for (int64_t c = g * cg; c < (g + 1) * cg; ++c) s += static_cast<double>(y[c]);
    const double mean = s / static_cast<double>(cg);
    double m2 = 0;
    for (int64_t c = g * cg; c < (g + 1) * cg; ++c)
      m2 += (static_cast<double>(y[c]) - mean) * (static_cast<double>(y[c]) - mean);
    const double rstd = 1.0 / std::sqrt(m2 / static_cast<double>(cg) + d.eps);
    for (int64_t c = g * cg; c < (g + 1) * cg; ++c) {
      z[c] = (static_cast<double>(y[c]) - mean) * rstd * d.gamma[c] + d.beta[c];
      g_of[c] = rstd * std::fabs(static_cast<double>(d.gamma[c]));
      mn = std::min(mn, z[c]);
      mx = std::max(mx, std::fabs(static_cast<double>(y[c])));
    }
  }
  *gain = 0;
  for (int64_t c = 0; c < d.N; ++c)
    if (z[c] <= mn + margin) *gain = std::max(*gain, g_of[c]);
  if (ymax) *ymax = mx;
  return mn;
}

struct Ref {
  std::vector<int64_t> rows;           // the checked rows
  std::vector<std::vector<double>> y;  // their Y = x W^T + lb in float64
  std::vector<double> min, gain;       // their min over channels, and its gain
};

double dot(const float* a, const float* b, int64_t K) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t k = 0;
  for (; k + 4 <= K; k += 4) {
    s0 += static_cast<double>(a[k]) * b[k];
    s1 += static_cast<double>(a[k + 1]) * b[k + 1];
    s2 += static_cast<double>(a[k + 2]) * b[k + 2];
    s3 += static_cast<double>(a[k + 3]) * b[k + 3];
  }
  for (; k < K; ++k) s0 += static_cast<double>(a[k]) * b[k];
  return (s0 + s1) + (s2 + s3);
}

// All rows when the GEMM is cheap, else rows 0 and M-1 and random others (up to max_rows), so
// that the reference stays about `budget` multiply-adds.
std::vector<int64_t> pick_rows(const Data& d, double budget, int64_t max_rows, uint64_t seed) {
  const double per_row = static_cast<double>(d.N) * static_cast<double>(d.K);
  const int64_t want = std::clamp<int64_t>(static_cast<int64_t>(budget / per_row), 2, max_rows);
  std::vector<int64_t> rows;
  if (d.M <= want) {
    for (int64_t m = 0; m < d.M; ++m) rows.push_back(m);
    return rows;
  }
  std::mt19937_64 g(seed);
  rows = {0, d.M - 1};
  while (static_cast<int64_t>(rows.size()) < want) {
    const int64_t m = std::uniform_int_distribution<int64_t>(1, d.M - 2)(g);
    if (std::find(rows.begin(), rows.end(), m) == rows.end()) rows.push_back(m);
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

Ref reference(const Data& d, std::vector<int64_t> rows) {
  Ref r;
  r.rows = std::move(rows);
  const size_t n = r.rows.size();
  r.y.assign(n, std::vector<double>(static_cast<size_t>(d.N)));
  r.min.resize(n);
  r.gain.resize(n);
  const unsigned workers = std::max(1u, std::min(32u, std::thread::hardware_concurrency()));
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < workers; ++t)
    pool.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < n;) {
        const float* xr = d.x.data() + r.rows[i] * d.K;
        for (int64_t c = 0; c < d.N; ++c)
          r.y[i][static_cast<size_t>(c)] = dot(xr, d.w.data() + c * d.K, d.K) + d.lb[c];
        r.min[i] = gn_min_row(r.y[i].data(), d, 1e-2, &r.gain[i]);
      }
    });
  for (auto& t : pool) t.join();
  return r;
}

// ---- running the op -----------------------------------------------------------------------------

struct Offsets {  // bytes past a 256-byte boundary (element-aligned, or 16 for "vector only")
  size_t x = 0, w = 0, lb = 0, out = 0;
};

struct Run {
  std::vector<float> out;             // [N * M], i.e. the [1, N, M, 1] tensor
  std::vector<std::vector<float>> y;  // the device's Y for the reference's rows (caller ws)
  bool guard_ok = true;               // the poison around out is untouched
};

struct Device {
  kjit::DeviceBuffer x, w, lb, gamma, beta, bias, out;
  Offsets off;
  size_t out_bytes = 0;

  Device(const Data& d, Offsets o) : Device(d, o, d.bf16) {}
  Device(const Data& d, Offsets o, bool bf16) : off(o) {
    auto& rt = runtime();
    const size_t esz = bf16 ? 2 : 4;
    auto bytes_of = [&](const std::vector<float>& v) {
      std::vector<unsigned char> b(v.size() * esz);
      for (size_t i = 0; i < v.size(); ++i) {
        if (bf16) {
          const uint16_t h = to_bf16(v[i]);
          std::memcpy(&b[i * 2], &h, 2);
        } else {
          std::memcpy(&b[i * 4], &v[i], 4);
        }
      }
      return b;
    };
    auto up = [&](kjit::DeviceBuffer& buf, const void* src, size_t n, size_t offset) {
      buf = kjit::DeviceBuffer(rt, n + 256);
      buf.upload(src, n, offset);
    };
    const auto xb = bytes_of(d.x), wb = bytes_of(d.w);
    up(x, xb.data(), xb.size(), o.x);
    up(w, wb.data(), wb.size(), o.w);
    const size_t n4 = static_cast<size_t>(d.N) * 4;
    up(lb, d.lb.data(), n4, o.lb);
    up(gamma, d.gamma.data(), n4, 0);
    up(beta, d.beta.data(), n4, 0);
    up(bias, d.bias.data(), n4, 0);
    out_bytes = static_cast<size_t>(d.M * d.N) * 4;
    out = kjit::DeviceBuffer(rt, out_bytes + 512);
    kjit::synchronize(rt);  // uploads run on the legacy stream; the op on non-blocking ones
  }
  const void* xp() const { return reinterpret_cast<const void*>(x.ptr() + off.x); }
  const void* wp() const { return reinterpret_cast<const void*>(w.ptr() + off.w); }
  const float* lbp() const { return reinterpret_cast<const float*>(lb.ptr() + off.lb); }
  const float* gp() const { return gamma.as<const float>(); }
  const float* bp() const { return beta.as<const float>(); }
  const float* biasp() const { return bias.as<const float>(); }
  float* outp() const { return reinterpret_cast<float*>(out.ptr() + off.out); }
};

LinearGnMinProblem problem_of(const Data& d, Precision pr) {
  LinearGnMinProblem p;
  p.M = d.M;
  p.K = d.K;
  p.N = d.N;
  p.G = d.G;
  p.precision = pr;
  return p;
}

// One call with out poisoned (0xFF: NaN) and, when `with_ws`, a caller workspace whose Y rows
// of `rows` are read back.
// `pack`: Fp32x3 with that prepacked weight instead of dev's.
Run run_op(const Data& d, Precision pr, Device& dev, const std::vector<int64_t>& rows, bool with_ws,
           kjit::Stream& stream, bool autotune = false,
           kjit::ops::LinearBiasAdd bias_add = kjit::ops::LinearBiasAdd::Auto,
           const kjit::ops::LinearGnMinWeights* pack = nullptr,
           std::optional<kjit::ops::GemmAlgo> gemm = std::nullopt) {
  auto& rt = runtime();
  const LinearGnMinProblem p = problem_of(d, pr);
  dev.out.fill_bytes(0xFF);
  kjit::synchronize(rt);  // the memset runs on the legacy stream
  kjit::DeviceBuffer ws;
  kjit::ops::Workspace w;
  if (with_ws) {
    ws = kjit::DeviceBuffer(rt, kjit::ops::linear_gn_min_workspace_size(p));
    w.ptr = reinterpret_cast<void*>(ws.ptr());
    w.bytes = ws.bytes();
  }
  LinearGnMinOptions opt;
  opt.eps = d.eps;
  opt.autotune = autotune;
  opt.bias_add = bias_add;
  opt.gemm = gemm;
  if (pack)
    kjit::ops::linear_gn_min(rt, p, dev.xp(), *pack, dev.lbp(), dev.gp(), dev.bp(), dev.biasp(),
                             dev.outp(), opt, stream, w);
  else
    kjit::ops::linear_gn_min(rt, p, dev.xp(), dev.wp(), dev.lbp(), dev.gp(), dev.bp(), dev.biasp(),
                             dev.outp(), opt, stream, w);
  stream.synchronize();
  Run r;
  std::vector<unsigned char> all(dev.out.bytes());
  dev.out.download(all.data(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    const bool inside = i >= dev.off.out && i < dev.off.out + dev.out_bytes;
    if (!inside && all[i] != 0xFF) r.guard_ok = false;
  }
  r.out.resize(static_cast<size_t>(d.M * d.N));
  std::memcpy(r.out.data(), all.data() + dev.off.out, dev.out_bytes);
  if (!with_ws) return r;
  // Y in the workspace has the Linear's bias only when the epilogue added it; the check of the
  // GEMM compares x W^T + lb, so add it here otherwise (what the kernel does as it reads Y).
  // prepare() reports Auto's choice for 256-byte aligned pointers: callers with other pointers
  // name the mode.
  const bool epilogue = bias_add == kjit::ops::LinearBiasAdd::Auto
                            ? kjit::ops::prepare_linear_gn_min(rt, p, opt).gemm_bias_epilogue
                            : bias_add == kjit::ops::LinearBiasAdd::Epilogue;
  // Fp32x3's Y is the product of the scaled rows: undo 2^-(exps_x[m] + exps_w[c]) as the kernel
  // does. The exponents follow the split rows (linear_gn_min_split_bytes): x's in the workspace
  // after Y and the minima, W's in the pack or after cuBLASLt's part.
  std::vector<int32_t> xe, we;
  if (pr == Precision::Fp32x3) {
    auto r256 = [](size_t v) { return (v + 255) / 256 * 256; };
    const size_t pitch = static_cast<size_t>(kjit::ops::linear_gn_min_split_pitch(d.K));
    const size_t xs = r256(static_cast<size_t>(d.M * d.N) * 4) + r256(static_cast<size_t>(d.M) * 4);
    xe.resize(static_cast<size_t>(d.M));
    we.resize(static_cast<size_t>(d.N));
    ws.download(xe.data(), xe.size() * 4, xs + static_cast<size_t>(d.M) * 2 * pitch * 2);
    const size_t w_rows = static_cast<size_t>(d.N) * 2 * pitch * 2;
    if (pack)
      pack->buffer().download(we.data(), we.size() * 4, w_rows);
    else
      ws.download(we.data(), we.size() * 4,
                  xs + kjit::ops::linear_gn_min_split_bytes(d.M, d.K) +
                      kjit::ops::kLinearGnMinGemmWorkspace + w_rows);
  }
  for (int64_t m : rows) {
    std::vector<float> row(static_cast<size_t>(d.N));
    ws.download(row.data(), row.size() * 4, static_cast<size_t>(m * d.N) * 4);
    if (!xe.empty())
      for (size_t c = 0; c < row.size(); ++c)
        row[c] = std::ldexp(row[c], xe[static_cast<size_t>(m)] + we[c]);
    if (!epilogue)
      for (size_t c = 0; c < row.size(); ++c) row[c] += d.lb[c];
    r.y.push_back(std::move(row));
  }
  return r;
}

// A NaN on one side only (out is poisoned with NaN: an unwritten value) is an infinite difference;
// std::max alone would drop it.
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) {
      if (std::isnan(a[i]) != std::isnan(b[i])) return INFINITY;
      continue;
    }
    diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
  }
  return diff;
}

// `call` captured into a CUDA graph on `stream` and the graph replayed twice, out poisoned
// first: how far out is from `direct`'s.
double graph_diff(kjit::Stream& stream, Device& dev, const Run& direct,
                  const std::function<void()>& call) {
  auto& rt = runtime();
  dev.out.fill_bytes(0xFF);
  kjit::synchronize(rt);
  {
    kjit::Graph g(rt, stream, call);
    g.launch(stream);
    g.launch(stream);
    stream.synchronize();
  }
  std::vector<float> out(direct.out.size());
  dev.out.download(out.data(), out.size() * 4);
  return max_abs_diff(out, direct.out);
}

// ---- checking -----------------------------------------------------------------------------------

struct Verdict {
  double max_abs = 0, rel_l2 = 0;  // end to end, over the checked rows
  bool allclose = true;            // |out - ref| <= 1e-4 + 1e-4 |ref| everywhere checked
  bool within_conditioned = true;  // ... or within that plus the conditioning bound
  int64_t ill_rows = 0;            // rows whose min is ill-conditioned (see the top)
  double gemm_max_abs = 0;         // |Y - Y_ref|
  bool gemm_ok = true;             // |Y - Y_ref| <= 1e-4 (1 + |Y_ref|)
  bool gemm_tf32_ok = true;        // |Y - Y_ref| <= 1e-2 (1 + |Y_ref|)
  double kernel_max_abs = 0;       // out against float64 of the device's Y
  bool kernel_ok = true;
  bool finite = true;        // every element of out written, finite
  bool broadcast_ok = true;  // out[c, m] - bias[c] is the same for every c, every m
  std::string describe() const {
    return "end-to-end max abs " + std::to_string(max_abs) + ", rel L2 " + std::to_string(rel_l2) +
           (allclose ? ", allclose(1e-4)" : ", NOT allclose(1e-4)") + ", ill-conditioned rows " +
           std::to_string(ill_rows) + "; GEMM max abs " + std::to_string(gemm_max_abs) +
           "; kernel max abs " + std::to_string(kernel_max_abs);
  }
};

Verdict judge(const Data& d, const Ref& ref, const Run& run) {
  Verdict v;
  const int64_t M = d.M, N = d.N;
  // Every element: written, finite, and the broadcast of one value per row.
  for (int64_t m = 0; m < M; ++m) {
    const double base = static_cast<double>(run.out[m]) - d.bias[0];
    for (int64_t c = 0; c < N; ++c) {
      const float o = run.out[static_cast<size_t>(c * M + m)];
      if (!std::isfinite(o)) {
        v.finite = false;
        continue;
      }
      const double here = static_cast<double>(o) - d.bias[c];
      if (std::fabs(here - base) > 1e-6 * (1 + std::fabs(o) + std::fabs(d.bias[c])))
        v.broadcast_ok = false;
    }
  }
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.rows.size(); ++i) {
    const int64_t m = ref.rows[i];
    double dy = 0;
    if (!run.y.empty()) {
      const std::vector<float>& yd = run.y[i];
      for (int64_t c = 0; c < N; ++c) {
        const double e = std::fabs(yd[c] - ref.y[i][c]);
        dy = std::max(dy, e);
        if (!(e <= 1e-4 * (1 + std::fabs(ref.y[i][c])))) v.gemm_ok = false;
        if (!(e <= 1e-2 * (1 + std::fabs(ref.y[i][c])))) v.gemm_tf32_ok = false;
      }
      v.gemm_max_abs = std::max(v.gemm_max_abs, dy);
      double kgain = 0, ymax = 0;
      const double kmin = gn_min_row(yd.data(), d, 1e-3, &kgain, &ymax);
      // The kernel's fp32 group mean is off by about (2 + sqrt(C/G)) ulp(max |Y|).
      const double ktol_extra =
          4 * kgain * ymax * 0x1p-24 * (2 + std::sqrt(static_cast<double>(d.N / d.G)));
      for (int64_t c = 0; c < N; ++c) {
        const double r = kmin + d.bias[c], o = run.out[static_cast<size_t>(c * M + m)];
        const double e = std::fabs(o - r);
        v.kernel_max_abs = std::max(v.kernel_max_abs, e);
        if (!(e <= 1e-4 + 1e-4 * std::fabs(r) + ktol_extra)) v.kernel_ok = false;
      }
    }
    // |d min| <= gain * dY * 2 (1 + max |normalized value|), and |normalized| <= sqrt(C/G).
    const double cond = 2 * ref.gain[i] * dy * (1 + std::sqrt(static_cast<double>(d.N / d.G)));
    const bool ill = cond > 5e-5;
    if (ill) ++v.ill_rows;
    for (int64_t c = 0; c < N; ++c) {
      const double r = ref.min[i] + d.bias[c], o = run.out[static_cast<size_t>(c * M + m)];
      const double e = std::fabs(o - r);
      num += e * e;
      den += r * r;
      v.max_abs = std::max(v.max_abs, e);
      const double tol = 1e-4 + 1e-4 * std::fabs(r);
      if (!(e <= tol)) v.allclose = false;
      if (!(e <= tol + (ill ? cond : 0.0))) v.within_conditioned = false;
    }
  }
  v.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return v;
}

// Strict FP32 (and BF16 inputs, whose products are exact in fp32): every check.
void check_strict(const Verdict& v, const std::string& what) {
  CAPTURE(what);
  CAPTURE(v.describe());
  CHECK(v.finite);
  CHECK(v.broadcast_ok);
  CHECK(v.gemm_ok);
  CHECK(v.kernel_ok);
  CHECK(v.within_conditioned);
}

// TF32: the fused kernel is checked strictly on the device's Y, the GEMM loosely (10-bit
// mantissa products); the end-to-end error is reported, not judged.
void check_tf32(const Verdict& v, const std::string& what) {
  CAPTURE(what);
  CAPTURE(v.describe());
  CHECK(v.finite);
  CHECK(v.broadcast_ok);
  CHECK(v.kernel_ok);
  CHECK(v.gemm_tf32_ok);
}

struct Case {
  Data d;
  Offsets off;
  Precision pr = Precision::Fp32;
  kjit::ops::LinearBiasAdd bias_add = kjit::ops::LinearBiasAdd::Auto;
};

Case random_case(uint64_t seed, Precision pr) {
  using kjit_test::uniform;
  const int mkind = static_cast<int>(uniform(0, 9));
  const int64_t M = mkind < 6   ? uniform(1, 64)
                    : mkind < 9 ? uniform(65, 1024)
                                : uniform(1025, 4096);
  const int kkind = static_cast<int>(uniform(0, 3));
  int64_t K = kkind == 0   ? uniform(1, 16)
              : kkind == 1 ? uniform(17, 256)
              : kkind == 2 ? uniform(257, 2048)
                           : uniform(2049, 8192);
  const int64_t cg = uniform(0, 4) == 0 ? 1 : uniform(1, 64);
  int64_t G = uniform(0, 2) == 0 ? uniform(1, 4) : uniform(1, 256);
  while (G > 1 && G * cg > 8192) G /= 2;
  const int64_t N = G * cg;
  // Keep the host data (and its generation) small: x <= 8M, weight <= 16M values.
  while (K > 1 && (M * K > (int64_t{8} << 20) || N * K > (int64_t{16} << 20))) K = K / 2 + 1;
  Case c;
  c.pr = pr;
  c.d = make_data(M, K, N, G, pr == Precision::Bf16Inputs, seed);
  c.d.eps = uniform(0, 3) == 0 ? 1e-3f : 1e-5f;
  c.bias_add = static_cast<kjit::ops::LinearBiasAdd>(uniform(0, 2));
  if (uniform(0, 4) == 0) {  // pointers off the 256-byte boundary
    const size_t esz = pr == Precision::Bf16Inputs ? 2 : 4;
    const size_t choices[] = {esz, 16, 0};
    c.off.x = choices[uniform(0, 2)];
    c.off.w = choices[uniform(0, 2)];
    c.off.lb = uniform(0, 1) ? 4 : 0;
    c.off.out = uniform(0, 1) ? 4 : 0;
    // run_op learns Auto's choice from prepare, i.e. for aligned pointers: name the mode here.
    c.bias_add =
        uniform(0, 1) ? kjit::ops::LinearBiasAdd::Epilogue : kjit::ops::LinearBiasAdd::Kernel;
  }
  return c;
}

std::string describe(const Case& c) {
  return problem_of(c.d, c.pr).describe() + " eps=" + std::to_string(c.d.eps) +
         " offsets x/w/lb/out=" + std::to_string(c.off.x) + "/" + std::to_string(c.off.w) + "/" +
         std::to_string(c.off.lb) + "/" + std::to_string(c.off.out) +
         " bias_add=" + std::to_string(static_cast<int>(c.bias_add));
}

void run_random(Precision pr, int count, double budget) {
  std::vector<Case> cases;
  for (int i = 0; i < count; ++i)
    cases.push_back(random_case(
        kjit_test::seed() * 1000003 + static_cast<uint64_t>(i) * 7919 + static_cast<uint64_t>(pr),
        pr));
  // Build the plans (NVRTC compiles dominate) in parallel first.
  const unsigned workers = std::max(2u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::future<void>> jobs;
  for (unsigned w = 0; w < workers; ++w)
    jobs.push_back(std::async(std::launch::async, [&, w] {
      for (size_t i = w; i < cases.size(); i += workers) {
        LinearGnMinOptions o;
        o.bias_add = cases[i].bias_add;
        kjit::ops::prepare_linear_gn_min(runtime(), problem_of(cases[i].d, cases[i].pr), o);
      }
    }));
  for (auto& j : jobs) j.get();
  kjit::Stream stream(runtime());
  int failures = 0;
  int64_t ill = 0, not_allclose = 0;
  double worst = 0, worst_rel = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& cs = cases[i];
    const Ref ref = reference(cs.d, pick_rows(cs.d, budget, 64, kjit_test::seed() + i));
    Device dev(cs.d, cs.off);
    const Run r = run_op(cs.d, cs.pr, dev, ref.rows, true, stream, false, cs.bias_add);
    CHECK_MESSAGE(r.guard_ok, describe(cs));
    const Verdict v = judge(cs.d, ref, r);
    if (pr == Precision::Tf32) {
      check_tf32(v, describe(cs));
    } else {
      check_strict(v, describe(cs));
    }
    ill += v.ill_rows;
    if (!v.allclose) ++not_allclose;
    worst = std::max(worst, v.max_abs);
    worst_rel = std::max(worst_rel, v.rel_l2);
    if (!v.finite || !v.kernel_ok || (pr != Precision::Tf32 && !v.within_conditioned)) ++failures;
  }
  MESSAGE(count << " random " << kjit::ops::precision_name(pr) << " problems: " << failures
                << " failed; worst end-to-end max abs error " << worst << ", worst rel L2 "
                << worst_rel << "; " << not_allclose << " not allclose(1e-4), " << ill
                << " ill-conditioned rows");
}

// 20 calls of d's problem on `stream` without a caller workspace, every fifth checked against
// `want` after `sync`: the largest difference seen.
double repeated_calls_diff(const Data& d, const Device& dev, const Run& want, CUstream stream,
                           const std::function<void()>& sync) {
  const LinearGnMinProblem p = problem_of(d, Precision::Fp32);
  LinearGnMinOptions opt;
  opt.eps = d.eps;
  double diff = 0;
  for (int i = 0; i < 20; ++i) {
    kjit::ops::linear_gn_min(runtime(), p, dev.xp(), dev.wp(), dev.lbp(), dev.gp(), dev.bp(),
                             dev.biasp(), dev.outp(), opt, stream);
    if (i % 5 == 4) {
      sync();
      std::vector<float> out(want.out.size());
      dev.out.download(out.data(), out.size() * 4);
      for (size_t k = 0; k < out.size(); ++k) {
        const double e = std::fabs(static_cast<double>(out[k]) - want.out[k]);
        diff = std::isnan(e) ? INFINITY : std::max(diff, e);  // std::max would drop a NaN
      }
    }
  }
  return diff;
}

}  // namespace

TEST_CASE("linear_gn_min: the seed problem (M=1024, K=8192, N=8192, G=512) in fp32, tf32, bf16") {
  const Data d = make_data(1024, 8192, 8192, 512, false, kjit_test::seed());
  const Ref ref = reference(d, pick_rows(d, 1e18, 64, kjit_test::seed()));  // 64 rows
  REQUIRE(ref.rows.size() == 64);
  const LinearGnMinProblem p = problem_of(d, Precision::Fp32);
  CHECK(p.output_shape() == std::vector<int64_t>{1, 8192, 1024, 1});
  kjit::Stream stream(runtime());
  Device dev(d, {});
  {
    const auto info = kjit::ops::prepare_linear_gn_min(runtime(), p);
    MESSAGE("seed plan: kernel " << info.kernel << " (" << info.config.describe() << "), GEMM "
                                 << info.gemm_source << " " << info.gemm_algo << ", workspace "
                                 << info.workspace_bytes << " B");
    const Run r = run_op(d, Precision::Fp32, dev, ref.rows, true, stream);
    CHECK(r.guard_ok);
    const Verdict v = judge(d, ref, r);
    MESSAGE("seed fp32: " << v.describe());
    check_strict(v, "seed fp32");
    CHECK(v.allclose);
    // kjit's own workspace gives the same result.
    const Run r2 = run_op(d, Precision::Fp32, dev, {}, false, stream);
    CHECK(max_abs_diff(r.out, r2.out) <= 1e-6);
  }
  {
    const Run r = run_op(d, Precision::Tf32, dev, ref.rows, true, stream);
    const Verdict v = judge(d, ref, r);
    MESSAGE("seed tf32 (opt-in): " << v.describe());
    check_tf32(v, "seed tf32");
  }
  {
    // bf16 inputs: the error of rounding x and weight to bf16, against the fp32 module.
    Device devb(d, {}, true);  // x and weight rounded to bf16 on upload
    const Run r = run_op(d, Precision::Bf16Inputs, devb, ref.rows, true, stream);
    Verdict v = judge(d, ref, r);
    MESSAGE("seed bf16-inputs (opt-in) against the fp32 module: " << v.describe());
    CHECK(v.finite);
    CHECK(v.broadcast_ok);
    CHECK(v.kernel_ok);
    CHECK(v.max_abs < 0.2);
  }
}

TEST_CASE("linear_gn_min: output is [1, N, M, 1] with out[c * M + m] = min_m + bias[c]") {
  // 3 rows, 8 channels in 2 groups: small enough to read.
  const Data d = make_data(3, 5, 8, 2, false, kjit_test::seed() + 5);
  const LinearGnMinProblem p = problem_of(d, Precision::Fp32);
  CHECK(p.output_shape() == std::vector<int64_t>{1, 8, 3, 1});
  const Ref ref = reference(d, {0, 1, 2});
  kjit::Stream stream(runtime());
  Device dev(d, {});
  const Run r = run_op(d, Precision::Fp32, dev, ref.rows, true, stream);
  for (int64_t c = 0; c < 8; ++c)
    for (int64_t m = 0; m < 3; ++m) {
      CAPTURE(c);
      CAPTURE(m);
      CHECK(r.out[static_cast<size_t>(c * 3 + m)] ==
            doctest::Approx(ref.min[static_cast<size_t>(m)] + d.bias[c]).epsilon(1e-4));
    }
  check_strict(judge(d, ref, r), "3x5x8 G=2");
}

TEST_CASE("linear_gn_min: edge problems") {
  kjit::Stream stream(runtime());
  struct E {
    int64_t M, K, N, G;
  };
  // Tiny, K = 1, one channel per group, N not a multiple of 4, whole-CTA groups, N = 2 (ill-
  // conditioned: two channels), rows too long for shared memory (read from global memory).
  const E edges[] = {{1, 1, 1, 1},       {1, 8192, 8, 8},   {4096, 1, 64, 64}, {7, 3, 6, 3},
                     {5, 17, 45, 9},     {64, 64, 4000, 2}, {2, 9, 8192, 1},   {1000, 33, 2, 1},
                     {3, 100, 12291, 3}, {33, 65, 96, 4},   {4, 16, 40000, 8}, {5, 8, 65536, 4096}};
  for (const E& e : edges) {
    const Data d =
        make_data(e.M, e.K, e.N, e.G, false, kjit_test::seed() + static_cast<uint64_t>(e.N));
    const Ref ref = reference(d, pick_rows(d, 3e7, 64, kjit_test::seed()));
    Device dev(d, {});
    const Run r = run_op(d, Precision::Fp32, dev, ref.rows, true, stream);
    CHECK(r.guard_ok);
    check_strict(judge(d, ref, r), problem_of(d, Precision::Fp32).describe());
  }
}

TEST_CASE("linear_gn_min: 110 random fp32 problems") {
  run_random(Precision::Fp32, 110, 3e7);
}
TEST_CASE("linear_gn_min: 16 random tf32 problems (error reported)") {
  run_random(Precision::Tf32, 16, 3e7);
}
TEST_CASE("linear_gn_min: 16 random bf16-input problems") {
  run_random(Precision::Bf16Inputs, 16, 3e7);
}

TEST_CASE("linear_gn_min: concurrent streams with kjit's per-stream workspaces") {
  const Data a = make_data(512, 1024, 2048, 64, false, kjit_test::seed() + 11);
  const Data b = make_data(300, 700, 1536, 48, false, kjit_test::seed() + 12);
  Device da(a, {}), db(b, {});
  kjit::Stream sa(runtime()), sb(runtime());
  const Run ra = run_op(a, Precision::Fp32, da, {}, true, sa);
  const Run rb = run_op(b, Precision::Fp32, db, {}, true, sb);
  // Two threads, each on its own stream without a caller workspace, many calls each.
  auto fa = std::async(std::launch::async, [&] {
    return repeated_calls_diff(a, da, ra, sa, [&] { sa.synchronize(); });
  });
  auto fb = std::async(std::launch::async, [&] {
    return repeated_calls_diff(b, db, rb, sb, [&] { sb.synchronize(); });
  });
  CHECK(fa.get() <= 1e-6);
  CHECK(fb.get() <= 1e-6);
}

// One stream, two threads: a call is a GEMM into kjit's workspace for the stream and then the
// kernel that reads it. Another thread's GEMM must not land between the two (it did: 30% of the
// calls read the other thread's Y, H200, review of 2026-11-29).
TEST_CASE("linear_gn_min: two threads enqueueing on one stream get their own answers") {
  const Data a = make_data(256, 2048, 2048, 64, false, kjit_test::seed() + 15);
  const Data b = make_data(256, 2048, 2048, 64, false, kjit_test::seed() + 16);
  Device da(a, {}), db(b, {});
  kjit::Stream shared(runtime());
  const Run ra = run_op(a, Precision::Fp32, da, {}, true, shared);
  const Run rb = run_op(b, Precision::Fp32, db, {}, true, shared);
  // Each thread enqueues without waiting, into an output of its own per call, so that every call
  // is checked.
  constexpr int kCalls = 32;
  const size_t out_bytes = ra.out.size() * 4;
  std::vector<kjit::DeviceBuffer> outs;
  for (int i = 0; i < 2 * kCalls; ++i) {
    outs.emplace_back(runtime(), out_bytes);
    outs.back().fill_bytes(0xFF);
  }
  std::atomic<int> arrived{0};
  auto worker = [&](const Data& d, const Device& dev, int first) {
    LinearGnMinOptions opt;
    opt.eps = d.eps;
    arrived.fetch_add(1);
    while (arrived.load() < 2) std::this_thread::yield();
    for (int i = 0; i < kCalls; ++i)
      kjit::ops::linear_gn_min(runtime(), problem_of(d, Precision::Fp32), dev.xp(), dev.wp(),
                               dev.lbp(), dev.gp(), dev.bp(), dev.biasp(),
                               outs[static_cast<size_t>(first + i)].as<float>(), opt, shared);
  };
  auto fa = std::async(std::launch::async, worker, std::cref(a), std::cref(da), 0);
  auto fb = std::async(std::launch::async, worker, std::cref(b), std::cref(db), kCalls);
  fa.get();
  fb.get();
  shared.synchronize();
  int wrong = 0;
  for (int i = 0; i < 2 * kCalls; ++i) {
    const std::vector<float>& want = i < kCalls ? ra.out : rb.out;
    const auto got = outs[static_cast<size_t>(i)].to_host<float>(want.size());
    bool same = true;
    for (size_t k = 0; k < want.size(); ++k)
      same = same && std::fabs(got[k] - want[k]) <= 1e-6f;  // false for NaN (never written)
    wrong += same ? 0 : 1;
  }
  CHECK(wrong == 0);
}

// A NaN in the weight makes a column of Y NaN, so its group's statistics, every row's minimum
// (min.NaN on the device) and every output are NaN, as torch.min propagates it.
TEST_CASE("linear_gn_min: a NaN weight gives NaN in every output") {
  Data d = make_data(64, 32, 256, 8, false, kjit_test::seed() + 17);
  d.w[5 * 32 + 3] = std::numeric_limits<float>::quiet_NaN();
  Device dev(d, {});
  kjit::Stream stream(runtime());
  // Zeros, not run_op's NaN poison: an output the kernel never wrote must not pass as NaN.
  dev.out.fill_bytes(0x00);
  kjit::synchronize(runtime());
  LinearGnMinOptions opt;
  opt.eps = d.eps;
  kjit::ops::linear_gn_min(runtime(), problem_of(d, Precision::Fp32), dev.xp(), dev.wp(), dev.lbp(),
                           dev.gp(), dev.bp(), dev.biasp(), dev.outp(), opt, stream);
  stream.synchronize();
  std::vector<float> out(static_cast<size_t>(d.N * d.M));
  dev.out.download(out.data(), out.size() * 4, dev.off.out);
  size_t nans = 0;
  for (float v : out) nans += std::isnan(v) ? 1 : 0;
  CHECK(nans == out.size());
}

// CU_STREAM_PER_THREAD is one handle for a different stream in each thread: kjit's workspace for
// it must be per thread too, or two threads' GEMMs write the same Y.
TEST_CASE("linear_gn_min: threads on the per-thread default stream get workspaces of their own") {
  const Data a = make_data(512, 1024, 2048, 64, false, kjit_test::seed() + 13);
  const Data b = make_data(300, 700, 1536, 48, false, kjit_test::seed() + 14);
  Device da(a, {}), db(b, {});
  kjit::Stream sa(runtime()), sb(runtime());
  const Run ra = run_op(a, Precision::Fp32, da, {}, true, sa);
  const Run rb = run_op(b, Precision::Fp32, db, {}, true, sb);
  // The context-wide wait: CU_STREAM_PER_THREAD names no stream of this thread to wait for.
  auto sync = [] { kjit::synchronize(runtime()); };
  auto fa = std::async(std::launch::async,
                       [&] { return repeated_calls_diff(a, da, ra, CU_STREAM_PER_THREAD, sync); });
  auto fb = std::async(std::launch::async,
                       [&] { return repeated_calls_diff(b, db, rb, CU_STREAM_PER_THREAD, sync); });
  CHECK(fa.get() <= 1e-6);
  CHECK(fb.get() <= 1e-6);
}

TEST_CASE("linear_gn_min: prepared calls capture into a CUDA graph; unprepared ones refuse") {
  auto& rt = runtime();
  const Data d = make_data(256, 512, 1024, 32, false, kjit_test::seed() + 21);
  const LinearGnMinProblem p = problem_of(d, Precision::Fp32);
  Device dev(d, {});
  kjit::Stream stream(rt);
  const Run direct = run_op(d, Precision::Fp32, dev, {}, false, stream);
  LinearGnMinOptions opt;
  opt.eps = d.eps;
  kjit::ops::prepare_linear_gn_min(rt, p, opt);
  kjit::ops::reserve_linear_gn_min_workspace(rt, p, stream);
  CHECK(graph_diff(stream, dev, direct, [&] {
          kjit::ops::linear_gn_min(rt, p, dev.xp(), dev.wp(), dev.lbp(), dev.gp(), dev.bp(),
                                   dev.biasp(), dev.outp(), opt, stream);
        }) <= 1e-6);
  // A problem never seen: the plan would have to be built during capture.
  LinearGnMinProblem unseen = p;
  unseen.G = 16;
  CHECK_KJIT_ERROR(kjit::Graph(rt, stream,
                               [&] {
                                 kjit::ops::linear_gn_min(rt, unseen, dev.xp(), dev.wp(), dev.lbp(),
                                                          dev.gp(), dev.bp(), dev.biasp(),
                                                          dev.outp(), opt, stream);
                               }),
                   kjit::Errc::CaptureCompile);
  // A prepared problem on a stream without a workspace: allocation refused too. (A runtime of
  // its own, whose streams have no workspace: a new stream of `rt` may get the handle of an
  // earlier, destroyed stream that had one.)
  kjit::Runtime rt2;
  kjit::ops::prepare_linear_gn_min(rt2, p, opt);
  kjit::Stream fresh(rt2);
  CHECK_KJIT_ERROR(kjit::Graph(rt2, fresh,
                               [&] {
                                 kjit::ops::linear_gn_min(rt2, p, dev.xp(), dev.wp(), dev.lbp(),
                                                          dev.gp(), dev.bp(), dev.biasp(),
                                                          dev.outp(), opt, fresh);
                               }),
                   kjit::Errc::CaptureCompile);
  // ... but fine with a caller workspace.
  kjit::DeviceBuffer ws(rt2, kjit::ops::linear_gn_min_workspace_size(p));
  kjit::Graph g2(rt2, fresh, [&] {
    kjit::ops::linear_gn_min(rt2, p, dev.xp(), dev.wp(), dev.lbp(), dev.gp(), dev.bp(), dev.biasp(),
                             dev.outp(), opt, fresh,
                             {reinterpret_cast<void*>(ws.ptr()), ws.bytes()});
  });
  g2.launch(fresh);
  fresh.synchronize();
}

TEST_CASE("linear_gn_min: autotune picks among the top 8 and reuses its choice from the cache") {
  const Data d = make_data(256, 1024, 1024, 64, false, kjit_test::seed() + 31);
  const LinearGnMinProblem p = problem_of(d, Precision::Fp32);
  LinearGnMinOptions opt;
  opt.eps = d.eps;
  opt.autotune = true;
  const auto info = kjit::ops::prepare_linear_gn_min(runtime(), p, opt);
  CHECK((info.gemm_source == "autotuned" || info.gemm_source == "cache"));
  MESSAGE("autotuned " << p.describe() << ": GEMM " << info.gemm_algo << " (" << info.gemm_source
                       << "), kernel " << info.config.describe());
  if (runtime().compiler().disk_cache().mode() == kjit::cache::Mode::ReadWrite) {
    // A second runtime (a new process, as far as plans go) finds the choice on disk.
    kjit::Runtime rt2;
    const auto again = kjit::ops::prepare_linear_gn_min(rt2, p, opt);
    CHECK(again.gemm_source == "cache");
    CHECK(again.gemm_algo == info.gemm_algo);
    CHECK(again.config.describe() == info.config.describe());
  }
  const Ref ref = reference(d, pick_rows(d, 3e7, 64, 1));
  kjit::Stream stream(runtime());
  Device dev(d, {});
  const Run r = run_op(d, Precision::Fp32, dev, ref.rows, true, stream, true);
  check_strict(judge(d, ref, r), "autotuned");
}

// LinearGnMinOptions::gemm: each of the heuristic's algorithms, pinned, is the plan's and gives
// strict-FP32 answers; its text (LinearGnMinInfo::pin) pins it again, through the C ABI too; a
// pinned plan is its own (a capture finds it, and no other); an algorithm the problem does not
// have is refused naming the field and listing those it has.
TEST_CASE("linear_gn_min: a pinned GEMM runs the algorithm it names") {
  auto& rt = runtime();
  const Data d = make_data(256, 1024, 1024, 64, false, kjit_test::seed() + 41);
  const LinearGnMinProblem p = problem_of(d, Precision::Fp32);
  LinearGnMinOptions opt;
  opt.eps = d.eps;
  const std::vector<kjit::ops::GemmAlgo> algos = kjit::ops::linear_gn_min_gemm_algos(rt, p, opt);
  REQUIRE(algos.size() >= 2);  // else a pin could not be told from the heuristic's choice
  CHECK(kjit::ops::prepare_linear_gn_min(rt, p, opt).gemm_algo == algos[0].describe());
  const Ref ref = reference(d, pick_rows(d, 3e7, 64, 3));
  kjit::Stream stream(rt);
  Device dev(d, {});
  for (const kjit::ops::GemmAlgo& a : algos) {
    INFO("pinned " << a.describe());
    opt.gemm = a;
    const auto info = kjit::ops::prepare_linear_gn_min(rt, p, opt);
    CHECK(info.gemm_algo == a.describe());
    CHECK(info.gemm_source == "pinned");
    CHECK(info.gemm_bias_epilogue);  // auto settles as epilogue with a pinned GEMM
    LinearGnMinOptions again;
    again.eps = d.eps;
    kjit::ops::pin_config_text(info.pin(), &again);
    CHECK(again.gemm == a);
    CHECK(kjit::ops::prepare_linear_gn_min(rt, p, again).describe() == info.describe());
    const Run r = run_op(d, Precision::Fp32, dev, ref.rows, true, stream, false,
                         kjit::ops::LinearBiasAdd::Auto, nullptr, a);
    CHECK(r.guard_ok);
    check_strict(judge(d, ref, r), "pinned " + a.describe());
  }
  // Every precision's pin reads back and pins its plan (TF32's first algorithm here reports
  // split-k -1 on the H200, cuBLASLt 13.0).
  for (Precision pr : {Precision::Tf32, Precision::Bf16Inputs, Precision::Fp32x3}) {
    LinearGnMinProblem q = p;
    q.precision = pr;
    LinearGnMinOptions o;
    o.eps = d.eps;
    const auto first = kjit::ops::prepare_linear_gn_min(rt, q, o);
    INFO(q.describe() << ": " << first.describe());
    LinearGnMinOptions pinned;
    pinned.eps = d.eps;
    kjit::ops::pin_config_text(first.pin(), &pinned);
    const auto again = kjit::ops::prepare_linear_gn_min(rt, q, pinned);
    CHECK(again.pin() == first.pin());
    CHECK(again.gemm_source == "pinned");
  }
  // Through the C ABI: the text before "; kernel" pins the config and the GEMM.
  opt.gemm = algos[1];
  const auto info1 = kjit::ops::prepare_linear_gn_min(rt, p, opt);
  char text[1024];
  REQUIRE(kjit_linear_gn_min_prepare("fp32", p.M, p.K, p.N, p.G, 0, info1.pin().c_str(), text,
                                     sizeof text) == 0);
  CHECK(std::string(text).rfind(info1.pin() + "; kernel ", 0) == 0);
  CHECK(std::string(text).find("; GEMM from pinned") != std::string::npos);
  CHECK(kjit_linear_gn_min_prepare("fp32", p.M, p.K, p.N, p.G, 0, text, nullptr, 0) ==
        KJIT_ERR_INVALID_ARGUMENT);  // the whole report is no pin
  CHECK(std::string(kjit_last_error()).find("is its report, not a pin") != std::string::npos);
  // With autotune a pinned GEMM stays: only the kernel's configs are timed.
  opt.autotune = true;
  const auto tuned = kjit::ops::prepare_linear_gn_min(rt, p, opt);
  CHECK(tuned.gemm_algo == algos[1].describe());
  CHECK(tuned.gemm_source == "pinned");
  opt.autotune = false;
  // A plan per pin: in a runtime of its own, the prepared pin captures; another pin, or none,
  // would build a plan during the capture and is refused.
  {
    kjit::Runtime rt2;
    kjit::Stream s2(rt2);
    kjit::ops::prepare_linear_gn_min(rt2, p, opt);
    kjit::ops::reserve_linear_gn_min_workspace(rt2, p, s2);
    auto capture = [&](const LinearGnMinOptions& o) {
      kjit::Graph g(rt2, s2, [&] {
        kjit::ops::linear_gn_min(rt2, p, dev.xp(), dev.wp(), dev.lbp(), dev.gp(), dev.bp(),
                                 dev.biasp(), dev.outp(), o, s2);
      });
    };
    capture(opt);
    LinearGnMinOptions other = opt;
    other.gemm = algos[0];
    CHECK_KJIT_ERROR(capture(other), kjit::Errc::CaptureCompile);
    other.gemm.reset();
    CHECK_KJIT_ERROR(capture(other), kjit::Errc::CaptureCompile);
  }
  // An algorithm the problem does not have.
  kjit::ops::GemmAlgo none = algos[0];
  none.id = 1 << 30;
  opt.gemm = none;
  try {
    kjit::ops::prepare_linear_gn_min(rt, p, opt);
    FAIL("a GEMM the problem does not have was accepted");
  } catch (const kjit::Error& e) {
    CHECK(e.code() == kjit::Errc::InvalidArgument);
    CHECK(e.field() == "gemm");
    CHECK(std::string(e.what()).find(none.describe()) != std::string::npos);
    CHECK(std::string(e.what()).find(algos[0].describe()) != std::string::npos);
  }
}

// A stored choice this build cannot use is tuned afresh and stored again, neither trusted nor an
// error: a kernel config or a GEMM algorithm the candidate lists no longer have (a changed
// template set, another cuBLASLt build). The two steps keep a record each (kjit::Autotuner).
TEST_CASE("linear_gn_min: a stale autotune record is tuned afresh and replaced") {
  kjit_test::TempDir dir;
  kjit::RuntimeOptions o;
  o.cache.dir = dir.path;
  const Data d = make_data(64, 256, 512, 32, false, kjit_test::seed() + 37);
  const LinearGnMinProblem p = problem_of(d, Precision::Fp32);
  LinearGnMinOptions opt;
  opt.eps = d.eps;
  opt.autotune = true;
  auto prepare = [&] {
    kjit::Runtime rt(o);  // a new process, as far as plans go
    return kjit::ops::prepare_linear_gn_min(rt, p, opt);
  };
  const auto first = prepare();
  CHECK(first.gemm_source == "autotuned");
  CHECK(prepare().gemm_source == "cache");
  // The payload of step `op`'s record (after `edit`, which rewrites it in place, same key, as
  // another build might have written it).
  auto record = [&](const std::string& op, const std::function<void(std::string&)>& edit) {
    kjit::cache::DiskCache disk(o.cache);
    std::vector<std::string> payloads;
    for (const kjit::cache::EntryInfo& info : disk.list()) {
      kjit::cache::Key key;
      REQUIRE(kjit::cache::Key::from_hex(info.key_hex, &key));
      std::optional<kjit::cache::Entry> e = disk.get(key);
      REQUIRE(e);
      const std::string* name = e->find("op");
      if (!name || *name != op) continue;  // kernels, or the other step's record
      CHECK(*e->find("format") == "kjit-tune-v1");
      edit(e->payload);
      REQUIRE(disk.put(key, *e));
      payloads.push_back(e->payload);
    }
    REQUIRE(payloads.size() == 1);
    return payloads[0];
  };
  const std::string kernel = record("linear_gn_min.kernel", [](std::string&) {});
  // The record names the candidate; the plan's config adds the bias variant matched to the GEMM.
  CHECK(first.config.describe().rfind(kernel, 0) == 0);
  record("linear_gn_min.kernel", [](std::string& v) { v = "threads=999 (no such candidate)"; });
  const auto second = prepare();
  CHECK(second.gemm_source == "cache");  // the GEMM's record still holds
  CHECK(second.config.describe().rfind(record("linear_gn_min.kernel", [](std::string&) {}), 0) ==
        0);
  record("linear_gn_min.gemm", [](std::string& v) { v.assign(v.size(), 'x'); });
  const auto third = prepare();
  CHECK(third.gemm_source == "autotuned");
  const auto again = prepare();
  CHECK(again.gemm_source == "cache");
  CHECK(again.config.describe() == third.config.describe());
  CHECK(again.gemm_algo == third.gemm_algo);
}

TEST_CASE("linear_gn_min: bad inputs raise InvalidArgument and write nothing" *
          doctest::test_suite("host_logic")) {
  auto& rt = runtime();
  kjit::Stream stream(rt);
  const Data d = make_data(8, 16, 32, 4, false, 3);
  const LinearGnMinProblem p = problem_of(d, Precision::Fp32);
  Device dev(d, {});
  dev.out.fill_bytes(0x7F);
  kjit::synchronize(rt);
  LinearGnMinOptions o;
  auto call = [&](const LinearGnMinProblem& q, const void* x, const void* w, const float* lb,
                  const float* ga, const float* be, const float* bi, float* out,
                  const LinearGnMinOptions& opt, kjit::ops::Workspace ws = {}) {
    kjit::ops::linear_gn_min(rt, q, x, w, lb, ga, be, bi, out, opt, stream, ws);
  };
  const void* X = dev.xp();
  const void* W = dev.wp();
  const float* LB = dev.lbp();
  const float* GA = dev.gp();
  const float* BE = dev.bp();
  const float* BI = dev.biasp();
  float* OUT = dev.outp();
  using E = kjit::Errc;
  CHECK_KJIT_ERROR(call(p, nullptr, W, LB, GA, BE, BI, OUT, o), E::InvalidArgument);
  CHECK_KJIT_ERROR(call(p, X, nullptr, LB, GA, BE, BI, OUT, o), E::InvalidArgument);
  CHECK_KJIT_ERROR(call(p, X, W, nullptr, GA, BE, BI, OUT, o), E::InvalidArgument);
  CHECK_KJIT_ERROR(call(p, X, W, LB, nullptr, BE, BI, OUT, o), E::InvalidArgument);
  CHECK_KJIT_ERROR(call(p, X, W, LB, GA, nullptr, BI, OUT, o), E::InvalidArgument);
  CHECK_KJIT_ERROR(call(p, X, W, LB, GA, BE, nullptr, OUT, o), E::InvalidArgument);
  CHECK_KJIT_ERROR(call(p, X, W, LB, GA, BE, BI, nullptr, o), E::InvalidArgument);
  CHECK_KJIT_ERROR(call(p, static_cast<const char*>(X) + 2, W, LB, GA, BE, BI, OUT, o),
                   E::InvalidArgument);
  CHECK_KJIT_ERROR(
      call(p, X, W, LB, GA, BE, BI, reinterpret_cast<float*>(reinterpret_cast<char*>(OUT) + 2), o),
      E::InvalidArgument);
  LinearGnMinProblem q = p;
  q.G = 5;
  CHECK_KJIT_ERROR(call(q, X, W, LB, GA, BE, BI, OUT, o), E::InvalidArgument);
  q = p;
  q.M = 0;
  CHECK_KJIT_ERROR(call(q, X, W, LB, GA, BE, BI, OUT, o), E::InvalidArgument);
  for (float eps : {-1.f, NAN, INFINITY}) {
    LinearGnMinOptions bad = o;
    bad.eps = eps;
    CHECK_KJIT_ERROR(call(p, X, W, LB, GA, BE, BI, OUT, bad), E::InvalidArgument);
  }
  {
    LinearGnMinOptions bad = o;
    bad.bias_add = static_cast<kjit::ops::LinearBiasAdd>(7);
    CHECK_KJIT_ERROR(call(p, X, W, LB, GA, BE, BI, OUT, bad), E::InvalidArgument);
  }
  // out overlapping what the kernel reads while writing it.
  CHECK_KJIT_ERROR(call(p, X, W, LB, GA, BE, BI, const_cast<float*>(GA), o), E::InvalidArgument);
  CHECK_KJIT_ERROR(call(p, X, W, LB, GA, BE, BI, const_cast<float*>(LB), o), E::InvalidArgument);
  // Workspaces: too small, misaligned, overlapping, or a size without a pointer.
  const size_t need = kjit::ops::linear_gn_min_workspace_size(p);
  kjit::DeviceBuffer ws(rt, need + 256);
  void* WS = reinterpret_cast<void*>(ws.ptr());
  CHECK_KJIT_ERROR(call(p, X, W, LB, GA, BE, BI, OUT, o, {WS, need - 1}), E::InvalidArgument);
  CHECK_KJIT_ERROR(call(p, X, W, LB, GA, BE, BI, OUT, o, {static_cast<char*>(WS) + 16, need}),
                   E::InvalidArgument);
  CHECK_KJIT_ERROR(call(p, X, W, LB, GA, BE, BI, static_cast<float*>(WS), o, {WS, need}),
                   E::InvalidArgument);
  CHECK_KJIT_ERROR(call(p, X, W, LB, GA, BE, BI, OUT, o, {nullptr, need}), E::InvalidArgument);
  // A forced config that cannot run p, or stores 16-byte vectors into an out that is not
  // 16-byte aligned: refused, naming the field "config".
  auto field_of = [&](const LinearGnMinOptions& opt, float* out) -> std::string {
    try {
      call(p, X, W, LB, GA, BE, BI, out, opt);
    } catch (const kjit::Error& e) {
      CHECK(e.code() == E::InvalidArgument);
      return e.field();
    }
    return "<none>";
  };
  {
    LinearGnMinOptions bad = o;
    bad.config = kjit::ops::gn_min_heuristic(p, kjit::Target::of(rt), true);
    bad.config->threads = 33;
    CHECK(field_of(bad, OUT) == "config");
    bad.config.reset();
    for (const kjit::ops::GnMinConfig& c : kjit::ops::gn_min_candidates(p, kjit::Target::of(rt)))
      if (c.out_vec) bad.config = c;
    REQUIRE(bad.config);
    kjit::DeviceBuffer spare(rt, dev.out.bytes() + 16);  // room for out one float further on
    spare.fill_bytes(0x7F);
    CHECK(field_of(bad, reinterpret_cast<float*>(spare.ptr()) + 1) == "config");
    kjit::synchronize(rt);
    std::vector<unsigned char> untouched(spare.bytes());
    spare.download(untouched.data(), untouched.size());
    CHECK(
        std::all_of(untouched.begin(), untouched.end(), [](unsigned char c) { return c == 0x7F; }));
  }
  stream.synchronize();
  std::vector<unsigned char> h(dev.out.bytes());
  dev.out.download(h.data(), h.size());
  CHECK(std::all_of(h.begin(), h.end(), [](unsigned char c) { return c == 0x7F; }));
  // A message names the value and the rule.
  try {
    LinearGnMinProblem r = p;
    r.G = 5;
    call(r, X, W, LB, GA, BE, BI, OUT, o);
    FAIL("N % G accepted");
  } catch (const kjit::Error& e) {
    CHECK(std::string(e.what()).find("N = 32 must be divisible by G = 5") != std::string::npos);
  }
}

// ---- split precision (Precision::Fp32x3)
// ----------------------------------------------------------

namespace {

std::string spread(std::vector<double> v) {
  if (v.empty()) return "-";
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))]; };
  char buf[128];
  std::snprintf(buf, sizeof buf, "median %.2e, p90 %.2e, max %.2e", at(0.5), at(0.9), v.back());
  return buf;
}

// fp32x3 refuses bias_add = epilogue (its kernel adds the bias after undoing the scales).
kjit::ops::LinearBiasAdd split_mode(kjit::ops::LinearBiasAdd b, Precision pr) {
  return pr == Precision::Fp32x3 && b == kjit::ops::LinearBiasAdd::Epilogue
             ? kjit::ops::LinearBiasAdd::Kernel
             : b;
}

kjit::ops::LinearGnMinWeights pack_of(const Data& d, const Device& dev, CUstream stream) {
  return kjit::ops::prepack_linear_gn_min(runtime(), d.N, d.K, Precision::Fp32x3,
                                          static_cast<const float*>(dev.wp()), stream);
}

}  // namespace

TEST_CASE(
    "linear_gn_min fp32x3: the device's split rows and exponents are the host's, bit for bit") {
  // tests/cpu/linear_gn_min_split_test.cpp checks the host's functions against float64.
  auto& rt = runtime();
  kjit::Stream stream(rt);
  struct S {
    int64_t N, K;
    size_t offset;  // bytes past a 256-byte boundary: 4 takes the scalar kernel
  };
  for (const S& s :
       {S{37, 8192, 0}, S{5, 7, 4}, S{11, 100, 16}, S{3, 1, 0}, S{9, 130, 4}, S{4, 3000, 0}}) {
    CAPTURE(s.K);
    CAPTURE(s.offset);
    std::vector<float> w(static_cast<size_t>(s.N * s.K));
    Rng r{kjit_test::seed() + static_cast<uint64_t>(s.K)};
    for (size_t i = 0; i < w.size(); ++i) {
      // Every finite binade (subnormals too), zeros, infs and NaNs; a zero row and a row of tiny
      // values among them.
      uint32_t u = static_cast<uint32_t>(r.next());
      const int64_t row = static_cast<int64_t>(i) / s.K;
      if (row % 4 != 3)
        u = (u & 0x87ffffffu) | 0x38000000u;  // |a| in [2^-15, 2^16): one row's range
      if (i % 17 == 3) u &= 0x80000000u;
      if (i % 101 == 7) u = 0x7f800000u | (u & 0x80000000u) | (i % 2 ? 0u : 1u);  // inf or NaN
      if (row == 1) u = 0;
      if (row == 2) u &= 0x807fffffu;  // subnormals only
      std::memcpy(&w[i], &u, 4);
    }
    kjit::DeviceBuffer buf(rt, w.size() * 4 + 256);
    buf.upload(w.data(), w.size() * 4, s.offset);
    const auto* wp = reinterpret_cast<const float*>(buf.ptr() + s.offset);
    const auto pack = kjit::ops::prepack_linear_gn_min(rt, s.N, s.K, Precision::Fp32x3, wp, stream);
    stream.synchronize();
    const int64_t pitch = kjit::ops::linear_gn_min_split_pitch(s.K);
    REQUIRE(pack.bytes() == kjit::ops::linear_gn_min_split_bytes(s.N, s.K));
    CHECK(pack.N() == s.N);
    CHECK(pack.K() == s.K);
    CHECK(pack.precision() == Precision::Fp32x3);
    std::vector<unsigned char> got(pack.bytes());
    pack.buffer().download(got.data(), pack.bytes());
    auto half_at = [&](int64_t n, int64_t k) {
      unsigned short h;
      std::memcpy(&h, got.data() + static_cast<size_t>((n * 2 * pitch + k) * 2), 2);
      return h;
    };
    int bad = 0;
    for (int64_t n = 0; n < s.N && bad < 5; ++n) {
      float amax = 0;
      for (int64_t k = 0; k < s.K; ++k) {
        const float a = w[static_cast<size_t>(n * s.K + k)];
        if (std::isfinite(a)) amax = std::max(amax, std::fabs(a));
      }
      const int e = kjit::f16split::scale_exponent(amax);
      int32_t exp_got;
      // The exponents follow the N split rows.
      std::memcpy(&exp_got, got.data() + static_cast<size_t>(s.N * 2 * pitch * 2 + n * 4), 4);
      if (exp_got != -e) {
        ++bad;
        FAIL_CHECK("row ", n, ": exponent ", exp_got, ", want ", -e);
      }
      for (int64_t k = 0; k < pitch && bad < 5; ++k) {
        const float a = k < s.K ? w[static_cast<size_t>(n * s.K + k)] : 0.f;
        unsigned short hi = 0, lo = 0;
        kjit::f16split::split(a, kjit::f16split::pow2(e), hi, lo);
        if (half_at(n, k) != hi || half_at(n, pitch + k) != lo) {
          ++bad;
          FAIL_CHECK("row ", n, " column ", k, ": a = ", a, " hi/lo bits ", half_at(n, k), "/",
                     half_at(n, pitch + k), ", want ", hi, "/", lo);
        }
      }
    }
  }
}

TEST_CASE("linear_gn_min fp32x3: the seed problem, packed and split per call, next to fp32, tf32") {
  auto& rt = runtime();
  const Data d = make_data(1024, 8192, 8192, 512, false, kjit_test::seed() + 77);
  const Ref ref = reference(d, pick_rows(d, 1e18, 64, kjit_test::seed()));  // 64 rows
  kjit::Stream stream(rt);
  Device dev(d, {});
  const auto info = kjit::ops::prepare_linear_gn_min(rt, problem_of(d, Precision::Fp32x3));
  MESSAGE("seed fp32x3 plan: split " << info.split_kernel << ", kernel " << info.kernel
                                     << ", GEMMs " << info.gemm_algo << ", workspace "
                                     << info.workspace_bytes << " B");
  const auto pack = pack_of(d, dev, stream);
  const Run packed = run_op(d, Precision::Fp32x3, dev, ref.rows, true, stream, false,
                            kjit::ops::LinearBiasAdd::Auto, &pack);
  CHECK(packed.guard_ok);
  const Verdict v3 = judge(d, ref, packed);
  check_strict(v3, "seed fp32x3 packed");
  CHECK(v3.allclose);
  // Split per call: the same split rows and GEMMs, so the same answer.
  const Run per_call = run_op(d, Precision::Fp32x3, dev, ref.rows, true, stream);
  const double diff = max_abs_diff(packed.out, per_call.out);
  CHECK(diff <= 1e-6);
  const Verdict v1 = judge(d, ref, run_op(d, Precision::Fp32, dev, ref.rows, true, stream));
  const Verdict vt = judge(d, ref, run_op(d, Precision::Tf32, dev, ref.rows, true, stream));
  MESSAGE("seed, same data, max abs error vs float64 (end to end / GEMM): fp32 "
          << v1.max_abs << " / " << v1.gemm_max_abs << "; tf32 " << vt.max_abs << " / "
          << vt.gemm_max_abs << "; fp32x3 " << v3.max_abs << " / " << v3.gemm_max_abs
          << " (per call: packed vs unpacked differ by " << diff << ")");
  CHECK(v3.gemm_max_abs * 10 < vt.gemm_max_abs);  // far from TF32's class
  // The bar: within 2x of strict FP32's error on the same data (hi*hi in K slices).
  CHECK(v3.gemm_max_abs <= 2 * v1.gemm_max_abs);
  CHECK(v3.max_abs <= 2 * v1.max_abs);
}

TEST_CASE("linear_gn_min fp32x3: 110 random problems against float64, fp32 and tf32 beside") {
  auto& rt = runtime();
  std::vector<Case> cases;
  for (int i = 0; i < 110; ++i)
    cases.push_back(random_case(kjit_test::seed() * 1000003 + static_cast<uint64_t>(i) * 7919 + 3,
                                Precision::Fp32x3));
  const unsigned workers = std::max(2u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::future<void>> jobs;
  for (unsigned w = 0; w < workers; ++w)
    jobs.push_back(std::async(std::launch::async, [&, w] {
      for (size_t i = w; i < cases.size(); i += workers)
        for (Precision pr : {Precision::Fp32x3, Precision::Fp32, Precision::Tf32}) {
          LinearGnMinOptions o;
          o.bias_add = split_mode(cases[i].bias_add, pr);
          kjit::ops::prepare_linear_gn_min(runtime(), problem_of(cases[i].d, pr), o);
        }
    }));
  for (auto& j : jobs) j.get();
  kjit::Stream stream(rt);
  std::vector<double> e3, e1, et, g3, g1, gt, ratio;
  int allclose3 = 0, allclose1 = 0, packed_count = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& cs = cases[i];
    const Ref ref = reference(cs.d, pick_rows(cs.d, 3e7, 64, kjit_test::seed() + i));
    Device dev(cs.d, cs.off);
    // Every other problem with its weight prepacked (from the caller's W, aligned or not).
    std::optional<kjit::ops::LinearGnMinWeights> pack;
    if (i % 2 == 0) pack.emplace(pack_of(cs.d, dev, stream));
    packed_count += pack ? 1 : 0;
    const Run r = run_op(cs.d, Precision::Fp32x3, dev, ref.rows, true, stream, false,
                         split_mode(cs.bias_add, Precision::Fp32x3), pack ? &*pack : nullptr);
    CHECK_MESSAGE(r.guard_ok, describe(cs));
    const Verdict v = judge(cs.d, ref, r);
    check_strict(v, describe(cs) + (pack ? " packed" : " per call"));
    const Verdict v1 = judge(
        cs.d, ref, run_op(cs.d, Precision::Fp32, dev, ref.rows, true, stream, false, cs.bias_add));
    const Verdict vt = judge(
        cs.d, ref, run_op(cs.d, Precision::Tf32, dev, ref.rows, true, stream, false, cs.bias_add));
    allclose3 += v.allclose ? 1 : 0;
    allclose1 += v1.allclose ? 1 : 0;
    e3.push_back(v.max_abs);
    e1.push_back(v1.max_abs);
    et.push_back(vt.max_abs);
    g3.push_back(v.gemm_max_abs);
    g1.push_back(v1.gemm_max_abs);
    gt.push_back(vt.gemm_max_abs);
    if (v1.gemm_max_abs > 0) ratio.push_back(v.gemm_max_abs / v1.gemm_max_abs);
  }
  MESSAGE("110 random problems (" << packed_count << " packed), max abs error vs float64 per "
                                  << "problem, end to end: fp32 " << spread(e1) << "; tf32 "
                                  << spread(et) << "; fp32x3 " << spread(e3) << ". GEMM: fp32 "
                                  << spread(g1) << "; tf32 " << spread(gt) << "; fp32x3 "
                                  << spread(g3) << ". allclose(1e-4): fp32 " << allclose1
                                  << ", fp32x3 " << allclose3 << " of 110. GEMM error "
                                  << "fp32x3 / fp32 per problem: " << spread(ratio));
  // Where strict FP32 is allclose, split precision is too, up to two problems whose min sits in
  // an ill-conditioned group (their rows are held to the conditioning bound by check_strict).
  CHECK(allclose3 + 2 >= allclose1);
}

TEST_CASE("linear_gn_min fp32x3: one pack serves any M; a pack for another problem is refused") {
  auto& rt = runtime();
  kjit::Stream stream(rt);
  const Data full = make_data(512, 300, 96, 8, false, kjit_test::seed() + 91);
  Device dev_full(full, {});
  const auto pack = pack_of(full, dev_full, stream);
  CHECK(pack.describe().find("N=96 K=300 fp32x3 on device") == 0);
  for (int64_t m : {int64_t{1}, int64_t{37}, int64_t{512}}) {
    Data d = full;  // the same W and biases, the first m rows of x
    d.M = m;
    d.x.resize(static_cast<size_t>(m * d.K));
    Device dev(d, {});
    const Ref ref = reference(d, pick_rows(d, 3e7, 64, kjit_test::seed()));
    const Run r = run_op(d, Precision::Fp32x3, dev, ref.rows, true, stream, false,
                         kjit::ops::LinearBiasAdd::Auto, &pack);
    CHECK(r.guard_ok);
    check_strict(judge(d, ref, r), "reused pack, M = " + std::to_string(m));
  }
  // Refusals: nothing is written.
  dev_full.out.fill_bytes(0x7F);
  kjit::synchronize(rt);
  const LinearGnMinProblem p = problem_of(full, Precision::Fp32x3);
  LinearGnMinOptions o;
  auto call = [&](const LinearGnMinProblem& q, const kjit::ops::LinearGnMinWeights& w,
                  kjit::ops::Workspace ws = {}) {
    kjit::ops::linear_gn_min(rt, q, dev_full.xp(), w, dev_full.lbp(), dev_full.gp(), dev_full.bp(),
                             dev_full.biasp(), dev_full.outp(), o, stream, ws);
  };
  auto refused = [&](const LinearGnMinProblem& q, const kjit::ops::LinearGnMinWeights& w,
                     const std::string& text) {
    try {
      call(q, w);
      FAIL("accepted: ", text);
    } catch (const kjit::Error& e) {
      CHECK(e.code() == kjit::Errc::InvalidArgument);
      CHECK(e.field() == "weight");
      CHECK_MESSAGE(std::string(e.what()).find(text) != std::string::npos, e.what());
    }
  };
  LinearGnMinProblem q = p;
  q.K = 299;  // names both: what the pack was made for, and the call's problem
  refused(q, pack, "made for N=96 K=300 fp32x3, not for this problem's N=96 K=299 fp32x3");
  q = p;
  q.N = 48;
  refused(q, pack, "not for this problem's N=48 K=300 fp32x3");
  q = p;
  q.precision = Precision::Fp32;
  refused(q, pack, "not for this problem's N=96 K=300 fp32");
  refused(p, kjit::ops::LinearGnMinWeights{}, "empty");
  {
    // A second runtime on the same device shares its primary context: its pack is memory this
    // runtime may read, and is accepted (a pack of another context, i.e. another device, is not).
    kjit::Runtime rt2;
    kjit::DeviceBuffer w2(rt2, full.w.size() * 4);
    w2.upload(full.w.data(), full.w.size() * 4);
    kjit::Stream s2(rt2);
    const auto other = kjit::ops::prepack_linear_gn_min(rt2, full.N, full.K, Precision::Fp32x3,
                                                        w2.as<const float>(), s2);
    s2.synchronize();
    CHECK(other.context() == rt.context());
    CHECK_NOTHROW(kjit::ops::validate_pack(p, other, rt.context()));
  }
  // A caller workspace: the packed size suffices, one byte less does not.
  const size_t need = kjit::ops::linear_gn_min_workspace_size(p, true);
  CHECK(need < kjit::ops::linear_gn_min_workspace_size(p));
  kjit::DeviceBuffer ws(rt, need);
  CHECK_KJIT_ERROR(call(p, pack, {reinterpret_cast<void*>(ws.ptr()), need - 1}),
                   kjit::Errc::InvalidArgument);
  // prepack's own rules.
  const auto* W = static_cast<const float*>(dev_full.wp());
  using E = kjit::Errc;
  CHECK_KJIT_ERROR(kjit::ops::prepack_linear_gn_min(rt, 96, 300, Precision::Fp32, W, stream),
                   E::InvalidArgument);
  CHECK_KJIT_ERROR(kjit::ops::prepack_linear_gn_min(rt, 96, 300, Precision::Tf32, W, stream),
                   E::InvalidArgument);
  CHECK_KJIT_ERROR(
      kjit::ops::prepack_linear_gn_min(rt, 96, 300, Precision::Fp32x3, nullptr, stream),
      E::InvalidArgument);
  CHECK_KJIT_ERROR(
      kjit::ops::prepack_linear_gn_min(
          rt, 96, 300, Precision::Fp32x3,
          reinterpret_cast<const float*>(reinterpret_cast<const char*>(W) + 2), stream),
      E::InvalidArgument);
  CHECK_KJIT_ERROR(kjit::ops::prepack_linear_gn_min(rt, 0, 300, Precision::Fp32x3, W, stream),
                   E::InvalidArgument);
  stream.synchronize();
  std::vector<unsigned char> h(dev_full.out.bytes());
  dev_full.out.download(h.data(), h.size());
  CHECK(std::all_of(h.begin(), h.end(), [](unsigned char c) { return c == 0x7F; }));
  // With exactly the packed size, the call runs.
  dev_full.out.fill_bytes(0xFF);
  kjit::synchronize(rt);
  call(p, pack, {reinterpret_cast<void*>(ws.ptr()), need});
  stream.synchronize();
  std::vector<float> out(static_cast<size_t>(full.M * full.N));
  dev_full.out.download(out.data(), out.size() * 4);
  CHECK(std::all_of(out.begin(), out.end(), [](float v) { return std::isfinite(v); }));
}

// The C ABI (libkjit_c, its own Runtime in the same primary context) on the device: its pack
// gives the C++ pack's answer, and every misuse of a pack is an error code with a message.
TEST_CASE("linear_gn_min fp32x3 through the C ABI: prepack, packed calls, refusals, free") {
  auto& rt = runtime();
  const Data d = make_data(64, 300, 96, 8, false, kjit_test::seed() + 41);  // K: a short slice
  Device dev(d, {});
  kjit::Stream stream(rt);
  const auto pack = pack_of(d, dev, stream);
  const Run direct = run_op(d, Precision::Fp32x3, dev, {}, false, stream, false,
                            kjit::ops::LinearBiasAdd::Auto, &pack);
  void* s = static_cast<CUstream>(stream);
  kjit_linear_gn_min_pack* cp = nullptr;
  REQUIRE(kjit_linear_gn_min_prepack("fp32x3", d.N, d.K, static_cast<const float*>(dev.wp()), s,
                                     &cp) == KJIT_OK);
  REQUIRE(cp != nullptr);
  auto packed_call = [&](int64_t n, const kjit_linear_gn_min_pack* with) {
    return kjit_linear_gn_min_packed("fp32x3", d.M, d.K, n, d.G, dev.xp(), with, dev.lbp(),
                                     dev.gp(), dev.bp(), dev.biasp(), dev.outp(), d.eps, s, 0,
                                     nullptr);
  };
  dev.out.fill_bytes(0xFF);
  kjit::synchronize(rt);
  REQUIRE(packed_call(d.N, cp) == KJIT_OK);
  stream.synchronize();
  std::vector<float> got(static_cast<size_t>(d.M * d.N));
  dev.out.download(got.data(), got.size() * 4);
  CHECK(max_abs_diff(got, direct.out) <= 1e-6);
  // Another problem's N, a precision the pack was not made for, a pack of another precision.
  CHECK(packed_call(d.N / 2, cp) == KJIT_ERR_INVALID_ARGUMENT);
  CHECK(std::string(kjit_last_error()).find("N=96 K=300 fp32x3") != std::string::npos);
  CHECK(kjit_linear_gn_min_packed("fp32", d.M, d.K, d.N, d.G, dev.xp(), cp, dev.lbp(), dev.gp(),
                                  dev.bp(), dev.biasp(), dev.outp(), d.eps, s, 0,
                                  nullptr) == KJIT_ERR_INVALID_ARGUMENT);
  kjit_linear_gn_min_pack* none = nullptr;
  CHECK(kjit_linear_gn_min_prepack("fp32", d.N, d.K, static_cast<const float*>(dev.wp()), s,
                                   &none) == KJIT_ERR_INVALID_ARGUMENT);
  CHECK(none == nullptr);
  // Freed: the handle is refused everywhere, never used.
  CHECK(kjit_linear_gn_min_pack_free(cp) == KJIT_OK);
  CHECK(packed_call(d.N, cp) == KJIT_ERR_INVALID_ARGUMENT);
  CHECK(kjit_linear_gn_min_pack_free(cp) == KJIT_ERR_INVALID_ARGUMENT);
  CHECK(kjit_linear_gn_min_pack_free(nullptr) == KJIT_OK);
}

TEST_CASE("linear_gn_min fp32x3: packed and per-call calls capture into a CUDA graph") {
  auto& rt = runtime();
  const Data d = make_data(256, 520, 1024, 32, false, kjit_test::seed() + 23);
  const LinearGnMinProblem p = problem_of(d, Precision::Fp32x3);
  Device dev(d, {});
  kjit::Stream stream(rt);
  const auto pack = pack_of(d, dev, stream);
  const Run direct = run_op(d, Precision::Fp32x3, dev, {}, false, stream, false,
                            kjit::ops::LinearBiasAdd::Auto, &pack);
  LinearGnMinOptions opt;
  opt.eps = d.eps;
  kjit::ops::prepare_linear_gn_min(rt, p, opt);
  kjit::ops::reserve_linear_gn_min_workspace(rt, p, stream);
  for (bool packed : {true, false}) {
    CAPTURE(packed);
    CHECK(graph_diff(stream, dev, direct, [&] {
            if (packed)
              kjit::ops::linear_gn_min(rt, p, dev.xp(), pack, dev.lbp(), dev.gp(), dev.bp(),
                                       dev.biasp(), dev.outp(), opt, stream);
            else
              kjit::ops::linear_gn_min(rt, p, dev.xp(), dev.wp(), dev.lbp(), dev.gp(), dev.bp(),
                                       dev.biasp(), dev.outp(), opt, stream);
          }) <= 1e-6);
  }
  // Packing allocates: refused inside a capture.
  CHECK_KJIT_ERROR(kjit::Graph(rt, stream,
                               [&] {
                                 kjit::ops::prepack_linear_gn_min(
                                     rt, d.N, d.K, Precision::Fp32x3,
                                     static_cast<const float*>(dev.wp()), stream);
                               }),
                   kjit::Errc::CaptureCompile);
}

TEST_CASE("linear_gn_min fp32x3: autotuning times the split GEMMs and reuses its choice") {
  const Data d = make_data(256, 1000, 1024, 64, false, kjit_test::seed() + 33);
  const LinearGnMinProblem p = problem_of(d, Precision::Fp32x3);
  LinearGnMinOptions opt;
  opt.eps = d.eps;
  opt.autotune = true;
  const auto info = kjit::ops::prepare_linear_gn_min(runtime(), p, opt);
  CHECK((info.gemm_source == "autotuned" || info.gemm_source == "cache"));
  CHECK(info.gemm_slices.rfind("hi*hi in ", 0) == 0);  // both GEMMs named
  CHECK(info.split_kernel == "kjit::f16_split<256, 4, 1000>");
  if (runtime().compiler().disk_cache().mode() == kjit::cache::Mode::ReadWrite) {
    kjit::Runtime rt2;
    const auto again = kjit::ops::prepare_linear_gn_min(rt2, p, opt);
    CHECK(again.gemm_source == "cache");
    CHECK(again.gemm_algo == info.gemm_algo);
    CHECK(again.gemm_slices == info.gemm_slices);
  }
  const Ref ref = reference(d, pick_rows(d, 3e7, 64, 2));
  kjit::Stream stream(runtime());
  Device dev(d, {});
  const auto pack = pack_of(d, dev, stream);
  const Run r = run_op(d, Precision::Fp32x3, dev, ref.rows, true, stream, true,
                       kjit::ops::LinearBiasAdd::Auto, &pack);
  check_strict(judge(d, ref, r), "autotuned fp32x3");
}
