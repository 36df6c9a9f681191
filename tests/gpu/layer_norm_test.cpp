// LayerNorm / RMSNorm (+ residual, + activation) against the float64 reference: random shapes in
// every dtype with poisoned outputs and guard bytes, edge widths and row counts, unaligned and
// aliased pointers, forced streaming and cluster configs, NaN/inf, graphs.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <future>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gpu_env.hpp"
#include "kjit/c_api.h"
#include "kjit/host_math.hpp"
#include "kjit/ops/layer_norm.hpp"
#include "kjit/ops/layer_norm_reference.hpp"
#include "test_util.hpp"

using kjit::DType;
using kjit::ops::Activation;
using kjit::ops::LayerNormConfig;
using kjit::ops::LayerNormProblem;
using kjit::ops::NormKind;
using kjit_test::runtime;

namespace {

constexpr Activation kActs[] = {Activation::None, Activation::SiLU, Activation::GeluTanh,
                                Activation::GeluErf, Activation::ReLU};

struct Case {
  LayerNormProblem p;
  int offset = 0;             // elements past a 16-byte boundary for x, residual, y and sum
  bool param_offset = false;  // weight and bias one element past it
  bool y_on_x = false;        // y written over x
  int sum_on = 0;             // 0: its own buffer, 1: over x, 2: over residual
  float eps = 1e-5f;
  int special = 0;  // 1: a NaN in some rows, 2: +inf, 3: -inf and +inf in one row, 4-6: outliers,
                    // 7: squared deviations near the float range, 8: squares past it, 9: one
                    // half of each row 30 off
  float x_mean = 1.5f, x_std = 2.f;  // an offset mean tests the variance's cancellation; std 0:
                                     // every element x_mean (it must be exact in the dtype)
  std::optional<LayerNormConfig> config;
};

// A tensor in a buffer with 16 guard bytes before it (plus the offset) and 16 after, all 0xFF
// (NaN in every float format) where nothing was uploaded.
struct Guarded {
  kjit::DeviceBuffer buf;
  size_t off = 0, bytes = 0;
  Guarded(kjit::Runtime& rt, size_t nbytes, size_t offset_bytes)
      : buf(rt, nbytes + 32 + offset_bytes), off(16 + offset_bytes), bytes(nbytes) {
    buf.fill_bytes(0xFF);
  }
  void* ptr() const { return reinterpret_cast<void*>(buf.ptr() + off); }
  void upload(const std::vector<unsigned char>& b) {
    if (!b.empty()) buf.upload(b.data(), b.size(), off);
  }
  // The tensor's bytes; counts guard bytes that are no longer 0xFF into *touched.
  std::vector<unsigned char> read(size_t* touched) const {
    std::vector<unsigned char> all(buf.bytes());
    buf.download(all.data(), all.size());
    for (size_t i = 0; i < all.size(); ++i)
      *touched += (i < off || i >= off + bytes) && all[i] != 0xFF;
    return {all.begin() + static_cast<long>(off), all.begin() + static_cast<long>(off + bytes)};
  }
};

// Puts NaN or inf into a few rows of x (values as floats, rounded through the dtype later).
void inject(const Case& cs, std::vector<float>* x) {
  const LayerNormProblem& p = cs.p;
  if (!cs.special || p.rows == 0) return;
  const size_t w = static_cast<size_t>(p.width);
  if (cs.special == 4) {  // 1e4 off the mean every 512 elements: where held CTAs' shares start
    for (size_t at = 0; at < x->size(); at += 512) (*x)[at] = cs.x_mean + 1e4f;
    return;
  }
  if (cs.special == 7) {  // 2e17 on the first 128 of every 1024 elements of a row's first quarter:
    // a streamed cluster's CTA sums squared deviations from its warp 0's mean, which overflow
    // fp32 (~6e38) where those from the mean (~1e38) do not
    for (size_t at = 0; at < x->size(); ++at)
      if (at % w < w / 4 && at % w % 1024 < 128) (*x)[at] = 2e17f;
    return;
  }
  if (cs.special == 5) {  // each row's first sixteenth 1e4 off: a cluster's CTA 0, a CTA's first
                          // warps (taking those as the reference costs 2 bits, no fallback)
    for (size_t at = 0; at < x->size(); ++at)
      if (at % w < (w + 15) / 16) (*x)[at] += 1e4f;
    return;
  }
  if (cs.special == 8) {  // 1.6e17 and 4.8e17 alternating: a sum of 4096 squares overflows
    // fp32 where its M2 (~1e38) does not, with a / M2 = 5, inside the 3-bit rule
    for (size_t at = 0; at < x->size(); ++at) (*x)[at] = at % 2 ? 4.8e17f : 1.6e17f;
    return;
  }
  if (cs.special == 9) {  // each row's second half 30 off: CTAs whose own values sit near 0 or
                          // near 30, in a row whose mean is 15
    for (size_t at = 0; at < x->size(); ++at)
      if (at % w >= w / 2) (*x)[at] += 30.f;
    return;
  }
  if (cs.special == 6) {  // +-1e4 every 97 elements: some warps' lane 0, not others'
    for (size_t at = 0; at < x->size(); at += 97) (*x)[at] += at % 2 ? 1e4f : -1e4f;
    return;
  }
  for (int64_t row = 0; row < p.rows; row += 3) {
    const size_t at = static_cast<size_t>(row) * w + static_cast<size_t>(row * 7) % w;
    if (cs.special == 1) (*x)[at] = std::numeric_limits<float>::quiet_NaN();
    if (cs.special >= 2) (*x)[at] = std::numeric_limits<float>::infinity();
    if (cs.special == 3)
      (*x)[static_cast<size_t>(row) * w] = -std::numeric_limits<float>::infinity();
  }
}

struct Result {
  kjit::host::ErrorStats err;
  long long sum_mismatches = 0;
  size_t touched = 0;  // guard bytes written, and bytes of an input that is no output
};

Result run_case(const Case& cs, CUstream stream, uint64_t seed) {
  auto& rt = runtime();
  const LayerNormProblem& p = cs.p;
  using kjit::host::random_normal;
  const size_t n = static_cast<size_t>(p.rows * p.width), w = static_cast<size_t>(p.width);
  const size_t esz = kjit::dtype_size(p.dtype), psz = kjit::dtype_size(p.param_dtype);
  std::vector<float> x = cs.x_std > 0.f ? random_normal(p.dtype, n, cs.x_mean, cs.x_std, seed)
                                        : std::vector<float>(n, cs.x_mean);  // constant rows
  inject(cs, &x);
  // The reference takes what the kernel reads: inject's values rounded through the dtype (30 +
  // N(0, 1) moves by up to 0.0625 in bf16, which once failed the 1e-2 check, max abs 0.025).
  x = kjit::host::from_bytes(p.dtype, kjit::host::to_bytes(p.dtype, x));
  const std::vector<float> r = random_normal(p.dtype, n, -0.5f, 1.f, seed ^ 0x9e3779b9);
  const std::vector<float> wt = random_normal(p.param_dtype, w, 1.f, 0.5f, seed ^ 0x5bd1e995);
  const std::vector<float> bs = random_normal(p.param_dtype, w, 0.f, 0.5f, seed ^ 0x27d4eb2f);
  const size_t off = static_cast<size_t>(cs.offset) * esz, poff = cs.param_offset ? psz : 0;
  Guarded gx(rt, n * esz, off), gr(rt, n * esz, off), gy(rt, n * esz, off), gs(rt, n * esz, off);
  Guarded gw(rt, w * psz, poff), gb(rt, w * psz, poff);
  const std::vector<unsigned char> xb = kjit::host::to_bytes(p.dtype, x),
                                   rb = kjit::host::to_bytes(p.dtype, r);
  gx.upload(xb);
  gr.upload(rb);
  gw.upload(kjit::host::to_bytes(p.param_dtype, wt));
  gb.upload(kjit::host::to_bytes(p.param_dtype, bs));
  Guarded* y = cs.y_on_x ? &gx : &gy;
  Guarded* s = cs.sum_on == 1 ? &gx : cs.sum_on == 2 ? &gr : &gs;
  kjit::ops::LayerNormOptions opt;
  opt.eps = cs.eps;
  opt.config = cs.config;
  // Unused pointers are ignored: give them garbage that would fail every check.
  void* junk = reinterpret_cast<void*>(uintptr_t{3});
  kjit::ops::layer_norm(rt, p, gx.ptr(), p.residual ? gr.ptr() : junk, y->ptr(),
                        p.residual ? s->ptr() : junk, p.has_weight ? gw.ptr() : junk,
                        p.has_bias ? gb.ptr() : junk, opt, stream);
  kjit::synchronize(rt);
  Result res;
  const std::vector<float> got = kjit::host::from_bytes(p.dtype, y->read(&res.touched));
  const auto ref = kjit::reference::layer_norm(p, x, p.residual ? &r : nullptr,
                                               p.has_weight ? wt.data() : nullptr,
                                               p.has_bias ? bs.data() : nullptr, cs.eps);
  const double tol = p.dtype == DType::F32 ? 1e-4 : 1e-2;
  res.err = kjit::host::compare(got, ref.y, tol, tol);
  if (p.residual) {
    const std::vector<float> sum = kjit::host::from_bytes(p.dtype, s->read(&res.touched));
    for (size_t i = 0; i < n; ++i)
      res.sum_mismatches +=
          !(sum[i] == ref.sum[i] || (std::isnan(sum[i]) && std::isnan(ref.sum[i])));
  }
  // Inputs no output was written over are unchanged.
  if (!cs.y_on_x && cs.sum_on != 1) {
    const auto now = gx.read(&res.touched);
    res.touched += now != xb;
  }
  if (p.residual && cs.sum_on != 2) {
    const auto now = gr.read(&res.touched);
    res.touched += now != rb;
  }
  return res;
}

void check_result(const Case& cs, const Result& r) {
  CAPTURE(cs.p.describe());
  CAPTURE(cs.offset);
  CAPTURE(cs.param_offset);
  CAPTURE(cs.y_on_x);
  CAPTURE(cs.sum_on);
  CAPTURE(cs.special);
  CAPTURE((cs.config ? cs.config->describe() : std::string("heuristic")));
  CHECK(r.touched == 0);
  CHECK(r.sum_mismatches == 0);
  CHECK(r.err.nonfinite == 0);
  CHECK(r.err.rel_l2 <= (cs.p.dtype == DType::F32 ? 1e-5 : 1e-2));
  CHECK_MESSAGE(r.err.allclose, "max abs error " << r.err.max_abs);
}

bool aligned_case(const Case& c) {
  const bool params = c.p.has_weight || c.p.has_bias;  // else weight and bias are not passed
  return c.offset % (16 / static_cast<int>(kjit::dtype_size(c.p.dtype))) == 0 &&
         !(c.param_offset && params);
}

// Loads every kernel the cases use with parallel compiles (NVRTC dominates the suite's time), as
// the op will ask for them: layer_norm_specs_for is what a call compiles.
void preload(const std::vector<Case>& cases) {
  auto& rt = runtime();
  const kjit::Target t = kjit::Target::of(rt);
  std::vector<kjit::Spec> specs;
  for (const Case& c : cases) {
    kjit::ops::LayerNormOptions opt;
    opt.config = c.config;
    for (kjit::Spec& s : kjit::ops::layer_norm_specs_for(c.p, t, opt, aligned_case(c)))
      specs.push_back(std::move(s));
  }
  const unsigned workers = std::max(2u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::future<void>> jobs;
  for (unsigned k = 0; k < workers; ++k)
    jobs.push_back(std::async(std::launch::async, [&, k] {
      for (size_t i = k; i < specs.size(); i += workers) rt.kernel(specs[i]);
    }));
  for (auto& j : jobs) j.get();
}

Case random_case(DType t) {
  using kjit_test::uniform;
  Case c;
  LayerNormProblem& p = c.p;
  p.kind = uniform(0, 1) ? NormKind::RMSNorm : NormKind::LayerNorm;
  p.dtype = t;
  p.param_dtype = uniform(0, 2) == 0 ? DType::F32 : t;
  const int64_t named[] = {1,   2,   3,   5,    8,    31,   127,  128,
                           256, 384, 768, 1000, 1024, 1032, 4096, 8192};
  p.width = uniform(0, 1) ? named[uniform(0, 15)] : uniform(1, 5000);
  if (uniform(0, 30) == 0) p.width = uniform(0, 1) ? 65536 : uniform(9000, 40000);
  const int64_t most = std::max<int64_t>(1, (int64_t{1} << 17) / p.width);
  p.rows = uniform(0, 15) == 0 ? uniform(0, 1) : uniform(1, std::min<int64_t>(most, 600));
  p.has_weight = uniform(0, 4) != 0;
  p.has_bias = p.kind == NormKind::LayerNorm && uniform(0, 4) != 0;
  p.residual = uniform(0, 2) == 0;
  p.activation = kActs[uniform(0, 4)];
  c.offset = uniform(0, 6) == 0 ? 1 : 0;
  c.param_offset = uniform(0, 12) == 0;
  c.y_on_x = uniform(0, 6) == 0;
  if (p.residual)
    c.sum_on = static_cast<int>(uniform(0, 5) == 0 ? (c.y_on_x ? 2 : uniform(1, 2)) : 0);
  c.eps = uniform(0, 1) ? 1e-5f : 1e-3f;
  c.special = uniform(0, 20) == 0 ? static_cast<int>(uniform(1, 3)) : 0;
  // Now and then a forced streaming, cluster or replicated config: those paths at moderate sizes.
  if (uniform(0, 8) == 0 && p.width >= 64) {
    LayerNormConfig f;
    f.threads = f.team = static_cast<int>(32 << uniform(0, 3));
    f.vec = aligned_case(c) && p.width % (16 / static_cast<int>(kjit::dtype_size(t))) == 0
                ? 16 / static_cast<int>(kjit::dtype_size(t))
                : 1;
    f.cluster = runtime().props().cc() >= 90 ? static_cast<int>(1 << uniform(0, 2)) : 1;
    f.stream = uniform(0, 1) == 0;
    // A cooperative row (any number of CTAs, some of them past the row's end on short rows),
    // where the grid fits the device at once (a forced config that does not is refused).
    f.coop =
        runtime().props().cc() >= 70 && uniform(0, 2) == 0 ? static_cast<int>(uniform(2, 12)) : 1;
    if (p.rows * f.coop > runtime().props().sm_count) f.coop = 1;
    if (f.coop > 1) f.cluster = 1;
    const int64_t parts = int64_t{f.threads} * f.cluster * f.coop;
    const int64_t per_thread = (p.width / f.vec + parts - 1) / parts;
    f.iters = f.stream ? static_cast<int>(uniform(1, 4)) : static_cast<int>(per_thread);
    // Replicas (in place, y_on_x or sum_on, the call runs the config without them).
    f.replicas = f.coop == 1 && uniform(0, 2) == 0 ? static_cast<int>(2 << uniform(0, 3)) : 1;
    if (f.stream || f.iters * f.vec <= 32) c.config = f;
  }
  return c;
}

void run_random(DType t, int count) {
  std::vector<Case> cases;
  for (int i = 0; i < count; ++i) cases.push_back(random_case(t));
  preload(cases);
  kjit::Stream stream(runtime());
  int failures = 0, forced = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Result r = run_case(cases[i], stream, kjit_test::seed() + i);
    check_result(cases[i], r);
    failures += r.err.nonfinite || !r.err.allclose || r.sum_mismatches || r.touched;
    forced += cases[i].config.has_value();
  }
  MESSAGE(count << " random " << std::string(kjit::dtype_name(t)) << " shapes (" << forced
                << " with forced stream/cluster/replica/coop configs), " << failures << " failed");
}

Case plain(NormKind k, int64_t rows, int64_t width, DType t) {
  Case c;
  c.p = k == NormKind::LayerNorm ? LayerNormProblem::layer_norm(rows, width, t)
                                 : LayerNormProblem::rms_norm(rows, width, t);
  return c;
}

}  // namespace

TEST_CASE("layer_norm: random shapes, fp32") {
  run_random(DType::F32, 300);
}
TEST_CASE("layer_norm: random shapes, fp16") {
  run_random(DType::F16, 300);
}
TEST_CASE("layer_norm: random shapes, bf16") {
  run_random(DType::BF16, 300);
}

TEST_CASE("layer_norm: edge widths and row counts, every activation, both kinds") {
  kjit::Stream stream(runtime());
  std::vector<Case> cases;
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (NormKind k : {NormKind::LayerNorm, NormKind::RMSNorm}) {
      for (int64_t width : {1, 2, 3, 7, 33, 1023, 1025, 4097})
        for (int64_t rows : {1, 2, 7, 33, 257}) cases.push_back(plain(k, rows, width, t));
      for (Activation a : kActs) {
        Case c = plain(k, 19, 96, t);
        c.p.activation = a;
        c.p.residual = true;
        cases.push_back(c);
      }
      // Long rows: a 16-CTA cluster holding the row (sm_90), and 2^20 over a CTA per SM (coop).
      cases.push_back(plain(k, 1, 65536, t));
      cases.push_back(plain(k, 3, 65536 + 8, t));
      Case huge = plain(k, 2, 1 << 20, t);
      huge.p.residual = true;
      huge.p.activation = Activation::SiLU;
      cases.push_back(huge);
      Case odd = plain(k, 1, (1 << 20) + 1, t);  // scalar accesses
      cases.push_back(odd);
    }
  preload(cases);
  for (size_t i = 0; i < cases.size(); ++i)
    check_result(cases[i], run_case(cases[i], stream, kjit_test::seed() + 7000 + i));
}

TEST_CASE("layer_norm: unaligned pointers, in place and aliased sums, NaN and inf") {
  kjit::Stream stream(runtime());
  std::vector<Case> cases;
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (NormKind k : {NormKind::LayerNorm, NormKind::RMSNorm})
      for (int64_t width : {64, 768, 4096, 65536}) {
        Case c = plain(k, width > 4096 ? 2 : 37, width, t);
        c.p.residual = true;
        c.offset = 1;
        cases.push_back(c);
        c.offset = 0;
        c.param_offset = true;
        cases.push_back(c);
        c.param_offset = false;
        c.y_on_x = true;
        c.sum_on = 2;
        cases.push_back(c);
        c.y_on_x = false;
        c.sum_on = 1;
        cases.push_back(c);
        for (int special : {1, 2, 3}) {
          Case s = plain(k, 9, width, t);
          s.special = special;
          s.p.residual = special == 3;
          s.p.activation = special == 2 ? Activation::ReLU : Activation::GeluErf;
          cases.push_back(s);
        }
      }
  preload(cases);
  for (size_t i = 0; i < cases.size(); ++i)
    check_result(cases[i], run_case(cases[i], stream, kjit_test::seed() + 9000 + i));
}

// Streaming LayerNorm takes each thread's variance by Welford's update and merges them; held rows
// take two passes, held clusters their row's sums of values and squares where those keep all but
// 3 bits of M2, and a second pass about that mean where not.
// All must hold up where a sum of squares would cancel (mean 100, std 1: 7e-5 relative L2 error
// from E[x^2] - E[x]^2 in fp32, 2e-6 from the kernels, checked at 1e-5), and propagate NaN and
// inf, alone, across a cluster, and on the scalar path. Outliers (specials 4-6) sit where held
// CTAs' shares start, in a row's first sixteenth (CTA 0 of a 16-CTA cluster), or at some warps'
// lane 0: a cluster's CTAs take their moments about one thread's mean (rownorm::cta_moments),
// which must notice when that cancels and take the exact path, and the cluster's combine moves
// every CTA to CTA 0's mean.
TEST_CASE("layer_norm: streamed, held and clustered statistics far from zero, NaN and inf") {
  kjit::Stream stream(runtime());
  const bool clusters = runtime().props().cc() >= 90;
  std::vector<Case> cases;
  for (int64_t width : {int64_t{4096}, int64_t{4099}, int64_t{65536}}) {
    const int vec = width % 4 == 0 ? 4 : 1;
    std::vector<LayerNormConfig> configs = {
        {256, 256, vec, 4, 1, true}, {128, 128, vec, 1, 1, true}, {512, 512, vec, 4, 1, true}};
    if (width == 4096) configs.push_back({256, 256, vec, 4, 1, false});
    if (clusters) {
      configs.push_back({256, 256, vec, 2, 4, true});
      configs.push_back({1024, 1024, vec, 3, 16, true});
      configs.push_back({256, 256, vec, 2, 3, true});  // a cluster of 3: messages in groups of 4
      if (width == 4096) configs.push_back({256, 256, vec, 2, 3, false});
      configs.push_back({256, 256, vec, 4, 16, false});
      configs.push_back({256, 256, vec, 4, 16, false, 4});
      configs.push_back({256, 256, vec, 2, 4, true, 4});  // streamed replicas
    }
    // One warp: a barrier between the passes. Not over 65536: each thread would sum 2048 values
    // of ~100 in one fp32 chain, whose rounding (1.2e-5 relative L2, H200) exceeds the check.
    if (width < 65536) configs.push_back({32, 32, vec, 2, 1, true, 4});
    for (const LayerNormConfig& f : configs) {
      for (int special : {0, 1, 2, 3, 4, 5, 6, 7}) {
        Case c = plain(NormKind::LayerNorm, 5, width, DType::F32);
        c.config = f;
        const bool far = special == 0 || special >= 4;
        c.x_mean = far ? 100.f : 1.5f;
        c.x_std = far ? 1.f : 2.f;
        c.special = special;
        c.p.residual = special == 3;
        cases.push_back(c);
      }
      // Held clusters take M2 = Q - S mean from the row's sums while its mean lies within 2.6
      // standard deviations of zero: at 2.5 (Q / M2 = 7.25, nearly 3 bits lost) they keep it,
      // at 3 (10) they take the exact pass. At 30 the sums would lose 10 bits (over 1e-5
      // relative L2 on the held 16-CTA configs): a looser rule fails there. Rows half at 0 and
      // half at 30 keep the sums (the row's mean is 15 with a spread of 15) while their CTAs'
      // own statistics differ widely.
      for (float mean : {2.5f, 3.f, 30.f}) {
        Case c = plain(NormKind::LayerNorm, 5, width, DType::F32);
        c.config = f;
        c.x_mean = mean;
        c.x_std = 1.f;
        cases.push_back(c);
      }
      Case mixed = plain(NormKind::LayerNorm, 5, width, DType::F32);
      mixed.config = f;
      mixed.x_mean = 0.f;
      mixed.x_std = 1.f;
      mixed.special = 9;
      cases.push_back(mixed);
      // Constant rows of 2^65: every sum exact, variance 0, y = bias. (2^65)^2 overflows fp32,
      // so no step may square a deviation it then multiplies by a zero count.
      Case big = plain(NormKind::LayerNorm, 3, width, DType::F32);
      big.config = f;
      big.x_mean = 36893488147419103232.f;  // 2^65
      big.x_std = 0.f;
      cases.push_back(big);
      // Constant rows of 2^120, whose sum (2^132 over 4096 values) is past the float range, and
      // of 2^127, whose vectors' sums (4 values: 2^129) are too: y = bias, as PyTorch's Welford
      // mean gives, only if no step sums the values unscaled.
      for (float v : {0x1p120f, 0x1p127f}) {
        Case huge = big;
        huge.x_mean = v;
        cases.push_back(huge);
      }
    }
  }
  // The same rows on the teams inside a warp (768 values: 2^129.6) and the heuristic's configs,
  // with a residual whose sum with them rounds back to them.
  for (int64_t width : {int64_t{768}, int64_t{4096}, int64_t{65536}})
    for (float v : {0x1p120f, 0x1p127f}) {
      Case c = plain(NormKind::LayerNorm, 3, width, DType::F32);
      c.x_mean = v;
      c.x_std = 0.f;
      cases.push_back(c);
      c.p.residual = true;
      cases.push_back(c);
    }
  // Squares past the float range inside the 3-bit rule (special 8): two CTAs of 4096 values
  // each, whose sums of squares overflow; only the isinf check sends them to the exact pass
  // (without it, var = inf and y = bias).
  for (const std::optional<LayerNormConfig>& f :
       {std::optional<LayerNormConfig>{},
        clusters ? std::optional<LayerNormConfig>{LayerNormConfig{256, 256, 4, 4, 2, false}}
                 : std::nullopt}) {
    Case c = plain(NormKind::LayerNorm, 3, 8192, DType::F32);
    c.config = f;
    c.special = 8;
    cases.push_back(c);
  }
  preload(cases);
  for (size_t i = 0; i < cases.size(); ++i)
    check_result(cases[i], run_case(cases[i], stream, kjit_test::seed() + 9500 + i));
}

// A held cluster whose sums lose over 3 bits writes its share, then takes the exact pass and
// writes it again from the values it still holds in registers: in place (y over x, or the sum over
// x or the residual) the first write has already replaced the inputs, so a pass that re-read them
// would normalize its own output. Rows of mean 3 and 30 (std 1) take the exact pass (the rule's
// edge, and 10 bits lost: in fp32 a missing second write is far past the 1e-5 check; bf16 runs the
// same code within its own 1e-2), with and without replicas in the config (a call in place runs
// it without them), on a cluster of 16 and one of 4.
TEST_CASE("layer_norm: held clusters in place take the exact pass from their registers") {
  if (runtime().props().cc() < 90) {
    MESSAGE("thread-block clusters need sm_90: nothing to run");
    return;
  }
  kjit::Stream stream(runtime());
  std::vector<Case> cases;
  for (DType t : {DType::F32, DType::BF16}) {
    const int vec = t == DType::F32 ? 4 : 8;
    // {config, width}: each CTA holds threads x iters x vec values.
    const std::vector<std::pair<LayerNormConfig, int64_t>> held = {
        {{256, 256, vec, 4, 16, false}, 16 * 256 * 4 * vec},
        {{256, 256, vec, 4, 16, false, 4}, 16 * 256 * 4 * vec},
        {{256, 256, vec, 2, 4, false}, 4 * 256 * 2 * vec}};
    for (const auto& [config, width] : held)
      for (float mean : {3.f, 30.f}) {
        Case c = plain(NormKind::LayerNorm, 3, width, t);
        c.config = config;
        c.x_mean = mean;
        c.x_std = 1.f;
        c.y_on_x = true;
        cases.push_back(c);
        c.p.residual = true;
        for (const auto& [y_on_x, sum_on] :
             {std::pair{false, 1}, std::pair{false, 2}, std::pair{true, 2}}) {
          c.y_on_x = y_on_x;
          c.sum_on = sum_on;
          cases.push_back(c);
        }
      }
  }
  preload(cases);
  for (size_t i = 0; i < cases.size(); ++i)
    check_result(cases[i], run_case(cases[i], stream, kjit_test::seed() + 9700 + i));
}

// 16-bit held clusters take their row's sums too. fp16 rows of mean 1000 and std 1 would lose 20
// of M2's 24 bits to Q - S mean, far past the 1e-2 check: only the exact pass (past 3 bits)
// passes them. (bf16 cannot hold such rows: its 8 bits leave at most ~16 bits to lose, within
// the check either way; the code after unpacking is the same for every dtype.) Rows of mean 2.5
// and 3 sit either side of the rule; constant rows of 1024 (and bf16's of 2^120 and 2^127, whose
// sums are past the float range) must give M2 = 0 and y = bias; NaN and inf rows, which take the
// exact pass, must come out NaN. The cluster of 4 x 192 vectors leaves its last CTA empty.
TEST_CASE("layer_norm: 16-bit held clusters far from zero, constant, NaN and inf") {
  if (runtime().props().cc() < 90) {
    MESSAGE("no thread-block clusters before sm_90: nothing to check");
    return;
  }
  kjit::Stream stream(runtime());
  std::vector<Case> cases;
  for (DType t : {DType::F16, DType::BF16}) {
    for (int64_t width : {int64_t{4096}, int64_t{65536}}) {
      const std::vector<LayerNormConfig> configs =
          width == 4096 ? std::vector<LayerNormConfig>{{128, 128, 8, 1, 4, false},
                                                       {64, 64, 8, 1, 8, false, 2},
                                                       {64, 64, 8, 3, 3, false},
                                                       {64, 64, 8, 3, 4, false}}
                        : std::vector<LayerNormConfig>{{128, 128, 8, 4, 16, false, 4},
                                                       {256, 256, 8, 2, 16, false},
                                                       {512, 512, 8, 2, 8, false}};
      for (const LayerNormConfig& f : configs) {
        auto add = [&](float mean, float sd, int special) {
          Case c = plain(NormKind::LayerNorm, 5, width, t);
          c.config = f;
          c.x_mean = mean;
          c.x_std = sd;
          c.special = special;
          c.p.residual = special == 3;
          cases.push_back(c);
        };
        for (float mean : {2.5f, 3.f, t == DType::F16 ? 1000.f : 100.f}) add(mean, 1.f, 0);
        add(1024.f, 0.f, 0);
        // Sums past the float range (bf16 holds both exactly): y = bias, as in fp32.
        if (t == DType::BF16)
          for (float v : {0x1p120f, 0x1p127f}) add(v, 0.f, 0);
        add(0.f, 1.f, 9);
        for (int special : {1, 2, 3}) add(1.5f, 2.f, special);
      }
    }
  }
  preload(cases);
  for (size_t i = 0; i < cases.size(); ++i)
    check_result(cases[i], run_case(cases[i], stream, kjit_test::seed() + 9800 + i));
}

// Forced configs for each path rows past the float range may take: a warp team (768), a CTA
// (4096), streaming (4096), and on sm_90 a cluster (4096 over 4 CTAs), a replicated 16-CTA
// cluster (65536) and a streamed cluster (2^20).
std::vector<std::pair<int64_t, LayerNormConfig>> range_paths(DType t) {
  const int v = 16 / static_cast<int>(kjit::dtype_size(t));
  auto held = [&](int64_t width, int threads, int team, int cluster, int replicas) {
    const int64_t nv = width / v, per = team < threads ? team : int64_t{threads} * cluster;
    const int iters = static_cast<int>((nv + per - 1) / per);
    return std::make_pair(width,
                          LayerNormConfig{threads, team, v, iters, cluster, false, replicas});
  };
  std::vector<std::pair<int64_t, LayerNormConfig>> out = {
      held(768, 256, 32, 1, 1), held(4096, 256, 256, 1, 1), {4096, {256, 256, v, 2, 1, true}}};
  if (runtime().props().cc() >= 90) {
    out.push_back(held(4096, 128, 128, 4, 1));
    out.push_back(held(65536, 256, 256, 16, 4));
    out.push_back({1 << 20, {512, 512, v, 4, 8, true}});
  }
  return out;
}

// y of p (3 rows, weight 1.5, bias `bias`) on x = row(column), with config c.
std::vector<float> run_rows(const LayerNormProblem& p, const LayerNormConfig& c,
                            float (*row)(int64_t, int64_t), const std::vector<float>& bias,
                            CUstream stream) {
  auto& rt = runtime();
  const size_t n = static_cast<size_t>(p.rows * p.width), w = static_cast<size_t>(p.width);
  const size_t esz = kjit::dtype_size(p.dtype);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = row(static_cast<int64_t>(i % w), p.width);
  Guarded gx(rt, n * esz, 0), gy(rt, n * esz, 0), gw(rt, w * esz, 0), gb(rt, w * esz, 0);
  gx.upload(kjit::host::to_bytes(p.dtype, x));
  gw.upload(kjit::host::to_bytes(p.dtype, std::vector<float>(w, 1.5f)));
  gb.upload(kjit::host::to_bytes(p.dtype, bias));
  kjit::ops::LayerNormOptions opt;
  opt.config = c;
  kjit::ops::layer_norm(rt, p, gx.ptr(), nullptr, gy.ptr(), nullptr, gw.ptr(),
                        p.has_bias ? gb.ptr() : nullptr, opt, stream);
  kjit::synchronize(rt);
  size_t touched = 0;
  std::vector<float> y = kjit::host::from_bytes(p.dtype, gy.read(&touched));
  CHECK(touched == 0);
  return y;
}

// Rows whose fp32 statistics pass the float range, checked against what PyTorch computes in fp32
// (PyTorch 2.11 on the H200), not the float64 reference, which has the range to do better:
// - RMSNorm sums squares in fp32, as PyTorch does: rows of 1e18 sum past it, the mean square is
//   inf and y = x * 0 = 0 in both (PyTorch: rows of 1e17 to 1e19 in 65536, fp32 and bf16).
// - LayerNorm rows half at 2^120 and half at 0 have a variance past it: rstd = 0 and y = bias in
//   PyTorch. kjit gives the same on every path, as its sums of values, of a held cluster's
//   deviations and of a streamed cluster's first moments are scaled (rownorm::SumScale:
//   unscaled, a CTA's half of such a row sums past 2^128, and so do a streamed cluster's CTAs'
//   counts times their means' distance from CTA 0's). Two layouts: the row's first half at
//   2^120 (a streamed cluster's CTAs each constant; run on PyTorch), and runs of 1024 elements
//   alternating, which put 2^120 and 0 into the threads of one CTA (its moments combined about
//   one thread's mean). The second was not run on PyTorch: its answer follows from the same rule
//   (M2 past the float range: rstd = 0), and at width 768 it is a constant row (y = bias).
TEST_CASE("layer_norm: rows past the float range give PyTorch's fp32 answers") {
  kjit::Stream stream(runtime());
  for (DType t : {DType::F32, DType::BF16}) {
    for (const auto& path : range_paths(t)) {  // not a structured binding: CAPTURE's lambda
      const int64_t width = path.first;        // cannot capture one in clang 14
      const LayerNormConfig& config = path.second;
      CAPTURE(config.describe());
      const std::vector<float> bias =
          kjit::host::random_normal(t, static_cast<size_t>(width), 0.f, 1.f, 77);
      const LayerNormProblem rms = LayerNormProblem::rms_norm(3, width, t);
      CAPTURE(rms.describe());
      const std::vector<float> y0 = run_rows(
          rms, config, [](int64_t, int64_t) { return 1e18f; }, bias, stream);
      CHECK(std::count(y0.begin(), y0.end(), 0.f) == static_cast<long>(y0.size()));
      const LayerNormProblem ln = LayerNormProblem::layer_norm(3, width, t);
      CAPTURE(ln.describe());
      using Layout = float (*)(int64_t, int64_t);
      const Layout layouts[] = {[](int64_t i, int64_t w) { return i < w / 2 ? 0x1p120f : 0.f; },
                                [](int64_t i, int64_t) { return i / 1024 % 2 ? 0.f : 0x1p120f; }};
      for (Layout layout : layouts) {
        const std::vector<float> y = run_rows(ln, config, layout, bias, stream);
        long equal = 0;
        for (size_t i = 0; i < y.size(); ++i) equal += y[i] == bias[i % bias.size()];
        CHECK(equal == static_cast<long>(y.size()));
      }
    }
  }
}

// A streamed cluster combines its CTAs' M2 about CTA 0's mean: for a row of 2^20 whose first
// sixteenth is 0 and the rest B = 2^55.5, that sum is 2^129 while M2 itself is 2^126.9. Summed
// unscaled it overflowed and the row came out as its bias; PyTorch normalizes it (var = 15/256
// B^2). B is exact in bf16 too, so the float64 reference sees what the kernel reads.
TEST_CASE("layer_norm: streamed clusters normalize rows near the top of the float range") {
  if (runtime().props().cc() < 90) return;  // no clusters
  kjit::Stream stream(runtime());
  constexpr float kB = 0x1.6ap+55f;
  for (DType t : {DType::F32, DType::BF16}) {
    const int v = 16 / static_cast<int>(kjit::dtype_size(t));
    const int64_t width = int64_t{1} << 20;
    const LayerNormConfig config{512, 512, v, 4, 8, true};
    CAPTURE(config.describe());
    const std::vector<float> bias =
        kjit::host::random_normal(t, static_cast<size_t>(width), 0.f, 1.f, 78);
    const LayerNormProblem ln = LayerNormProblem::layer_norm(3, width, t);
    CAPTURE(ln.describe());
    const std::vector<float> y = run_rows(
        ln, config, [](int64_t i, int64_t w) { return i < w / 16 ? 0.f : kB; }, bias, stream);
    const double mean = 15.0 / 16 * kB, sd = std::sqrt(15.0 / 256) * kB;
    const double tol = t == DType::F32 ? 1e-4 : 3e-2;
    long close = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      const int64_t col = static_cast<int64_t>(i) % width;
      const double x = col < width / 16 ? 0.0 : kB;
      const double want = (x - mean) / sd * 1.5 + bias[static_cast<size_t>(col)];
      close += std::fabs(y[i] - want) <= tol * (1 + std::fabs(want));
    }
    CHECK(close == static_cast<long>(y.size()));
  }
}

TEST_CASE("layer_norm: no rows enqueue nothing; forced configs are checked") {
  kjit::Stream stream(runtime());
  Case empty = plain(NormKind::LayerNorm, 0, 512, DType::F32);
  const Result r = run_case(empty, stream, 1);
  CHECK(r.touched == 0);
  empty.config = LayerNormConfig{128, 128, 4, 1, 1, false};  // holds 512 elements: fine
  CHECK(run_case(empty, stream, 1).touched == 0);
  empty.config->iters = 0;
  CHECK_KJIT_ERROR(run_case(empty, stream, 1), kjit::Errc::InvalidArgument);
  Case wrong = plain(NormKind::LayerNorm, 4, 512, DType::F32);
  wrong.config = LayerNormConfig{128, 128, 4, 1, 1, false};
  check_result(wrong, run_case(wrong, stream, 2));
  wrong.config->vec = 1;  // 128 threads x 1 element: half the row
  CHECK_KJIT_ERROR(run_case(wrong, stream, 2), kjit::Errc::InvalidArgument);
  // rms_norm is the call for RMSNorm problems only.
  auto& rt = runtime();
  kjit::DeviceBuffer buf(rt, 4096);
  void* p = reinterpret_cast<void*>(buf.ptr());
  CHECK_KJIT_ERROR(kjit::ops::rms_norm(rt, LayerNormProblem::layer_norm(1, 8, DType::F32), p,
                                       nullptr, p, nullptr, p, {}, stream),
                   kjit::Errc::InvalidArgument);
}

TEST_CASE("layer_norm: graphs replay prepared plans; an unprepared one is a CaptureCompile") {
  auto& rt = runtime();
  kjit::Stream stream(rt);
  LayerNormProblem p = LayerNormProblem::rms_norm(64, 4096, DType::BF16);
  p.residual = true;
  p.activation = Activation::SiLU;
  const size_t n = 64 * 4096;
  kjit::ops::prepare_layer_norm(rt, p);
  const auto x = kjit::host::random_normal(DType::BF16, n, 0.f, 1.f, kjit_test::seed());
  const auto res = kjit::host::random_normal(DType::BF16, n, 0.f, 1.f, kjit_test::seed() + 1);
  const auto w = kjit::host::random_normal(DType::BF16, 4096, 1.f, 0.2f, 3);
  auto dx = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(DType::BF16, x));
  auto dr = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(DType::BF16, res));
  auto dw = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(DType::BF16, w));
  kjit::DeviceBuffer dy(rt, n * 2), ds(rt, n * 2);
  auto ptr = [](const kjit::DeviceBuffer& b) { return reinterpret_cast<void*>(b.ptr()); };
  kjit::Graph graph(rt, stream, [&] {
    kjit::ops::rms_norm(rt, p, ptr(dx), ptr(dr), ptr(dy), ptr(ds), ptr(dw), {}, stream);
  });
  dy.fill_bytes(0xFF);
  graph.launch(stream);
  stream.synchronize();
  const auto ref = kjit::reference::layer_norm(p, x, &res, w.data(), nullptr, 1e-5);
  const auto got = kjit::host::from_bytes(DType::BF16, dy.to_host<unsigned char>(n * 2));
  const auto e = kjit::host::compare(got, ref.y, 1e-2, 1e-2);
  CHECK(e.nonfinite == 0);
  CHECK(e.allclose);
  // A config no call has loaded: capturing it would compile.
  kjit::ops::LayerNormOptions fresh;
  fresh.config = LayerNormConfig{96, 96, 1, 43, 1, false};
  bool thrown = false;
  try {
    kjit::Graph g(rt, stream, [&] {
      kjit::ops::rms_norm(rt, p, ptr(dx), ptr(dr), ptr(dy), ptr(ds), ptr(dw), fresh, stream);
    });
  } catch (const kjit::Error& err) {
    thrown = true;
    CHECK(err.code() == kjit::Errc::CaptureCompile);
    CHECK(std::string(err.what()).find("prepare_layer_norm") != std::string::npos);
  }
  CHECK(thrown);
  // The stream is usable again, and prepare makes the same call capturable.
  kjit::ops::prepare_layer_norm(rt, p, fresh);
  kjit::Graph ok(rt, stream, [&] {
    kjit::ops::rms_norm(rt, p, ptr(dx), ptr(dr), ptr(dy), ptr(ds), ptr(dw), fresh, stream);
  });
  ok.launch(stream);
  stream.synchronize();
}

// The C ABI (libkjit_c: its own process-wide runtime, in the same primary context): a call
// captured into a graph before kjit_layer_norm_prepare is refused as capture_compile (that
// runtime has loaded nothing for this problem); after it, the same call captures, and the graph
// computes the norm. The prepare's text is the C++ prepare's config.
TEST_CASE("layer_norm through the C ABI: kjit_layer_norm_prepare makes the call capturable") {
  auto& rt = runtime();
  kjit::Stream stream(rt);
  LayerNormProblem p = LayerNormProblem::rms_norm(6, 1000, DType::BF16);  // no other test's
  p.param_dtype = DType::F32;
  p.activation = Activation::GeluTanh;
  const size_t n = 6 * 1000;
  const auto x = kjit::host::random_normal(DType::BF16, n, 0.f, 1.f, kjit_test::seed());
  const auto w = kjit::host::random_normal(DType::F32, 1000, 1.f, 0.2f, 3);
  auto dx = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(DType::BF16, x));
  auto dw = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(DType::F32, w));
  kjit::DeviceBuffer dy(rt, n * 2);
  auto call = [&] {
    return kjit_layer_norm("rms_norm", "bf16", "f32", 6, 1000, KJIT_ACTIVATION_GELU_TANH,
                           reinterpret_cast<void*>(dx.ptr()), nullptr,
                           reinterpret_cast<void*>(dy.ptr()), nullptr,
                           reinterpret_cast<void*>(dw.ptr()), nullptr, 1e-6f,
                           static_cast<CUstream>(stream), 0, nullptr);
  };
  int rc = -1;
  {
    kjit::Graph refused(rt, stream, [&] { rc = call(); });
  }
  CHECK(rc == KJIT_ERR_CAPTURE_COMPILE);
  CHECK(std::string(kjit_last_error()).find("prepare_layer_norm") != std::string::npos);
  char text[128];
  REQUIRE(kjit_layer_norm_prepare("rms_norm", "bf16", "f32", 6, 1000, KJIT_ACTIVATION_GELU_TANH, 0,
                                  1, 0, 0, nullptr, text, sizeof text) == KJIT_OK);
  CHECK(std::string(text) == kjit::ops::prepare_layer_norm(rt, p).describe());
  kjit::Graph graph(rt, stream, [&] { rc = call(); });
  CHECK(rc == KJIT_OK);
  dy.fill_bytes(0xFF);
  graph.launch(stream);
  stream.synchronize();
  const auto ref = kjit::reference::layer_norm(p, x, nullptr, w.data(), nullptr, 1e-6);
  const auto got = kjit::host::from_bytes(DType::BF16, dy.to_host<unsigned char>(n * 2));
  const auto e = kjit::host::compare(got, ref.y, 1e-2, 1e-2);
  CHECK(e.nonfinite == 0);
  CHECK(e.allclose);
  // The prepare built the in-place plan too: y over x captures as well.
  rc = -1;
  kjit::Graph in_place(rt, stream, [&] {
    rc = kjit_layer_norm("rms_norm", "bf16", "f32", 6, 1000, KJIT_ACTIVATION_GELU_TANH,
                         reinterpret_cast<void*>(dx.ptr()), nullptr,
                         reinterpret_cast<void*>(dx.ptr()), nullptr,
                         reinterpret_cast<void*>(dw.ptr()), nullptr, 1e-6f,
                         static_cast<CUstream>(stream), 0, nullptr);
  });
  CHECK(rc == KJIT_OK);
}

// The C ABI's autotune argument, as the C++ option. Each C function given autotune = 1 tunes its
// problem and stores the choice in the disk cache both runtimes use (the default one), so that a
// fresh C++ runtime's tuned prepare recalls it: it loads only the chosen config's kernels (with
// the in-place one: at most 2), where without a stored choice it would load every candidate.
// Widths from the seed: a problem no earlier run stored. After an untuned prepare, a tuned call
// captured is refused (its plan is another, and tuning times kernels: never inside a capture;
// a call that dropped the argument would find the untuned plan); after the tuned prepare, the
// tuned call captured computes the norm.
TEST_CASE("layer_norm through the C ABI: autotune tunes, stores and runs the tuned plan") {
  auto& rt = runtime();
  kjit::Stream stream(rt);
  const int64_t rows = 5, width = 2048 + 8 * static_cast<int64_t>(kjit_test::seed() % 4096);
  CAPTURE(width);
  const size_t n = static_cast<size_t>(rows * width);
  auto bytes = [](const std::vector<float>& v) { return kjit::host::to_bytes(DType::F16, v); };
  auto f16 = [&](const std::vector<float>& v) {  // what the kernel reads, for the reference
    return kjit::host::from_bytes(DType::F16, bytes(v));
  };
  const auto x = f16(kjit::host::random_normal(DType::F16, n, 2.f, 1.f, kjit_test::seed()));
  const auto w = f16(kjit::host::random_normal(DType::F16, width, 1.f, 0.2f, 7));
  const auto b = f16(kjit::host::random_normal(DType::F16, width, 0.f, 0.2f, 8));
  auto dx = kjit::DeviceBuffer::from_host(rt, bytes(x));
  auto dw = kjit::DeviceBuffer::from_host(rt, bytes(w));
  auto db = kjit::DeviceBuffer::from_host(rt, bytes(b));
  kjit::DeviceBuffer dy(rt, n * 2);
  auto ptr = [](const kjit::DeviceBuffer& d) { return reinterpret_cast<void*>(d.ptr()); };
  // The problem of width wd (y over the first rows x wd of dy).
  auto call = [&](int64_t wd) {
    return kjit_layer_norm("layer_norm", "f16", nullptr, rows, wd, KJIT_ACTIVATION_NONE, ptr(dx),
                           nullptr, ptr(dy), nullptr, ptr(dw), ptr(db), 1e-5f,
                           static_cast<CUstream>(stream), 1, nullptr);
  };
  kjit::ops::LayerNormOptions tuned;
  tuned.autotune = true;
  // A fresh runtime's tuned prepare of width wd: its config, and how many kernels it loaded.
  auto recall = [&](int64_t wd) {
    kjit::Runtime fresh;
    const LayerNormProblem q = LayerNormProblem::layer_norm(rows, wd, DType::F16);
    const std::string c = kjit::ops::prepare_layer_norm(fresh, q, tuned).describe();
    const bool rw = fresh.compiler().disk_cache().mode() == kjit::cache::Mode::ReadWrite;
    return std::make_tuple(c, fresh.stats().kernels_loaded, rw);
  };
  const LayerNormProblem p = LayerNormProblem::layer_norm(rows, width, DType::F16);
  REQUIRE(kjit::ops::layer_norm_candidates(p, kjit::Target::of(rt), true).size() > 2);
  char text[128];
  REQUIRE(kjit_layer_norm_prepare("layer_norm", "f16", nullptr, rows, width, KJIT_ACTIVATION_NONE,
                                  0, 1, 1, 0, nullptr, text, sizeof text) == KJIT_OK);
  const char* env = std::getenv("KJIT_AUTOTUNE");
  int rc = -1;
  if (!(env && std::string(env) == "1")) {  // (where it is, the untuned prepare tuned too)
    kjit::Graph refused(rt, stream, [&] { rc = call(width); });
    CHECK(rc == KJIT_ERR_CAPTURE_COMPILE);
  }
  REQUIRE(kjit_layer_norm_prepare("layer_norm", "f16", nullptr, rows, width, KJIT_ACTIVATION_NONE,
                                  0, 1, 1, 1, nullptr, text, sizeof text) == KJIT_OK);
  const auto prepared = recall(width);
  CHECK(std::get<0>(prepared) == text);
  if (std::get<2>(prepared)) CHECK(std::get<1>(prepared) <= 2);
  kjit::Graph graph(rt, stream, [&] { rc = call(width); });
  REQUIRE(rc == KJIT_OK);
  dy.fill_bytes(0xFF);
  graph.launch(stream);
  stream.synchronize();
  const auto ref = kjit::reference::layer_norm(p, x, nullptr, w.data(), b.data(), 1e-5);
  const auto got = kjit::host::from_bytes(DType::F16, dy.to_host<unsigned char>(n * 2));
  const auto e = kjit::host::compare(got, ref.y, 1e-2, 1e-2);
  CHECK(e.nonfinite == 0);
  CHECK(e.allclose);
  // The call alone (no prepare) on a problem of its own tunes and stores as well.
  REQUIRE(call(width - 8) == KJIT_OK);
  stream.synchronize();
  const auto called = recall(width - 8);
  if (std::get<2>(called)) CHECK(std::get<1>(called) <= 2);
  if (!std::get<2>(prepared)) MESSAGE("the default disk cache is not writable: nothing to recall");
}

// The C ABI's config argument pins the call to a config's text, as LayerNormOptions::config
// does. First, on a problem nothing has used (width from the seed), a prepare given a
// candidate's text builds that plan and no other: the call given the text captures into a graph
// and the call without it (the heuristic's plan) is refused as capture_compile; a prepare or a
// call that dropped the argument would turn both around. Then for every candidate the prepare
// writes the text back and the call computes the norm. A text the op reads but cannot run the
// problem with is refused, naming the config.
TEST_CASE("layer_norm through the C ABI: config pins every candidate") {
  auto& rt = runtime();
  kjit::Stream stream(rt);
  const int64_t rows = 37, width = 3000 + 8 * static_cast<int64_t>(kjit_test::seed() % 64);
  CAPTURE(width);
  const size_t n = static_cast<size_t>(rows * width);
  const LayerNormProblem p = LayerNormProblem::layer_norm(rows, width, DType::F32);
  const auto x = kjit::host::random_normal(DType::F32, n, 1.f, 2.f, kjit_test::seed());
  const auto w = kjit::host::random_normal(DType::F32, width, 1.f, 0.2f, 11);
  const auto b = kjit::host::random_normal(DType::F32, width, 0.f, 0.2f, 12);
  const auto ref = kjit::reference::layer_norm(p, x, nullptr, w.data(), b.data(), 1e-5);
  auto bytes = [](const std::vector<float>& v) { return kjit::host::to_bytes(DType::F32, v); };
  auto dx = kjit::DeviceBuffer::from_host(rt, bytes(x));
  auto dw = kjit::DeviceBuffer::from_host(rt, bytes(w));
  auto db = kjit::DeviceBuffer::from_host(rt, bytes(b));
  kjit::DeviceBuffer dy(rt, n * 4);
  auto ptr = [](const kjit::DeviceBuffer& d) { return reinterpret_cast<void*>(d.ptr()); };
  const auto cands = kjit::ops::layer_norm_candidates(p, kjit::Target::of(rt), true);
  REQUIRE(cands.size() > 2);
  const std::string heuristic =
      kjit::ops::layer_norm_heuristic(p, kjit::Target::of(rt), true).describe();
  const std::string pin = cands[1].describe();
  REQUIRE(pin != heuristic);
  char pinned_text[128] = "";
  REQUIRE(kjit_layer_norm_prepare("layer_norm", "f32", nullptr, rows, width, KJIT_ACTIVATION_NONE,
                                  0, 1, 1, 0, pin.c_str(), pinned_text,
                                  sizeof pinned_text) == KJIT_OK);
  CHECK(std::string(pinned_text) == pin);
  auto c_call = [&](const char* config) {
    return kjit_layer_norm("layer_norm", "f32", nullptr, rows, width, KJIT_ACTIVATION_NONE, ptr(dx),
                           nullptr, ptr(dy), nullptr, ptr(dw), ptr(db), 1e-5f,
                           static_cast<CUstream>(stream), 0, config);
  };
  int rc = -1;
  {
    kjit::Graph refused(rt, stream, [&] { rc = c_call(nullptr); });
  }
  CHECK(rc == KJIT_ERR_CAPTURE_COMPILE);
  kjit::Graph graph(rt, stream, [&] { rc = c_call(pin.c_str()); });
  REQUIRE(rc == KJIT_OK);
  dy.fill_bytes(0xFF);
  graph.launch(stream);
  stream.synchronize();
  const auto first = kjit::host::compare(dy.to_host<float>(n), ref.y, 1e-4, 1e-4);
  CHECK(first.nonfinite == 0);
  CHECK(first.allclose);
  int differ = 0;
  for (const LayerNormConfig& c : cands) {
    const std::string want = c.describe();
    CAPTURE(want);
    char text[128] = "";
    REQUIRE(kjit_layer_norm_prepare("layer_norm", "f32", nullptr, rows, width, KJIT_ACTIVATION_NONE,
                                    0, 1, 1, 0, want.c_str(), text, sizeof text) == KJIT_OK);
    CHECK(std::string(text) == want);
    differ += want != heuristic;
    dy.fill_bytes(0xFF);
    REQUIRE(kjit_layer_norm("layer_norm", "f32", nullptr, rows, width, KJIT_ACTIVATION_NONE,
                            ptr(dx), nullptr, ptr(dy), nullptr, ptr(dw), ptr(db), 1e-5f,
                            static_cast<CUstream>(stream), 0, want.c_str()) == KJIT_OK);
    stream.synchronize();
    const auto e = kjit::host::compare(dy.to_host<float>(n), ref.y, 1e-4, 1e-4);
    CHECK(e.nonfinite == 0);
    CHECK(e.allclose);
  }
  CHECK(differ > 0);
  // A text of the op that cannot run this row: 32 threads of 1 vector do not cover it.
  CHECK(kjit_layer_norm("layer_norm", "f32", nullptr, rows, width, KJIT_ACTIVATION_NONE, ptr(dx),
                        nullptr, ptr(dy), nullptr, ptr(dw), ptr(db), 1e-5f,
                        static_cast<CUstream>(stream), 0,
                        "threads=32 team=32 vec=4 iters=1 cluster=1") == KJIT_ERR_INVALID_ARGUMENT);
  CHECK(std::string(kjit_last_error()).find("config") != std::string::npos);
}

// Rows too long for a cluster, few of them: CTAs on every SM meeting through global memory, held
// (2^20) and streamed (2^22), with residuals, activations, in place, unaligned, NaN and inf rows
// next to finite ones, rows far from zero, and forced configs of every CTA count up to one past
// the row's vectors (CTAs with nothing to hold still meet the others).
TEST_CASE("layer_norm: cooperative rows, held and streamed, NaN, inf, in place and far from zero") {
  if (runtime().props().cc() < 70) return;  // acquire/release barriers
  kjit::Stream stream(runtime());
  std::vector<Case> cases;
  int coop = 0;
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (NormKind k : {NormKind::LayerNorm, NormKind::RMSNorm}) {
      cases.push_back(plain(k, 1, 1 << 20, t));
      Case streamed = plain(k, 1, 1 << 22, t);
      streamed.p.residual = true;
      streamed.sum_on = 1;  // sum written over x
      cases.push_back(streamed);
      Case in_place = plain(k, 3, 300000, t);
      in_place.y_on_x = true;
      in_place.p.activation = Activation::GeluErf;
      cases.push_back(in_place);
      Case odd = plain(k, 2, (1 << 19) + 3, t);  // scalar accesses
      odd.offset = 1;
      cases.push_back(odd);
      for (int special : {1, 2, 3, 5, 9}) {
        Case c = plain(k, 4, 1 << 19, t);  // rows 0 and 3 NaN or inf, rows 1 and 2 finite
        c.special = special;
        cases.push_back(c);
      }
      Case far = plain(k, 2, 1 << 20, t);
      far.x_mean = 100.f;  // 100 standard deviations off (fp32's mean is within 1e-5 of that)
      far.x_std = 1.f;
      cases.push_back(far);
      for (int parts : {2, 3, 7, 33}) {  // forced: held and streamed shares, 64 threads
        for (bool stream_it : {false, true}) {
          Case c = plain(k, parts % 3 + 1, 1000 + parts, t);
          LayerNormConfig f{64, 64, 1, 1, 1, stream_it};
          f.coop = parts;
          f.iters =
              stream_it ? 2 : static_cast<int>((1000 + parts + 64 * parts - 1) / (64 * parts));
          c.config = f;
          c.p.residual = parts % 2 == 1;
          cases.push_back(c);
        }
      }
      Case empty_ctas = plain(k, 2, 5, t);  // 6 CTAs, one vector each, the last with none
      LayerNormConfig f{32, 32, 1, 1, 1, false};
      f.coop = 6;
      empty_ctas.config = f;
      cases.push_back(empty_ctas);
    }
  preload(cases);
  for (size_t i = 0; i < cases.size(); ++i) {
    kjit::ops::LayerNormOptions opt;
    opt.config = cases[i].config;
    // The plan's own config (no case's width takes another with unaligned pointers).
    coop += kjit::ops::prepare_layer_norm(runtime(), cases[i].p, opt).coop > 1;
    check_result(cases[i], run_case(cases[i], stream, kjit_test::seed() + 9000 + i));
  }
  CHECK(coop == static_cast<int>(cases.size()));  // every case ran a cooperative config
}

// Few, small cases of every LayerNorm kernel family (warp teams, a CTA per row, single-CTA
// streams with and without a residual (the latter keeps its row in L1 and LayerNorm re-reads it),
// held clusters with replicas and streamed clusters on sm_90, held and streamed cooperative rows
// on sm_70 and newer): sized for tools/sanitize.sh, whose tools run kernels 10-100x slower.
TEST_CASE("layer_norm: one small case per kernel family") {
  kjit::Stream stream(runtime());
  const int cc = runtime().props().cc();
  std::vector<Case> cases;
  for (DType t : {DType::F32, DType::BF16})
    for (NormKind k : {NormKind::LayerNorm, NormKind::RMSNorm}) {
      const int vec = 16 / static_cast<int>(kjit::dtype_size(t));
      cases.push_back(plain(k, 5, 768, t));     // a warp team per row
      cases.push_back(plain(k, 300, 8192, t));  // a CTA per row (enough rows for every SM)
      for (bool residual : {false, true}) {     // a single-CTA stream, forced
        Case c = plain(k, 2, 4096, t);
        c.config = LayerNormConfig{256, 256, vec, 4, 1, true};
        c.p.residual = residual;
        cases.push_back(c);
      }
      if (cc >= 90) {
        cases.push_back(plain(k, 1, 65536, t));  // a held cluster with replicas
        Case c = plain(k, 2, 16384, t);          // a streamed cluster of 4, forced
        c.config = LayerNormConfig{256, 256, vec, 2, 4, true};
        cases.push_back(c);
      }
      if (cc < 70) continue;
      cases.push_back(plain(k, 1, 1 << 19, t));  // rule 6: a CTA per SM
      for (bool stream_it : {false, true}) {
        Case c = plain(k, 2, 3000, t);
        LayerNormConfig f{64, 64, 1, stream_it ? 2 : 16, 1, stream_it};
        f.coop = 3;
        c.config = f;
        c.special = stream_it ? 1 : 0;  // a NaN row next to a finite one
        cases.push_back(c);
      }
    }
  for (size_t i = 0; i < cases.size(); ++i)
    check_result(cases[i], run_case(cases[i], stream, kjit_test::seed() + 9400 + i));
}

// Autotuning rows that take cooperative candidates times them with workspaces of its own (its
// timing runs on a stream of its own), and keeps one. On a fresh disk cache, so that the
// candidates are timed here, not recalled; a second runtime then recalls the stored choice
// (stored only when no candidate failed in a way that may pass, such as a CUDA error), and the
// choice, pinned, is checked against float64.
TEST_CASE("layer_norm: autotuning a long row times its cooperative candidates and runs one") {
  if (runtime().props().cc() < 70) return;
  kjit::Stream stream(runtime());
  const kjit::Target target = kjit::Target::of(runtime());
  int i = 0;
  for (Case c : {plain(NormKind::LayerNorm, 1, 1 << 20, DType::F32),
                 plain(NormKind::RMSNorm, 3, (1 << 20) + 8, DType::BF16)}) {
    CAPTURE(c.p.describe());
    const auto cands = kjit::ops::layer_norm_candidates(c.p, target, true);
    CHECK(std::count_if(cands.begin(), cands.end(),
                        [](const LayerNormConfig& f) { return f.coop > 1; }) >= 3);
    kjit_test::TempDir dir;
    kjit::RuntimeOptions o;
    o.cache.dir = dir.path;
    kjit::ops::LayerNormOptions opt;
    opt.autotune = true;
    kjit::Runtime tuning(o);
    const LayerNormConfig tuned = kjit::ops::prepare_layer_norm(tuning, c.p, opt);
    const uint64_t tuning_loaded = tuning.stats().kernels_loaded;
    kjit::Runtime recalling(o);
    const LayerNormConfig recalled = kjit::ops::prepare_layer_norm(recalling, c.p, opt);
    CHECK(recalled == tuned);
    CHECK(recalling.stats().kernels_loaded <= 3);  // the choice, its fallback, its in-place twin
    CHECK(tuning_loaded > recalling.stats().kernels_loaded);
    CHECK(std::any_of(cands.begin(), cands.end(),
                      [&](const LayerNormConfig& f) { return f == tuned; }));
    MESSAGE(c.p.describe() << ": tuned " << tuned.describe() << " of " << cands.size()
                           << " candidates, loading " << tuning_loaded << " kernels (heuristic "
                           << cands[0].describe() << ")");
    c.config = tuned;
    check_result(c, run_case(c, stream, kjit_test::seed() + 9500 + i++));
  }
}

// A cooperative plan inside graphs: on a stream without a workspace the capture runs its
// fallback; reserve_layer_norm_workspace gives the stream one, and the graph then runs the
// cooperative kernel itself (the same bits as a call outside the capture), replay after replay;
// a pinned cooperative config has no fallback, so capturing it unreserved is a CaptureCompile.
TEST_CASE("layer_norm: cooperative plans in graphs: fallback, reserved workspace, replays") {
  auto& rt = runtime();
  if (rt.props().cc() < 70) return;
  const LayerNormProblem p = LayerNormProblem::layer_norm(2, 1 << 20, DType::F32);
  const size_t n = 2 << 20;
  const LayerNormConfig chosen = kjit::ops::prepare_layer_norm(rt, p);
  REQUIRE(chosen.coop > 1);
  const auto x = kjit::host::random_normal(DType::F32, n, 1.f, 2.f, kjit_test::seed());
  const auto w = kjit::host::random_normal(DType::F32, n / 2, 1.f, 0.5f, 5);
  const auto b = kjit::host::random_normal(DType::F32, n / 2, 0.f, 0.5f, 6);
  auto dx = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(DType::F32, x));
  auto dw = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(DType::F32, w));
  auto db = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(DType::F32, b));
  kjit::DeviceBuffer dy(rt, n * 4);
  auto ptr = [](const kjit::DeviceBuffer& buf) { return reinterpret_cast<void*>(buf.ptr()); };
  auto call = [&](CUstream s, const kjit::ops::LayerNormOptions& o) {
    kjit::ops::layer_norm(rt, p, ptr(dx), nullptr, ptr(dy), nullptr, ptr(dw), ptr(db), o, s);
  };
  const auto ref = kjit::reference::layer_norm(p, x, nullptr, w.data(), b.data(), 1e-5);
  auto result = [&] {
    return kjit::host::from_bytes(DType::F32, dy.to_host<unsigned char>(n * 4));
  };
  auto check = [&](const std::vector<float>& got) {
    const auto e = kjit::host::compare(got, ref.y, 1e-4, 1e-4);
    CHECK(e.nonfinite == 0);
    CHECK(e.allclose);
  };
  kjit::Stream fresh(rt), reserved(rt), pinned(rt);
  {  // no workspace on `fresh`: the fallback, still right
    kjit::Graph g(rt, fresh, [&] { call(fresh, {}); });
    dy.fill_bytes(0xFF);
    g.launch(fresh);
    fresh.synchronize();
    check(result());
  }
  CHECK(kjit::ops::reserve_layer_norm_workspace(rt, p, {}, reserved) == 2 * chosen.coop * 16 + 16);
  dy.fill_bytes(0xFF);
  call(reserved, {});  // outside a capture: the cooperative kernel
  reserved.synchronize();
  const std::vector<float> eager = result();
  check(eager);
  kjit::Graph g(rt, reserved, [&] { call(reserved, {}); });
  for (int k = 0; k < 5; ++k) {
    dy.fill_bytes(0xFF);
    g.launch(reserved);
    g.launch(reserved);  // back to back: the barrier words are left at 0 for the next launch
    reserved.synchronize();
    CHECK(result() == eager);
  }
  kjit::ops::LayerNormOptions pin;
  pin.config = chosen;
  kjit::ops::prepare_layer_norm(rt, p, pin);
  bool thrown = false;
  try {
    kjit::Graph bad(rt, pinned, [&] { call(pinned, pin); });
  } catch (const kjit::Error& err) {
    thrown = true;
    CHECK(err.code() == kjit::Errc::CaptureCompile);
    CHECK(std::string(err.what()).find("reserve_layer_norm_workspace") != std::string::npos);
  }
  CHECK(thrown);
  kjit::ops::reserve_layer_norm_workspace(rt, p, pin, pinned);
  kjit::Graph ok(rt, pinned, [&] { call(pinned, pin); });
  dy.fill_bytes(0xFF);
  ok.launch(pinned);
  pinned.synchronize();
  CHECK(result() == eager);
}

// One long row runs with replicas (each writes a share of the row) where no output aliases an
// input, and without them in place; prepare loads both, so either call can be captured. A
// replica writing over x while another still reads it would make the in-place result wrong.
TEST_CASE("layer_norm: one row with replicas, and in place without, both prepared for capture") {
  auto& rt = runtime();
  kjit::Stream stream(rt);
  LayerNormProblem p = LayerNormProblem::layer_norm(1, 65536, DType::F32);
  p.residual = true;
  const size_t n = 65536;
  const LayerNormConfig chosen = kjit::ops::prepare_layer_norm(rt, p);
  CAPTURE(chosen.describe());
  if (rt.props().sm_count >= 32) CHECK(chosen.replicas > 1);  // rule 5: 16 CTAs leave SMs idle
  const auto x = kjit::host::random_normal(DType::F32, n, 3.f, 2.f, kjit_test::seed());
  const auto res = kjit::host::random_normal(DType::F32, n, 0.f, 1.f, kjit_test::seed() + 1);
  const auto w = kjit::host::random_normal(DType::F32, n, 1.f, 0.3f, 5);
  const auto b = kjit::host::random_normal(DType::F32, n, 0.f, 0.3f, 6);
  const auto ref = kjit::reference::layer_norm(p, x, &res, w.data(), b.data(), 1e-5);
  auto bytes = [](const std::vector<float>& v) { return kjit::host::to_bytes(DType::F32, v); };
  auto dw = kjit::DeviceBuffer::from_host(rt, bytes(w)),
       db = kjit::DeviceBuffer::from_host(rt, bytes(b));
  auto ptr = [](const kjit::DeviceBuffer& d) { return reinterpret_cast<void*>(d.ptr()); };
  for (int mode = 0; mode < 3; ++mode) {  // 0: own outputs, 1: y over x, 2: sum over residual
    CAPTURE(mode);
    auto dx = kjit::DeviceBuffer::from_host(rt, bytes(x));
    auto dr = kjit::DeviceBuffer::from_host(rt, bytes(res));
    kjit::DeviceBuffer dy(rt, n * 4), ds(rt, n * 4);
    dy.fill_bytes(0xFF);
    ds.fill_bytes(0xFF);
    void* y = mode == 1 ? ptr(dx) : ptr(dy);
    void* s = mode == 2 ? ptr(dr) : ptr(ds);
    kjit::Graph graph(rt, stream, [&] {
      kjit::ops::layer_norm(rt, p, ptr(dx), ptr(dr), y, s, ptr(dw), ptr(db), {}, stream);
    });
    graph.launch(stream);
    stream.synchronize();
    const auto got =
        kjit::host::from_bytes(DType::F32, mode == 1 ? dx.to_host<unsigned char>(n * 4)
                                                     : dy.to_host<unsigned char>(n * 4));
    const auto sum =
        kjit::host::from_bytes(DType::F32, mode == 2 ? dr.to_host<unsigned char>(n * 4)
                                                     : ds.to_host<unsigned char>(n * 4));
    const auto e = kjit::host::compare(got, ref.y, 1e-4, 1e-4);
    CHECK(e.nonfinite == 0);
    CHECK_MESSAGE(e.allclose, "max abs error " << e.max_abs);
    CHECK(sum == ref.sum);
  }
}

// On sm_90 calls launch with programmatic dependent launch, and grids of at most one wave let the
// next kernel be scheduled as they start: each call must still wait for the one before. Six
// dependent calls ping-pong between two buffers; a call that read too early would see older data.
TEST_CASE("layer_norm: back-to-back dependent calls on one stream see each other's outputs") {
  auto& rt = runtime();
  kjit::Stream stream(rt);
  for (const auto& [rows, width] :
       {std::pair<int64_t, int64_t>{1, 65536}, {3, 4096}, {4096, 768}}) {
    const LayerNormProblem p = LayerNormProblem::layer_norm(rows, width, DType::F32);
    CAPTURE(p.describe());
    const size_t n = static_cast<size_t>(rows * width), w = static_cast<size_t>(width);
    std::vector<float> x = kjit::host::random_normal(DType::F32, n, 1.f, 2.f, kjit_test::seed());
    const auto wt = kjit::host::random_normal(DType::F32, w, 1.f, 0.5f, 7);
    const auto bs = kjit::host::random_normal(DType::F32, w, 0.f, 0.5f, 8);
    kjit::DeviceBuffer bufs[2] = {kjit::DeviceBuffer::from_host(rt, x),
                                  kjit::DeviceBuffer(rt, n * 4)};
    bufs[1].fill_bytes(0xFF);
    const auto dw = kjit::DeviceBuffer::from_host(rt, wt),
               db = kjit::DeviceBuffer::from_host(rt, bs);
    auto ptr = [](const kjit::DeviceBuffer& b) { return reinterpret_cast<void*>(b.ptr()); };
    constexpr int kCalls = 6;
    for (int i = 0; i < kCalls; ++i)
      kjit::ops::layer_norm(rt, p, ptr(bufs[i % 2]), nullptr, ptr(bufs[(i + 1) % 2]), nullptr,
                            ptr(dw), ptr(db), {}, stream);
    stream.synchronize();
    // The reference chain, rounded to fp32 between calls as the device stores it.
    std::vector<double> ref;
    for (int i = 0; i < kCalls; ++i) {
      ref = kjit::reference::layer_norm(p, x, nullptr, wt.data(), bs.data(), 1e-5).y;
      for (size_t k = 0; k < n; ++k) x[k] = static_cast<float>(ref[k]);
    }
    const auto got = bufs[kCalls % 2].to_host<float>(n);
    const auto e = kjit::host::compare(got, ref, 1e-4, 1e-4);
    CHECK(e.nonfinite == 0);
    CHECK(e.rel_l2 <= 1e-5);
    CHECK_MESSAGE(e.allclose, "max abs error " << e.max_abs);
  }
}

// Cluster configs replayed back to back in a graph: RMSNorm f32 1x65536 with threads=512 iters=2
// cluster=16 faulted on the H200 in such replays (with and without programmatic launch) until the
// cluster barriers reconverged their warps (kjit/cluster.cuh). Every cluster candidate of that
// problem, 4 replays of 64 calls.
TEST_CASE("layer_norm: every cluster candidate survives back-to-back graph replays") {
  auto& rt = runtime();
  if (rt.props().cc_major < 9) return;
  kjit::Stream stream(rt);
  const LayerNormProblem p = LayerNormProblem::rms_norm(1, 65536, DType::F32);
  const size_t n = 65536;
  const auto x = kjit::host::random_normal(DType::F32, n, 1.f, 2.f, kjit_test::seed());
  const auto wt = kjit::host::random_normal(DType::F32, n, 1.f, 0.5f, 9);
  const auto dx = kjit::DeviceBuffer::from_host(rt, x), dw = kjit::DeviceBuffer::from_host(rt, wt);
  kjit::DeviceBuffer dy(rt, n * 4);
  auto ptr = [](const kjit::DeviceBuffer& b) { return reinterpret_cast<void*>(b.ptr()); };
  const auto ref = kjit::reference::layer_norm(p, x, nullptr, wt.data(), nullptr, 1e-5).y;
  int clustered = 0;
  for (const LayerNormConfig& c : kjit::ops::layer_norm_candidates(p, kjit::Target::of(rt), true)) {
    if (c.cluster == 1) continue;
    ++clustered;
    CAPTURE(c.describe());
    kjit::ops::LayerNormOptions opt;
    opt.config = c;
    kjit::ops::prepare_layer_norm(rt, p, opt);
    dy.fill_bytes(0xFF);
    kjit::Graph graph(rt, stream, [&] {
      for (int i = 0; i < 64; ++i)
        kjit::ops::rms_norm(rt, p, ptr(dx), nullptr, ptr(dy), nullptr, ptr(dw), opt, stream);
    });
    for (int r = 0; r < 4; ++r) graph.launch(stream);
    stream.synchronize();
    const auto e = kjit::host::compare(dy.to_host<float>(n), ref, 1e-4, 1e-4);
    CHECK(e.nonfinite == 0);
    CHECK(e.allclose);
  }
  CHECK(clustered >= 4);
}

TEST_CASE("layer_norm: autotune picks a candidate, and a new runtime reuses the stored choice" *
          doctest::test_suite("host_logic")) {
  kjit_test::TempDir dir;
  kjit::RuntimeOptions o;
  o.cache.dir = dir.path;
  kjit::ops::LayerNormOptions opt;
  opt.autotune = true;
  for (const LayerNormProblem& p : {LayerNormProblem::rms_norm(32768, 128, DType::F32),
                                    LayerNormProblem::layer_norm(1, 65536, DType::BF16)}) {
    CAPTURE(p.describe());
    auto prepare = [&] {
      kjit::Runtime rt(o);  // a new process, as far as plans go
      const auto t0 = std::chrono::steady_clock::now();
      const LayerNormConfig c = kjit::ops::prepare_layer_norm(rt, p, opt);
      return std::make_pair(
          c, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    };
    // Not structured bindings: clang 14 cannot capture one in the lambda below.
    const auto first = prepare(), second = prepare();
    const LayerNormConfig& tuned = first.first;
    const LayerNormConfig& again = second.first;
    const double tune_s = first.second, reuse_s = second.second;
    CHECK(again.describe() == tuned.describe());
    const auto cands = kjit::ops::layer_norm_candidates(p, kjit::Target::of(runtime()), true);
    CHECK(std::any_of(cands.begin(), cands.end(),
                      [&](const LayerNormConfig& c) { return c.describe() == tuned.describe(); }));
    MESSAGE(p.describe() << ": " << tuned.describe() << " of " << cands.size() << " (heuristic "
                         << cands[0].describe() << "); tuned in " << tune_s << " s, reused in "
                         << reuse_s << " s");
    // A third runtime finds the stored choice but has loaded nothing: the tuned call captured
    // unprepared is refused as CaptureCompile, not compiled (and loaded) inside the capture.
    kjit::Runtime rt3(o);
    kjit::Stream s3(rt3);
    const size_t esz = kjit::dtype_size(p.dtype), n = static_cast<size_t>(p.rows * p.width);
    kjit::DeviceBuffer dx(rt3, n * esz), dy(rt3, n * esz), dw(rt3, p.width * esz),
        db(rt3, p.width * esz);
    auto ptr = [](const kjit::DeviceBuffer& b) { return reinterpret_cast<void*>(b.ptr()); };
    std::string refusal;
    try {
      kjit::Graph g(rt3, s3, [&] {
        kjit::ops::layer_norm(rt3, p, ptr(dx), nullptr, ptr(dy), nullptr, ptr(dw),
                              p.has_bias ? ptr(db) : nullptr, opt, s3);
      });
    } catch (const kjit::Error& e) {
      refusal = kjit::errc_name(e.code());
    }
    CHECK(refusal == kjit::errc_name(kjit::Errc::CaptureCompile));
  }
}
