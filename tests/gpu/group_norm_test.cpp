// GroupNorm + activation against a float64 CPU reference over random shapes in every regime.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "gpu_env.hpp"
#include "group_norm_families.hpp"
#include "kjit/host_math.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/reference.hpp"
#include "test_util.hpp"

using kjit::DType;
using kjit::ops::Activation;
using kjit::ops::GroupNormConfig;
using F = kjit::ops::GroupNormFamily;
using kjit::ops::GroupNormProblem;
using kjit::ops::Layout;
using kjit_test::runtime;

namespace {

// A kernel's name without namespace or template arguments, from a Spec's instantiation
// ("kjit::gn_pipe_fwd<float, ...>") or a mangled name ("_ZN4kjit11gn_pipe_fwdIfL...").
std::string kernel_base(const std::string& name) {
  const std::string ns = "kjit::", mangled = "_ZN4kjit";
  if (name.rfind(ns, 0) == 0) return name.substr(ns.size(), name.find('<') - ns.size());
  if (name.rfind(mangled, 0) != 0) return name;
  size_t digits = mangled.size();
  while (digits < name.size() && std::isdigit(static_cast<unsigned char>(name[digits]))) ++digits;
  if (digits == mangled.size()) return name;
  const size_t len = std::stoul(name.substr(mangled.size(), digits - mangled.size()));
  return name.substr(digits, len);
}

// The kernels config c runs for p, sorted ("gn_partials", "gn_apply", ...).
std::vector<std::string> kernels_of(const GroupNormProblem& p, const GroupNormConfig& c) {
  std::vector<std::string> names;
  for (const kjit::Spec& s : kjit::ops::group_norm_specs(p, c))
    names.push_back(kernel_base(s.instantiation()));
  std::sort(names.begin(), names.end());
  return names;
}

// The seed workload's SiLU half the time, none a quarter, one of the others the rest.
Activation random_activation() {
  const Activation others[] = {Activation::GeluTanh, Activation::GeluErf, Activation::ReLU};
  const int64_t r = kjit_test::uniform(0, 7);
  return r < 4 ? Activation::SiLU : r < 6 ? Activation::None : others[kjit_test::uniform(0, 2)];
}

struct Case {
  GroupNormProblem p;
  bool offset = false;  // pointers one element past a 16-byte boundary
  bool in_place = false;
  float eps = 1e-5f;
  bool autotune = false;
  std::optional<kjit::ops::GroupNormConfig> config;  // forced instead of the heuristic's
};

struct Result {
  kjit::host::ErrorStats err;
  std::string config;
};

// `stream` may be CU_STREAM_PER_THREAD, which no kjit::Stream synchronizes: then the whole
// context is waited for.
Result run_case(const Case& cs, CUstream stream, uint64_t seed, kjit::Runtime& rt = runtime()) {
  const GroupNormProblem& p = cs.p;
  using kjit::host::random_normal;
  const size_t n = static_cast<size_t>(p.N * p.C * p.S), esz = kjit::dtype_size(p.dtype);
  // An offset mean tests the two-pass variance.
  auto x = random_normal(p.dtype, n, 3.f, 2.f, seed);
  auto w = random_normal(p.param_dtype, static_cast<size_t>(p.C), 0.5f, 1.f, seed ^ 0x5bd1e995);
  auto b = random_normal(p.param_dtype, static_cast<size_t>(p.C), -0.25f, 1.f, seed ^ 0x27d4eb2f);
  const size_t off = cs.offset ? esz : 0;
  kjit::DeviceBuffer dx(rt, n * esz + 16), dy(rt, n * esz + 16);
  kjit::DeviceBuffer dw(rt, static_cast<size_t>(p.C) * 4 + 16),
      db(rt, static_cast<size_t>(p.C) * 4 + 16);
  auto xb = kjit::host::to_bytes(p.dtype, x);
  dx.fill_bytes(0xFF);  // the guard bytes around x: in place, a write outside y shows there
  dx.upload(xb.data(), xb.size(), off);
  dy.fill_bytes(0xFF);  // NaN in every float format: unwritten outputs fail
  auto wb = kjit::host::to_bytes(p.param_dtype, w), bb = kjit::host::to_bytes(p.param_dtype, b);
  dw.upload(wb.data(), wb.size());
  db.upload(bb.data(), bb.size());
  void* yptr = reinterpret_cast<void*>((cs.in_place ? dx.ptr() : dy.ptr()) + off);
  kjit::ops::GroupNormOptions opt;
  opt.eps = cs.eps;
  opt.autotune = cs.autotune;
  opt.config = cs.config;
  kjit::ops::group_norm(rt, p, reinterpret_cast<void*>(dx.ptr() + off), yptr,
                        p.has_weight ? reinterpret_cast<void*>(dw.ptr()) : nullptr,
                        p.has_bias ? reinterpret_cast<void*>(db.ptr()) : nullptr, opt, stream);
  kjit::synchronize(rt);
  // The whole buffer: the bytes before y (the offset) and the 16 after it must still be 0xFF.
  const kjit::DeviceBuffer& out = cs.in_place ? dx : dy;
  std::vector<unsigned char> all(out.bytes());
  out.download(all.data(), all.size());
  size_t touched = 0;
  for (size_t i = 0; i < all.size(); ++i)
    touched += (i < off || i >= off + n * esz) && all[i] != 0xFF;
  CHECK_MESSAGE(touched == 0, touched << " guard bytes around y were written");
  const std::vector<unsigned char> yb(all.begin() + static_cast<long>(off),
                                      all.begin() + static_cast<long>(off + n * esz));
  const std::vector<float> y = kjit::host::from_bytes(p.dtype, yb);
  auto ref = kjit::reference::group_norm(p, x, p.has_weight ? w.data() : nullptr,
                                         p.has_bias ? b.data() : nullptr, cs.eps);
  // Groups whose spread is tiny against their mean lose precision in any fp32 kernel. (16-bit
  // outputs are judged by rel L2 alone, at 1e-2, which no such slack approaches: no exemption.)
  std::vector<double> slack;
  if (p.dtype == DType::F32)
    slack = kjit::reference::group_norm_fp32_slack(p, x, p.has_weight ? w.data() : nullptr, cs.eps);
  Result r;
  const double tol = p.dtype == DType::F32 ? 1e-4 : 1e-2;
  r.err = kjit::host::compare(y, ref, tol, tol, slack.empty() ? nullptr : &slack);
  r.config = cs.config ? cs.config->describe()
                       : kjit::ops::group_norm_heuristic(p, rt.props().cc(), !cs.offset).describe();
  return r;
}

void check_result(const Case& cs, const Result& r) {
  CAPTURE(cs.p.describe());
  CAPTURE(r.config);
  CAPTURE(cs.offset);
  CAPTURE(cs.in_place);
  CAPTURE(r.err.ill_conditioned);
  CHECK(r.err.nonfinite == 0);
  CHECK(r.err.rel_l2 <= (cs.p.dtype == DType::F32 ? 1e-5 : 1e-2));
  CHECK_MESSAGE(r.err.allclose, "max abs error " << r.err.max_abs);  // at 1e-4 (fp32) or 1e-2
}

// y against its float64 reference as check_result judges it: fp32 rel L2 <= 1e-5 and
// allclose(1e-4), 16-bit rel L2 <= 1e-2 and allclose(1e-2), and no element left unwritten.
void check_output(DType t, const std::vector<float>& y, const std::vector<double>& ref) {
  const double tol = t == DType::F32 ? 1e-4 : 1e-2;
  const auto err = kjit::host::compare(y, ref, tol, tol);
  CHECK(err.nonfinite == 0);
  CHECK(err.rel_l2 <= (t == DType::F32 ? 1e-5 : 1e-2));
  CHECK_MESSAGE(err.allclose, "max abs error " << err.max_abs);
}

Case random_case(DType t) {
  using kjit_test::uniform;
  Case c;
  GroupNormProblem& p = c.p;
  p.dtype = t;
  p.param_dtype = uniform(0, 3) == 0 ? DType::F32 : t;
  p.layout = uniform(0, 3) == 0 ? Layout::NHWC : Layout::NCHW;
  p.groups = uniform(0, 5) == 0 ? 1 : uniform(1, 48);
  const int kind = static_cast<int>(uniform(0, 9));
  int64_t cg = kind == 0 ? 1 : uniform(1, 40);
  // Spatial size: none, tiny, prime, 1-D and 3-D products, and a few large groups.
  const int64_t spatial[] = {1, 2, 7, 49, 97, 196, 576, 1021, 4096, 13 * 17 * 3};
  p.S = spatial[uniform(0, 9)];
  if (kind == 9) {  // large groups: a cluster per group, or streaming
    cg = uniform(4, 64);
    p.S = uniform(0, 1) ? 4096 : 16384 + 3;
    p.groups = uniform(1, 4);
  }
  p.C = p.groups * cg;
  p.N = uniform(0, 4) == 0 ? 1 : uniform(1, 8);
  while (p.N > 1 && p.N * p.C * p.S > (int64_t{1} << 22)) p.N /= 2;
  p.activation = random_activation();
  p.has_weight = uniform(0, 5) != 0;
  p.has_bias = uniform(0, 5) != 0;
  c.offset = uniform(0, 5) == 0;
  c.in_place = uniform(0, 9) == 0;
  c.eps = uniform(0, 1) ? 1e-5f : 1e-3f;
  return c;
}

// Compiles what each case runs (its forced config, or the heuristic's) on parallel threads:
// NVRTC dominates the suite's time, so cases are prepared first and then run one at a time.
void prepare_all(const std::vector<Case>& cases) {
  const unsigned workers = std::max(2u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::future<void>> jobs;
  for (unsigned w = 0; w < workers; ++w)
    jobs.push_back(std::async(std::launch::async, [&, w] {
      for (size_t i = w; i < cases.size(); i += workers) {
        kjit::ops::GroupNormOptions opt;
        opt.config = cases[i].config;
        kjit::ops::prepare_group_norm(runtime(), cases[i].p, opt);
      }
    }));
  for (auto& j : jobs) j.get();
}

void run_random(DType t, int count) {
  std::vector<Case> cases;
  for (int i = 0; i < count; ++i) cases.push_back(random_case(t));
  prepare_all(cases);
  kjit::Stream stream(runtime());
  int failures = 0;
  long long ill = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    Result r = run_case(cases[i], stream, kjit_test::seed() + i);
    check_result(cases[i], r);
    if (r.err.nonfinite || r.err.rel_l2 > (t == DType::F32 ? 1e-5 : 1e-2)) ++failures;
    ill += r.err.ill_conditioned;
  }
  MESSAGE(count << " random " << std::string(kjit::dtype_name(t)) << " shapes, " << failures
                << " failed; " << ill << " ill-conditioned elements checked with their slack");
}

Case named(std::vector<int64_t> shape, int64_t g, DType t, Layout l = Layout::NCHW) {
  Case c;
  c.p = GroupNormProblem::from_shape(shape, g, t, l);
  return c;
}

// Runs and checks every autotune candidate `pick` accepts for each case (candidates for the
// case's pointer alignment); returns how many ran. A cooperative candidate whose grid this device
// cannot hold at once is refused by name ("cannot be scheduled") and counted in *unschedulable.
template <class Pick>
int run_candidates(const std::vector<Case>& cases, Pick pick, uint64_t seed_offset,
                   int* unschedulable = nullptr) {
  kjit::Stream stream(runtime());
  int runs = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    for (const auto& cfg :
         kjit::ops::group_norm_candidates(cases[i].p, runtime().props().cc(), !cases[i].offset)) {
      if (!pick(cfg)) continue;
      Case c = cases[i];
      c.config = cfg;
      Result r;
      try {
        r = run_case(c, stream, kjit_test::seed() + seed_offset + i);
      } catch (const kjit::Error& e) {
        const bool refused = cfg.cooperative() && unschedulable &&
                             std::string(e.what()).find("cannot be scheduled") != std::string::npos;
        if (!refused) throw;
        ++*unschedulable;
        continue;
      }
      check_result(c, r);
      ++runs;
    }
  }
  return runs;
}

}  // namespace

TEST_CASE("group_norm: the seed shape (8x256x24x24, G=32, fp32, affine, silu)") {
  kjit::Stream stream(runtime());
  Case c = named({8, 256, 24, 24}, 32, DType::F32);
  Result r = run_case(c, stream, kjit_test::seed());
  MESSAGE("seed: rel L2 " << r.err.rel_l2 << ", max abs " << r.err.max_abs << ", " << r.config);
  check_result(c, r);
}

TEST_CASE("group_norm: named edge shapes in every regime") {
  kjit::Stream stream(runtime());
  std::vector<Case> cases = {
      named({4, 32, 7, 7}, 8, DType::F32),
      named({64, 128, 1, 1}, 32, DType::F32),
      named({1, 128, 256, 256}, 32, DType::F32),
      named({1, 128, 256, 256}, 32, DType::BF16),
      named({1, 64, 256, 256}, 16, DType::F32),  // two kernels (sm_90)
      named({2, 320, 64, 64}, 32, DType::F16),
      named({1, 64, 512, 512}, 1, DType::F32),    // pipelined, one group (sm_90)
      named({1, 128, 512, 512}, 32, DType::F32),  // pipelined (sm_90)
      named({3, 6, 17}, 3, DType::F32),
      named({2, 12}, 4, DType::F32),
      named({1, 1, 1, 1}, 1, DType::F32),
      named({2, 8, 3, 5, 7}, 2, DType::BF16),
      named({2, 16, 9, 9, 64}, 16, DType::F32, Layout::NHWC),
      named({1, 8, 8, 4096}, 32, DType::BF16, Layout::NHWC),
  };
  Case unaligned = named({8, 256, 24, 24}, 32, DType::F32);
  unaligned.offset = true;
  cases.push_back(unaligned);
  Case inplace = named({2, 64, 33, 33}, 8, DType::F16);
  inplace.in_place = true;
  cases.push_back(inplace);
  Case plain = named({4, 64, 20, 20}, 16, DType::F32);
  plain.p.has_weight = plain.p.has_bias = false;
  plain.p.activation = Activation::None;
  cases.push_back(plain);
  for (const Case& c : cases) check_result(c, run_case(c, stream, kjit_test::seed()));
}

// On sm_90 kjit launches with programmatic dependent launch: a call may be scheduled while the
// one before still runs, and must wait before it reads that call's output. Six dependent calls
// ping-pong between two buffers; a call that read too early would see the older contents.
TEST_CASE("group_norm: back-to-back dependent calls on one stream see each other's outputs") {
  auto& rt = runtime();
  kjit::Stream stream(rt);
  // The last one runs two kernels on sm_90: the next call's partials must not overwrite the
  // workspace before this call's apply kernel has read it.
  for (const auto& [shape, groups] : {std::pair{std::vector<int64_t>{8, 256, 24, 24}, 32},
                                      {std::vector<int64_t>{2, 320, 64, 64}, 32},
                                      {std::vector<int64_t>{4, 32, 7, 7}, 8},
                                      {std::vector<int64_t>{1, 128, 256, 256}, 32},
                                      {std::vector<int64_t>{1, 64, 256, 256}, 16}}) {
    const GroupNormProblem p = GroupNormProblem::from_shape(shape, groups, DType::F32);
    CAPTURE(p.describe());
    const size_t n = static_cast<size_t>(p.N * p.C * p.S);
    std::vector<float> x = kjit::host::random_normal(DType::F32, n, 1.f, 2.f, kjit_test::seed());
    const auto w = kjit::host::random_normal(DType::F32, static_cast<size_t>(p.C), 1.f, 0.5f, 7);
    const auto b = kjit::host::random_normal(DType::F32, static_cast<size_t>(p.C), 0.f, 0.5f, 8);
    kjit::DeviceBuffer bufs[2] = {
        kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(DType::F32, x)),
        kjit::DeviceBuffer(rt, n * 4)};
    bufs[1].fill_bytes(0xFF);
    const auto dw = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(DType::F32, w));
    const auto db = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(DType::F32, b));
    kjit::synchronize(rt);
    constexpr int kCalls = 6;
    for (int i = 0; i < kCalls; ++i)
      kjit::ops::group_norm(rt, p, reinterpret_cast<void*>(bufs[i % 2].ptr()),
                            reinterpret_cast<void*>(bufs[(i + 1) % 2].ptr()),
                            reinterpret_cast<void*>(dw.ptr()), reinterpret_cast<void*>(db.ptr()),
                            {}, stream);
    stream.synchronize();
    // The reference chain, rounded to fp32 between calls as the device stores it.
    std::vector<double> ref;
    for (int i = 0; i < kCalls; ++i) {
      ref = kjit::reference::group_norm(p, x, w.data(), b.data(), 1e-5);
      for (size_t k = 0; k < n; ++k) x[k] = static_cast<float>(ref[k]);
    }
    const auto got =
        kjit::host::from_bytes(DType::F32, bufs[kCalls % 2].to_host<unsigned char>(n * 4));
    check_output(DType::F32, got, ref);
  }
}

// A fresh host thread has no current CUDA context, and CU_STREAM_PER_THREAD names a stream of
// the current context: the op must make its own context current before it asks the driver
// anything about the stream (a first call loads its kernel, after a capture check).
TEST_CASE("group_norm: a fresh thread on the per-thread default stream") {
  Case cs = named({3, 48, 11, 13}, 6, DType::F32);
  cs.eps = 3e-5f;
  auto r = std::async(std::launch::async,
                      [&] { return run_case(cs, CU_STREAM_PER_THREAD, kjit_test::seed()); });
  check_result(cs, r.get());
}

// A split plan on the per-thread stream of a fresh thread: its workspace is the thread's own
// (StreamWorkspaces keys CU_STREAM_PER_THREAD by thread), allocated on the first call.
TEST_CASE("group_norm: a split plan from fresh threads on the per-thread default stream") {
  if (runtime().props().cc() < 90) return;  // the heuristic splits on sm_90 only
  Case cs = named({1, 64, 256, 256}, 16, DType::BF16);
  // The plan's config, not just the heuristic's choice.
  REQUIRE(kjit::ops::prepare_group_norm(runtime(), cs.p).family == F::Split);
  std::vector<std::future<Result>> runs;
  for (int i = 0; i < 3; ++i)
    runs.push_back(std::async(std::launch::async, [&, i] {
      return run_case(cs, CU_STREAM_PER_THREAD, kjit_test::seed() + static_cast<uint64_t>(i));
    }));
  for (auto& r : runs) check_result(cs, r.get());
}

// Several threads enqueueing split plans on one shared stream: the pair passes its partials from
// one kernel to the next through the stream's workspace, and another thread's pair must not
// land between the two.
TEST_CASE("group_norm: split plans from several threads on one stream") {
  auto& rt = runtime();
  if (rt.props().cc() < 90) return;  // the heuristic splits on sm_90 only
  const GroupNormProblem p = GroupNormProblem::from_shape({1, 64, 256, 256}, 16, DType::BF16);
  REQUIRE(kjit::ops::prepare_group_norm(rt, p).family == F::Split);
  constexpr int kThreads = 3, kRounds = 16;  // a y per round: every call is checked
  const size_t n = static_cast<size_t>(p.N * p.C * p.S);
  const auto w = kjit::host::random_normal(p.dtype, 64, 1.f, 0.5f, 71);
  const auto b = kjit::host::random_normal(p.dtype, 64, 0.f, 0.5f, 72);
  const auto dw = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(p.dtype, w));
  const auto db = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(p.dtype, b));
  std::vector<std::vector<double>> refs;
  std::vector<kjit::DeviceBuffer> xs, ys;
  for (int t = 0; t < kThreads; ++t) {
    // Different means per thread: a pair that read another thread's partials is far off.
    const auto x = kjit::host::random_normal(p.dtype, n, 4.f * static_cast<float>(t) - 3.f, 1.f,
                                             kjit_test::seed() + 73 + static_cast<uint64_t>(t));
    refs.push_back(kjit::reference::group_norm(p, x, w.data(), b.data(), 1e-5));
    xs.push_back(kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(p.dtype, x)));
    for (int r = 0; r < kRounds; ++r) {
      ys.emplace_back(rt, n * kjit::dtype_size(p.dtype));
      ys.back().fill_bytes(0xFF);
    }
  }
  kjit::synchronize(rt);
  kjit::Stream shared(rt);
  std::atomic<int> arrived{0};
  auto worker = [&](int t) {
    arrived.fetch_add(1);
    while (arrived.load() < kThreads) std::this_thread::yield();
    for (int r = 0; r < kRounds; ++r)
      kjit::ops::group_norm(rt, p, reinterpret_cast<void*>(xs[t].ptr()),
                            reinterpret_cast<void*>(ys[static_cast<size_t>(t * kRounds + r)].ptr()),
                            reinterpret_cast<void*>(dw.ptr()), reinterpret_cast<void*>(db.ptr()),
                            {}, shared);
  };
  std::vector<std::future<void>> jobs;
  for (int t = 0; t < kThreads; ++t) jobs.push_back(std::async(std::launch::async, worker, t));
  for (auto& j : jobs) j.get();
  shared.synchronize();
  for (int t = 0; t < kThreads; ++t)
    for (int r = 0; r < kRounds; ++r) {
      CAPTURE(t);
      CAPTURE(r);
      const auto y = kjit::host::from_bytes(
          p.dtype, ys[static_cast<size_t>(t * kRounds + r)].to_host<unsigned char>(
                       n * kjit::dtype_size(p.dtype)));
      check_output(p.dtype, y, refs[static_cast<size_t>(t)]);
    }
}

// A constant group normalizes to exactly 0: y = act(bias). Folding the mean into the shift
// (x * a + (b - mean * a), as PyTorch's CUDA affine path does) would round that shift by up to
// 2^-24 * |mean| * rstd, ~0.2 before the activation for a group of 12288 and eps = 1e-5: far
// outside the tolerance. kjit's kernels subtract the mean first in every dtype (gn::Fold), and a
// thread's mean is a correctly rounded division, so it is exactly 12288 whatever the count.
TEST_CASE("group_norm: constant groups of large values come out as act(bias) in every dtype") {
  auto& rt = runtime();
  kjit::Stream stream(rt);
  struct Shape {
    std::vector<int64_t> dims;
    int64_t groups;
    Layout layout;
  };
  const std::vector<Shape> shapes = {
      {{2, 64, 8, 8}, 8, Layout::NCHW},        // register kernel
      {{2, 12, 331}, 2, Layout::NCHW},         // per-thread counts a fast divide gets wrong
      {{4, 6, 1009}, 3, Layout::NCHW},         // (12288 * n / n != 12288 for some n)
      {{2, 9, 9, 64}, 8, Layout::NHWC},        // register kernel, channels last
      {{1, 64, 64, 64}, 2, Layout::NCHW},      // staged (sm_90)
      {{1, 128, 256, 256}, 32, Layout::NCHW},  // few large groups: streamed (sm_90)
      {{1, 64, 256, 256}, 16, Layout::NCHW}};  // fewer: two kernels (sm_90)
  for (const auto& [shape, groups, layout] : shapes) {
    for (DType t : {DType::F32, DType::BF16, DType::F16}) {
      for (Activation act : {Activation::SiLU, Activation::None}) {
        GroupNormProblem p = GroupNormProblem::from_shape(shape, groups, t, layout);
        p.activation = act;
        const std::string what =
            p.describe() + ", " + kjit::ops::group_norm_heuristic(p, rt.props().cc()).describe();
        CAPTURE(what);
        const size_t n = static_cast<size_t>(p.N * p.C * p.S), esz = kjit::dtype_size(t);
        const std::vector<float> x(n, 12288.f);  // exact in every dtype
        const auto w = kjit::host::random_normal(t, static_cast<size_t>(p.C), 1.f, 0.5f, 11);
        const auto b = kjit::host::random_normal(t, static_cast<size_t>(p.C), 0.f, 1.f, 12);
        const auto dx = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(t, x));
        const auto dw = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(t, w));
        const auto db = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(t, b));
        kjit::DeviceBuffer dy(rt, n * esz);
        dy.fill_bytes(0xFF);
        kjit::ops::group_norm(rt, p, reinterpret_cast<void*>(dx.ptr()),
                              reinterpret_cast<void*>(dy.ptr()), reinterpret_cast<void*>(dw.ptr()),
                              reinterpret_cast<void*>(db.ptr()), {}, stream);
        stream.synchronize();
        const auto y = kjit::host::from_bytes(t, dy.to_host<unsigned char>(n * esz));
        const auto ref = kjit::reference::group_norm(p, x, w.data(), b.data(), 1e-5);
        const double tol = t == DType::F32 ? 1e-5 : 1e-2;
        const auto err = kjit::host::compare(y, ref, tol, tol);
        CHECK(err.nonfinite == 0);
        CHECK_MESSAGE(err.allclose, "max abs error " << err.max_abs);
      }
    }
  }
}

// Every activation in every dtype through each kernel family's config
// (tests/support/group_norm_families.hpp): each template's store path with each policy, the
// 16-bit ones with the policy's fold into scale and shift, against the float64 reference.
TEST_CASE("group_norm activation: every activation in every dtype through every kernel family") {
  const int cc = runtime().props().cc();
  std::vector<Case> cases;
  for (const kjit_test::GnFamily& f : kjit_test::gn_families()) {
    if (cc < f.min_cc) continue;
    for (DType t : {DType::F32, DType::BF16, DType::F16})
      for (Activation a : {Activation::None, Activation::SiLU, Activation::GeluTanh,
                           Activation::GeluErf, Activation::ReLU}) {
        Case c;
        c.p = kjit_test::gn_family_problem(f, t, a);
        c.config = kjit_test::gn_family_config(f, c.p, cc);
        CAPTURE(f.name);
        CAPTURE(c.p.describe());
        REQUIRE(c.config.has_value());
        cases.push_back(c);
      }
  }
  prepare_all(cases);
  kjit::Stream stream(runtime());
  for (size_t i = 0; i < cases.size(); ++i)
    check_result(cases[i], run_case(cases[i], stream, kjit_test::seed() + 7000 + i));
  MESSAGE(cases.size() << " (family, dtype, activation) runs");
  CHECK(cases.size() >= (cc >= 90 ? 135u : 90u));
}

TEST_CASE("group_norm: 300 random fp32 shapes") {
  run_random(DType::F32, 300);
}
TEST_CASE("group_norm: 300 random bf16 shapes") {
  run_random(DType::BF16, 300);
}
TEST_CASE("group_norm: 300 random fp16 shapes") {
  run_random(DType::F16, 300);
}

namespace {

std::vector<Case> smem_cases() {
  using kjit_test::uniform;
  std::vector<Case> cases;
  // Named: more groups than resident CTAs, partial last slices (vectors not a multiple of the
  // cluster), a vector across two channels (S % 8 != 0), no affine with C/G = 1.
  cases.push_back(named({32, 64, 64, 64}, 32, DType::F32));
  cases.push_back(named({4, 96, 37, 41}, 3, DType::BF16));
  cases.push_back(named({2, 8, 128, 129}, 8, DType::F16));
  cases.back().p.has_weight = cases.back().p.has_bias = false;
  // fp32 groups of 1.4 and 2.6 MB: 16-CTA clusters with 8 or 16 vectors per thread held and
  // slices of up to 256 KB (over 128 KB only for 4-byte types), partial last slices.
  cases.push_back(named({1, 9, 40000}, 1, DType::F32));
  cases.push_back(named({1, 20, 32772}, 1, DType::F32));
  for (int i = 0; i < 12; ++i) {
    const DType t = i % 3 == 0 ? DType::F32 : i % 3 == 1 ? DType::BF16 : DType::F16;
    const int64_t g = uniform(1, 8), cg = uniform(1, 24), n = uniform(1, 6);
    const int64_t s = uniform(1024, 16384) / 8 * 8;
    Case c = named({n, g * cg, s}, g, t);
    c.p.param_dtype = uniform(0, 1) ? DType::F32 : t;
    c.p.activation = random_activation();
    c.in_place = uniform(0, 4) == 0;
    cases.push_back(c);
  }
  return cases;
}

}  // namespace

TEST_CASE("group_norm: every shared-memory-staged candidate over named and random shapes") {
  if (runtime().props().cc() < 90) return;
  const int runs = run_candidates(
      smem_cases(), [](const GroupNormConfig& c) { return c.family == F::Smem; }, 1000);
  CHECK(runs >= 40);
  MESSAGE(runs << " smem-staged (case, config) runs");
}

// The same problems staged with the group's CTAs meeting through global memory in one
// cooperative launch: slices up to 64 per group, partial last slices (the fp32 groups of 1.4
// and 2.6 MB), in place.
TEST_CASE("group_norm: every staged cooperative candidate over named and random shapes") {
  if (runtime().props().cc() < 90) return;
  int unschedulable = 0;
  const int runs = run_candidates(
      smem_cases(), [](const GroupNormConfig& c) { return c.family == F::SmemCoop; }, 1500,
      &unschedulable);
  CHECK(runs >= 20);
  MESSAGE(runs << " staged cooperative (case, config) runs, " << unschedulable
               << " refused as larger than the device holds at once");
}

namespace {

// A random NCHW problem in fp32, bf16 or fp16 (i % 3) whose groups hold more than min_group
// elements and up to about max_group, with random parameter type, activation, bias, in place and
// alignment.
Case random_large_groups(int i, int64_t min_group, int64_t max_group) {
  using kjit_test::uniform;
  const DType t = i % 3 == 0 ? DType::F32 : i % 3 == 1 ? DType::BF16 : DType::F16;
  const int64_t g = uniform(1, 6), cg = uniform(1, 8), n = uniform(1, 3);
  Case c = named({n, g * cg, uniform(min_group / cg + 1, max_group / cg)}, g, t);
  c.p.param_dtype = uniform(0, 1) ? DType::F32 : t;
  c.p.activation = random_activation();
  c.p.has_bias = uniform(0, 4) != 0;
  c.in_place = uniform(0, 4) == 0;
  c.offset = uniform(0, 4) == 0;
  return c;
}

// Split problems: a short last chunk, a vector across two channels (S % 8 != 0), unaligned
// pointers (scalar accesses), no affine with C/G = 1, in place, then random ones.
std::vector<Case> split_cases() {
  std::vector<Case> cases;
  // Named: a short last chunk, a vector across two channels (S % 8 != 0), unaligned pointers
  // (scalar accesses), no affine with C/G = 1, in place.
  cases.push_back(named({2, 64, 128, 128}, 4, DType::F32));
  cases.push_back(named({3, 40, 5001}, 5, DType::BF16));
  cases.push_back(named({1, 24, 17, 611}, 3, DType::F16));
  cases.back().offset = true;
  cases.push_back(named({2, 8, 40000}, 8, DType::F32));
  cases.back().p.has_weight = cases.back().p.has_bias = false;
  cases.back().in_place = true;
  for (int i = 0; i < 8; ++i) cases.push_back(random_large_groups(i, 32768, 200000));
  return cases;
}

}  // namespace

TEST_CASE("group_norm: every split (two-kernel) candidate over named and random shapes") {
  const int runs = run_candidates(
      split_cases(), [](const GroupNormConfig& c) { return c.family == F::Split; }, 2000);
  CHECK(runs >= 24);  // 20 from the named cases; at most 64 chunks per group limits the rest
  MESSAGE(runs << " split (case, config) runs");
}

// The same problems through every cooperative candidate the device can hold at once. Each run
// uses the stream's barrier words after the previous one (other chunk counts, other problems):
// a barrier that did not return to zero would hang or mix up statistics here.
TEST_CASE("group_norm: every cooperative split candidate over named and random shapes") {
  int unschedulable = 0;
  const int runs = run_candidates(
      split_cases(), [](const GroupNormConfig& c) { return c.cooperative(); }, 3000,
      &unschedulable);
  // (staged coop candidates of the aligned ones included)
  CHECK(runs >= 20);
  MESSAGE(runs << " cooperative (case, config) runs, " << unschedulable
               << " refused as larger than the device holds at once");
}

namespace {

// Pipelined problems (groups of >= 32768 vectors): more chunks than the grid holds at once, so S
// and A items interleave (4x32x256x256, 1x128x512x512), a short last chunk and a vector across
// two channels (S % 8 != 0), unaligned pointers, no affine, in place, then random ones.
std::vector<Case> pipe_cases() {
  std::vector<Case> cases;
  cases.push_back(named({4, 32, 256, 256}, 8, DType::F32));
  cases.push_back(named({1, 128, 512, 512}, 32, DType::F32));
  cases.push_back(named({1, 24, 40003}, 3, DType::BF16));
  cases.push_back(named({1, 12, 65537}, 1, DType::F16));
  cases.back().offset = true;
  cases.push_back(named({2, 8, 40000}, 2, DType::F32));
  cases.back().p.has_weight = cases.back().p.has_bias = false;
  cases.back().in_place = true;
  for (int i = 0; i < 6; ++i) {
    const int64_t min_group = 32768 * (i % 3 == 0 ? 4 : 8);  // 32768 vectors of the dtype
    cases.push_back(random_large_groups(i, min_group, min_group + 400000));
  }
  return cases;
}

}  // namespace

TEST_CASE("group_norm: every pipelined candidate over named and random shapes") {
  if (runtime().props().cc() < 70) return;
  const int runs = run_candidates(
      pipe_cases(), [](const GroupNormConfig& c) { return c.family == F::Pipe; }, 4000);
  CHECK(runs >= 30);
  MESSAGE(runs << " pipelined (case, config) runs");
}

namespace {

// Sets KJIT_GN_PIPE_GRID and KJIT_GN_PIPE_LAG (null: unset) while it lives, so that a failing
// check cannot leave them set for the tests after it.
struct PipeEnv {
  PipeEnv(const char* grid, const char* lag) {
    set("KJIT_GN_PIPE_GRID", grid);
    set("KJIT_GN_PIPE_LAG", lag);
  }
  ~PipeEnv() {
    ::unsetenv("KJIT_GN_PIPE_GRID");
    ::unsetenv("KJIT_GN_PIPE_LAG");
  }
  static void set(const char* name, const char* v) {
    if (v)
      ::setenv(name, v, 1);
    else
      ::unsetenv(name);
  }
};

// Runs p through its pipe candidate of `threads` x `iters` (per_group chunks a group) over every
// forced grid and lag, two inputs back to back on one stream per plan; returns the plans run.
int run_forced_pipe(const GroupNormProblem& p, int threads, int iters, int64_t per_group,
                    const std::vector<const char*>& grids, const std::vector<const char*>& lags) {
  GroupNormConfig cfg;
  for (const GroupNormConfig& c : kjit::ops::group_norm_candidates(p, runtime().props().cc()))
    if (c.family == F::Pipe && c.threads == threads && c.iters == iters) cfg = c;
  REQUIRE(cfg.family == F::Pipe);
  REQUIRE(kjit::ops::group_norm_split_chunks(p, cfg) == per_group);
  const size_t n = static_cast<size_t>(p.N * p.C * p.S), c = static_cast<size_t>(p.C);
  std::vector<kjit::DeviceBuffer> dx;
  std::vector<std::vector<double>> ref;
  const auto w = kjit::host::random_normal(DType::F32, c, 1.f, 0.5f, 91);
  const auto b = kjit::host::random_normal(DType::F32, c, 0.f, 0.5f, 92);
  for (int i = 0; i < 2; ++i) {
    const auto x = kjit::host::random_normal(DType::F32, n, i ? -2.f : 3.f, i ? 0.5f : 2.f,
                                             kjit_test::seed() + 93 + i);
    dx.push_back(kjit::DeviceBuffer::from_host(runtime(), kjit::host::to_bytes(DType::F32, x)));
    ref.push_back(kjit::reference::group_norm(p, x, w.data(), b.data(), 1e-5));
  }
  const auto dw = kjit::DeviceBuffer::from_host(runtime(), kjit::host::to_bytes(DType::F32, w));
  const auto db = kjit::DeviceBuffer::from_host(runtime(), kjit::host::to_bytes(DType::F32, b));
  std::vector<kjit::DeviceBuffer> dy;
  for (int i = 0; i < 2; ++i) dy.emplace_back(runtime(), n * 4);
  kjit::ops::GroupNormOptions opt;
  opt.config = cfg;
  int runs = 0;
  for (const char* grid : grids) {
    for (const char* lag : lags) {
      const PipeEnv env(grid, lag);
      kjit::Runtime rt;  // plans are per runtime: this one's is built with the variables above
      kjit::Stream stream(rt);
      for (auto& y : dy) y.fill_bytes(0xFF);
      kjit::synchronize(runtime());
      for (int i = 0; i < 2; ++i)
        kjit::ops::group_norm(
            rt, p, reinterpret_cast<void*>(dx[i].ptr()), reinterpret_cast<void*>(dy[i].ptr()),
            reinterpret_cast<void*>(dw.ptr()), reinterpret_cast<void*>(db.ptr()), opt, stream);
      stream.synchronize();
      for (int i = 0; i < 2; ++i) {
        const auto y = kjit::host::from_bytes(DType::F32, dy[i].to_host<unsigned char>(n * 4));
        CAPTURE(p.describe());
        CAPTURE(grid);
        CAPTURE(lag);
        CAPTURE(i);
        check_output(DType::F32, y, ref[i]);
      }
      ++runs;
    }
  }
  return runs;
}

}  // namespace

// The pipelined kernel with grids and lags the heuristic never picks (KJIT_GN_PIPE_GRID,
// KJIT_GN_PIPE_LAG): one CTA doing every item in ticket order, a few CTAs, more CTAs than chunks
// and than the device holds at once; lags below a group's chunks (the kernel raises them), one
// group, a few, and beyond the tensor (all S items first). Small lags make A items wait for
// their group's statistics. Each plan runs two inputs back to back on one stream: statistics
// left from the first call would spoil the second. Groups of 64 chunks are merged by one warp,
// groups of 256 by the whole CTA.
TEST_CASE("group_norm: pipelined plans over forced grids and lags") {
  if (runtime().props().cc() < 70) return;
  CHECK(run_forced_pipe(GroupNormProblem::from_shape({4, 32, 256, 256}, 8, DType::F32), 256, 4, 64,
                        {"1", "3", "700", "5000"}, {"1", "64", "100", "2048", "999999"}) == 20);
  CHECK(run_forced_pipe(GroupNormProblem::from_shape({1, 128, 512, 512}, 32, DType::F32), 256, 4,
                        256, {"1", "5", "5000"}, {"1", "257", "8192"}) == 9);
  // A value that is not a positive integer is refused by name when a plan is built.
  const PipeEnv env(nullptr, "-3");
  kjit::Runtime rt;
  kjit::ops::GroupNormOptions opt;
  const GroupNormProblem p = GroupNormProblem::from_shape({1, 128, 512, 512}, 32, DType::F32);
  for (const GroupNormConfig& c : kjit::ops::group_norm_candidates(p, rt.props().cc()))
    if (c.family == F::Pipe) opt.config = c;
  REQUIRE(opt.config);
  CHECK_THROWS_WITH_AS(kjit::ops::prepare_group_norm(rt, p, opt),
                       doctest::Contains("KJIT_GN_PIPE_LAG='-3' must be a positive integer"),
                       kjit::Error);
}

// Two cooperative problems with different chunk counts and a pipelined one alternate on one
// stream, in a graph replayed many times and in direct calls: the barrier words are shared and
// must reset each time.
TEST_CASE("group_norm: cooperative and pipelined plans alternating on one stream, in graphs too") {
  auto& rt = runtime();
  if (rt.props().cc() < 70) return;
  kjit::Stream stream(rt);
  struct Run {
    GroupNormProblem p;
    kjit::ops::GroupNormOptions opt;
    std::vector<float> x, w, b;
    std::vector<double> ref;
    kjit::DeviceBuffer dx, dw, db, dy;
  };
  std::vector<std::unique_ptr<Run>> runs;
  int k = 0;
  // The third runs pipelined: its counters share the stream's barrier words with the others'.
  for (auto [shape, g, t, pipe] :
       {std::tuple{std::vector<int64_t>{1, 64, 256, 256}, 16, DType::BF16, false},
        std::tuple{std::vector<int64_t>{2, 12, 40000}, 3, DType::F32, false},
        std::tuple{std::vector<int64_t>{2, 16, 65536}, 2, DType::F32, true}}) {
    auto r = std::make_unique<Run>();
    r->p = GroupNormProblem::from_shape(shape, g, t);
    for (const GroupNormConfig& c : kjit::ops::group_norm_candidates(r->p, rt.props().cc()))
      if (c.family == (pipe ? F::Pipe : F::SplitCoop) && c.threads == 256 &&
          c.iters == (t == DType::F32 ? (pipe ? 4 : 8) : 4))
        r->opt.config = c;
    REQUIRE(r->opt.config);
    const size_t n = static_cast<size_t>(r->p.N * r->p.C * r->p.S);
    const size_t esz = kjit::dtype_size(t);
    r->x = kjit::host::random_normal(t, n, 1.f, 2.f, kjit_test::seed() + 41 + k);
    r->w = kjit::host::random_normal(t, static_cast<size_t>(r->p.C), 1.f, 0.5f, 42 + k);
    r->b = kjit::host::random_normal(t, static_cast<size_t>(r->p.C), 0.f, 0.5f, 43 + k);
    r->ref = kjit::reference::group_norm(r->p, r->x, r->w.data(), r->b.data(), 1e-5);
    r->dx = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(t, r->x));
    r->dw = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(t, r->w));
    r->db = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(t, r->b));
    r->dy = kjit::DeviceBuffer(rt, n * esz);
    // Partials (8 bytes a chunk) and barrier words (8 bytes a group); pipe also keeps a group's
    // statistics (8 bytes) and two counters (8 bytes): a capture then runs coop or pipe.
    const int64_t groups = r->p.N * r->p.groups;
    CHECK(kjit::ops::reserve_group_norm_workspace(rt, r->p, r->opt, stream) ==
          static_cast<size_t>(8 * groups *
                                  (kjit::ops::group_norm_split_chunks(r->p, *r->opt.config) + 1) +
                              (pipe ? 8 * (groups + 2) : 0)));
    runs.push_back(std::move(r));
    ++k;
  }
  auto call = [&](Run& r) {
    kjit::ops::group_norm(rt, r.p, reinterpret_cast<void*>(r.dx.ptr()),
                          reinterpret_cast<void*>(r.dy.ptr()), reinterpret_cast<void*>(r.dw.ptr()),
                          reinterpret_cast<void*>(r.db.ptr()), r.opt, stream);
  };
  auto check = [&](Run& r) {
    const size_t n = r.ref.size(), esz = kjit::dtype_size(r.p.dtype);
    const auto y = kjit::host::from_bytes(r.p.dtype, r.dy.to_host<unsigned char>(n * esz));
    CAPTURE(r.p.describe());
    check_output(r.p.dtype, y, r.ref);
  };
  for (int i = 0; i < 6; ++i) {
    for (auto& r : runs) r->dy.fill_bytes(0xFF);
    kjit::synchronize(rt);
    for (auto& r : runs) call(*r);
    stream.synchronize();
    for (auto& r : runs) check(*r);
  }
  for (auto& r : runs) r->dy.fill_bytes(0xFF);
  kjit::synchronize(rt);
  kjit::Graph graph(rt, stream, [&] {
    for (auto& r : runs) call(*r);
  });
  std::vector<std::string> expected, got;  // one kernel per call, none a fallback
  for (auto& r : runs)
    for (const std::string& k : kernels_of(r->p, *r->opt.config)) expected.push_back(k);
  for (const std::string& k : graph.kernel_names()) got.push_back(kernel_base(k));
  std::sort(expected.begin(), expected.end());
  std::sort(got.begin(), got.end());
  CHECK(got == expected);
  CHECK(expected == std::vector<std::string>{"gn_coop", "gn_coop", "gn_pipe_fwd"});
  for (int i = 0; i < 20; ++i) graph.launch(stream);
  stream.synchronize();
  for (auto& r : runs) check(*r);
}

// Cooperative grids from four streams at once, each stream with its own barrier words: the
// register-held kernel (512 CTAs) and, on sm_90, the staged one (256 CTAs of 512 threads) compete
// for the SMs, with the pipelined kernel's persistent grids (which wait for each other's items
// but need no co-residency) among them. A grid the hardware placed only in part would spin at its
// barrier while another held the rest of the SMs; the driver starts a cooperative grid only when
// all of it fits, and this checks that every call still completes and is right.
TEST_CASE("group_norm: cooperative and pipelined plans on four streams at once") {
  auto& rt = runtime();
  if (rt.props().cc() < 90) return;  // the heuristic picks both cooperative forms on sm_90
  struct Problem {
    GroupNormProblem p;
    std::vector<double> ref;
    kjit::DeviceBuffer dx, dw, db;
  };
  std::vector<std::unique_ptr<Problem>> probs;
  for (int k = 0; k < 3; ++k) {
    const DType t = k == 0 ? DType::BF16 : DType::F32;
    auto pr = std::make_unique<Problem>();
    pr->p = k < 2 ? GroupNormProblem::from_shape({1, 128, 256, 256}, 32, t)
                  : GroupNormProblem::from_shape({1, 128, 512, 512}, 32, t);
    const GroupNormConfig c = kjit::ops::prepare_group_norm(rt, pr->p);
    CAPTURE(c.describe());
    REQUIRE((k < 2 ? c.cooperative() : c.family == F::Pipe));
    const size_t n = static_cast<size_t>(pr->p.N * pr->p.C * pr->p.S);
    const auto x = kjit::host::random_normal(t, n, 1.f, 2.f, kjit_test::seed() + 61);
    const auto w = kjit::host::random_normal(t, 128, 1.f, 0.5f, 62);
    const auto b = kjit::host::random_normal(t, 128, 0.f, 0.5f, 63);
    pr->ref = kjit::reference::group_norm(pr->p, x, w.data(), b.data(), 1e-5);
    pr->dx = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(t, x));
    pr->dw = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(t, w));
    pr->db = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(t, b));
    probs.push_back(std::move(pr));
  }
  constexpr int kThreads = 4, kRounds = 25;
  std::vector<std::vector<kjit::DeviceBuffer>> ys(kThreads);
  for (auto& v : ys)
    for (const auto& pr : probs) {
      v.emplace_back(rt, pr->ref.size() * kjit::dtype_size(pr->p.dtype));
      v.back().fill_bytes(0xFF);
    }
  kjit::synchronize(rt);
  std::atomic<int> arrived{0};
  auto worker = [&](int t) {
    kjit::Stream stream(rt);
    arrived.fetch_add(1);
    while (arrived.load() < kThreads) std::this_thread::yield();
    for (int r = 0; r < kRounds; ++r)
      for (size_t i = 0; i < probs.size(); ++i) {
        const Problem& pr = *probs[(i + t) % probs.size()];
        kjit::ops::group_norm(rt, pr.p, reinterpret_cast<void*>(pr.dx.ptr()),
                              reinterpret_cast<void*>(ys[t][(i + t) % probs.size()].ptr()),
                              reinterpret_cast<void*>(pr.dw.ptr()),
                              reinterpret_cast<void*>(pr.db.ptr()), {}, stream);
      }
    stream.synchronize();
  };
  std::vector<std::future<void>> jobs;
  for (int t = 0; t < kThreads; ++t) jobs.push_back(std::async(std::launch::async, worker, t));
  for (auto& j : jobs) {
    // 300 calls of 20-100 us each: seconds would mean grids waiting on each other for good, and a
    // GPU stuck that way cannot be recovered from inside the process.
    if (j.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      std::fprintf(stderr, "cooperative/pipelined GroupNorm calls on four streams hung for 60 s\n");
      std::_Exit(3);
    }
    j.get();
  }
  for (int t = 0; t < kThreads; ++t)
    for (size_t i = 0; i < probs.size(); ++i) {
      const Problem& pr = *probs[i];
      const size_t esz = kjit::dtype_size(pr.p.dtype);
      const auto y =
          kjit::host::from_bytes(pr.p.dtype, ys[t][i].to_host<unsigned char>(pr.ref.size() * esz));
      CAPTURE(t);
      CAPTURE(pr.p.describe());
      check_output(pr.p.dtype, y, pr.ref);
    }
}

namespace {

// One problem's inputs and float64 reference in runtime rt. run() captures one call on `stream`
// into a graph, replays it twice, checks y, and returns the kernels the graph recorded, sorted
// (as kernels_of names them).
struct CapturedCall {
  CapturedCall(kjit::Runtime& rt, const GroupNormProblem& p, uint64_t seed)
      : rt(rt), p(p), n(static_cast<size_t>(p.N * p.C * p.S)) {
    const size_t c = static_cast<size_t>(p.C);
    const auto x = kjit::host::random_normal(p.dtype, n, 2.f, 3.f, kjit_test::seed() + seed);
    const auto w = kjit::host::random_normal(p.dtype, c, 1.f, 0.5f, seed + 1);
    const auto b = kjit::host::random_normal(p.dtype, c, 0.f, 0.5f, seed + 2);
    dx = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(p.dtype, x));
    dw = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(p.dtype, w));
    db = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(p.dtype, b));
    dy = kjit::DeviceBuffer(rt, n * kjit::dtype_size(p.dtype));
    ref = kjit::reference::group_norm(p, x, w.data(), b.data(), 1e-5);
  }
  std::vector<std::string> run(kjit::Stream& stream) {
    dy.fill_bytes(0xFF);
    kjit::synchronize(rt);
    kjit::Graph g(rt, stream, [&] {
      kjit::ops::group_norm(rt, p, reinterpret_cast<void*>(dx.ptr()),
                            reinterpret_cast<void*>(dy.ptr()), reinterpret_cast<void*>(dw.ptr()),
                            reinterpret_cast<void*>(db.ptr()), {}, stream);
    });
    g.launch(stream);
    g.launch(stream);
    stream.synchronize();
    const size_t bytes = n * kjit::dtype_size(p.dtype);
    const auto y = kjit::host::from_bytes(p.dtype, dy.to_host<unsigned char>(bytes));
    CAPTURE(p.describe());
    check_output(p.dtype, y, ref);
    std::vector<std::string> names;
    for (const std::string& k : g.kernel_names()) names.push_back(kernel_base(k));
    std::sort(names.begin(), names.end());
    CHECK(names.size() == g.nodes());  // nothing but kernels
    return names;
  }
  // What the plan runs in a capture on a stream without its workspace.
  std::vector<std::string> fallback() const {
    return kernels_of(p, kjit::ops::group_norm_capture_fallback(p, rt.props().cc()));
  }
  kjit::Runtime& rt;
  GroupNormProblem p;
  size_t n;
  std::vector<double> ref;
  kjit::DeviceBuffer dx, dw, db, dy;
};

}  // namespace

// A split plan keeps its partial statistics in a per-stream workspace. Inside a capture on a
// stream that has none it runs its one-kernel fallback instead of allocating; once the stream's
// workspace is reserved, the graph runs the two kernels.
TEST_CASE("group_norm: split plans in CUDA graphs, with and without the stream's workspace") {
  if (runtime().props().cc() < 90) return;  // the heuristic splits on sm_90 only
  const GroupNormProblem p = GroupNormProblem::from_shape({1, 64, 256, 256}, 16, DType::BF16);
  kjit::Runtime rt;  // a runtime of its own: none of its streams has a workspace yet
  REQUIRE(kjit::ops::prepare_group_norm(rt, p).family == F::Split);
  CapturedCall call(rt, p, 31);
  kjit::Stream stream(rt);
  REQUIRE(call.fallback().size() == 1u);
  CHECK(call.run(stream) == call.fallback());
  CHECK(kjit::ops::reserve_group_norm_workspace(rt, p, {}, stream) > 0);
  CHECK(call.run(stream) == std::vector<std::string>{"gn_apply", "gn_partials"});
  const GroupNormProblem small = GroupNormProblem::from_shape({8, 256, 24, 24}, 32, DType::F32);
  CHECK(kjit::ops::reserve_group_norm_workspace(rt, small, {}, stream) == 0);
}

// A stream that has split partials but no barrier words yet: a cooperative plan captured there
// runs its one-kernel fallback instead of allocating inside the capture (which would throw).
TEST_CASE("group_norm: a cooperative plan captured on a stream with partials only") {
  if (runtime().props().cc() < 90) return;  // the heuristic picks coop on sm_90 only
  kjit::Runtime rt;                         // none of its streams has a workspace yet
  const GroupNormProblem pair = GroupNormProblem::from_shape({1, 64, 256, 256}, 16, DType::F32);
  const GroupNormProblem p = GroupNormProblem::from_shape({1, 128, 256, 256}, 32, DType::BF16);
  const GroupNormConfig c = kjit::ops::prepare_group_norm(rt, p);
  REQUIRE(c.cooperative());
  kjit::Stream stream(rt);
  const size_t partials = static_cast<size_t>(8 * 32 * kjit::ops::group_norm_split_chunks(p, c));
  REQUIRE(kjit::ops::reserve_group_norm_workspace(rt, pair, {}, stream) >= partials);
  CapturedCall call(rt, p, 51);
  REQUIRE(call.fallback().size() == 1u);
  CHECK(call.run(stream) == call.fallback());
  CHECK(kjit::ops::reserve_group_norm_workspace(rt, p, {}, stream) == partials + 8 * 32);
  CHECK(call.run(stream) == std::vector<std::string>{"gn_coop"});
}

namespace {

// A plan of p (its heuristic config must pass `is`) in a CUDA graph: without the stream's
// workspaces the capture runs the one-kernel fallback; reserving gives the stream `bytes`, and the
// graph then holds the plan's own kernel. Both graphs are replayed and checked.
void capture_before_and_after_reserving(const GroupNormProblem& p,
                                        bool (*is)(const GroupNormConfig&), size_t bytes,
                                        uint64_t seed) {
  kjit::Runtime rt;  // none of its streams has a workspace yet
  const GroupNormConfig c = kjit::ops::prepare_group_norm(rt, p);
  CAPTURE(c.describe());
  REQUIRE(is(c));
  kjit::Stream stream(rt);
  CapturedCall call(rt, p, seed);
  REQUIRE(call.fallback().size() == 1u);
  REQUIRE(call.fallback() != kernels_of(p, c));
  CHECK(call.run(stream) == call.fallback());
  CHECK(kjit::ops::reserve_group_norm_workspace(rt, p, {}, stream) == bytes);
  CHECK(call.run(stream) == kernels_of(p, c));
}

}  // namespace

// The staged cooperative plan (1x128x256x256 f32; streamed fallback): a partial per CTA (8
// slices for each of the 32 groups) and two barrier words per group.
TEST_CASE("group_norm: a staged cooperative plan in CUDA graphs, before and after reserving") {
  if (runtime().props().cc() < 90) return;
  capture_before_and_after_reserving(
      GroupNormProblem::from_shape({1, 128, 256, 256}, 32, DType::F32),
      [](const GroupNormConfig& c) { return c.family == F::SmemCoop && c.cluster == 8; },
      32 * 8 * 8 + 32 * 8, 71);
}

// The pipelined plan (1x128x512x512 f32; staged fallback): a partial per chunk (64 chunks of
// 64 KB in each of the 32 groups), the groups' statistics, and its counters.
TEST_CASE("group_norm: a pipelined plan in CUDA graphs, before and after reserving") {
  if (runtime().props().cc() < 90) return;
  capture_before_and_after_reserving(
      GroupNormProblem::from_shape({1, 128, 512, 512}, 32, DType::F32),
      [](const GroupNormConfig& c) { return c.family == F::Pipe; },
      (32 * 64 + 32) * 8 + (32 + 2) * 8, 81);
}

TEST_CASE("group_norm: a forced config that cannot run the problem is an InvalidArgument" *
          doctest::test_suite("host_logic")) {
  auto& rt = runtime();
  GroupNormProblem p = GroupNormProblem::from_shape({2, 64, 32, 32}, 8, DType::F32);
  kjit::DeviceBuffer x(rt, 2 * 64 * 1024 * 4), y(rt, 2 * 64 * 1024 * 4), w(rt, 256), b(rt, 256);
  kjit::Stream stream(rt);
  auto call = [&](const kjit::ops::GroupNormConfig& c) {
    kjit::ops::GroupNormOptions opt;
    opt.config = c;
    kjit::ops::group_norm(rt, p, reinterpret_cast<void*>(x.ptr()), reinterpret_cast<void*>(y.ptr()),
                          reinterpret_cast<void*>(w.ptr()), reinterpret_cast<void*>(b.ptr()), opt,
                          stream);
  };
  kjit::ops::GroupNormConfig c = kjit::ops::group_norm_heuristic(p, rt.props().cc());
  c.iters = 1;  // no longer covers a group
  CHECK_THROWS_WITH_AS(call(c), doctest::Contains("must cover a group"), kjit::Error);
  c = kjit::ops::group_norm_heuristic(p, rt.props().cc());
  c.threads = 48;
  CHECK_THROWS_WITH_AS(call(c), doctest::Contains("threads = 48"), kjit::Error);
}

TEST_CASE("group_norm: bad inputs raise InvalidArgument and write nothing" *
          doctest::test_suite("host_logic")) {
  auto& rt = runtime();
  kjit::Stream stream(rt);
  GroupNormProblem p = GroupNormProblem::from_shape({2, 8, 4, 4}, 4, DType::F32);
  kjit::DeviceBuffer x(rt, 1024), y(rt, 1024), w(rt, 64);
  y.fill_bytes(0x7F);
  auto X = reinterpret_cast<void*>(x.ptr());
  auto Y = reinterpret_cast<void*>(y.ptr());
  auto W = reinterpret_cast<void*>(w.ptr());
  kjit::ops::GroupNormOptions o;
  CHECK_KJIT_ERROR(kjit::ops::group_norm(rt, p, nullptr, Y, W, W, o, stream),
                   kjit::Errc::InvalidArgument);
  CHECK_KJIT_ERROR(kjit::ops::group_norm(rt, p, X, Y, nullptr, W, o, stream),
                   kjit::Errc::InvalidArgument);
  CHECK_KJIT_ERROR(kjit::ops::group_norm(rt, p, X, reinterpret_cast<char*>(Y) + 2, W, W, o, stream),
                   kjit::Errc::InvalidArgument);
  CHECK_KJIT_ERROR(
      kjit::ops::group_norm(rt, p, X, reinterpret_cast<char*>(X) + 64, W, W, o, stream),
      kjit::Errc::InvalidArgument);
  GroupNormProblem q = p;
  q.groups = 3;
  CHECK_KJIT_ERROR(kjit::ops::group_norm(rt, q, X, Y, W, W, o, stream),
                   kjit::Errc::InvalidArgument);
  o.eps = -1.f;
  CHECK_KJIT_ERROR(kjit::ops::group_norm(rt, p, X, Y, W, W, o, stream),
                   kjit::Errc::InvalidArgument);
  o.eps = NAN;
  CHECK_KJIT_ERROR(kjit::ops::group_norm(rt, p, X, Y, W, W, o, stream),
                   kjit::Errc::InvalidArgument);
  stream.synchronize();
  std::vector<unsigned char> h(1024);
  y.download(h.data(), h.size());
  CHECK(std::all_of(h.begin(), h.end(), [](unsigned char c) { return c == 0x7F; }));
  // Empty tensors are valid and do nothing, but a forced config must still suit the problem.
  GroupNormProblem empty = GroupNormProblem::from_shape({0, 8, 4, 4}, 4, DType::F32);
  kjit::ops::group_norm(rt, empty, X, Y, W, W, kjit::ops::GroupNormOptions{}, stream);
  kjit::ops::GroupNormOptions forced;
  forced.config = kjit::ops::group_norm_heuristic(empty, rt.props().cc());
  kjit::ops::group_norm(rt, empty, X, Y, W, W, forced, stream);
  CHECK(kjit::ops::prepare_group_norm(rt, empty, forced).describe() == forced.config->describe());
  forced.config->threads = 48;
  CHECK_THROWS_WITH_AS(kjit::ops::group_norm(rt, empty, X, Y, W, W, forced, stream),
                       doctest::Contains("threads = 48 must be a multiple of 32"), kjit::Error);
  CHECK_THROWS_WITH_AS(kjit::ops::prepare_group_norm(rt, empty, forced),
                       doctest::Contains("threads = 48"), kjit::Error);
  CHECK_THROWS_WITH_AS(kjit::ops::reserve_group_norm_workspace(rt, empty, forced, stream),
                       doctest::Contains("threads = 48"), kjit::Error);
  // S == 0: the groups are empty and no config describes them; the one prepare returns (its
  // iters are 0) is taken back without a check.
  const GroupNormProblem flat = GroupNormProblem::from_shape({8, 64, 0}, 32, DType::F32);
  kjit::ops::GroupNormOptions back;
  back.config = kjit::ops::prepare_group_norm(rt, flat);
  kjit::ops::group_norm(rt, flat, X, Y, W, W, back, stream);
  CHECK(kjit::ops::reserve_group_norm_workspace(rt, flat, back, stream) == 0);
}

TEST_CASE("group_norm: autotune picks a candidate and reuses it from the cache") {
  auto& rt = runtime();
  GroupNormProblem p = GroupNormProblem::from_shape({4, 256, 32, 32}, 32, DType::F32);
  kjit::ops::GroupNormOptions o;
  o.autotune = true;
  auto c = kjit::ops::prepare_group_norm(rt, p, o);
  auto cands = kjit::ops::group_norm_candidates(p, rt.props().cc());
  CHECK(std::any_of(cands.begin(), cands.end(),
                    [&](const auto& k) { return k.describe() == c.describe(); }));
  MESSAGE("autotuned " << p.describe() << ": " << c.describe() << " (of " << cands.size() << ")");
  kjit::Stream stream(rt);
  Case cs;
  cs.p = p;
  cs.autotune = true;
  check_result(cs, run_case(cs, stream, kjit_test::seed()));
  // A runtime that finds a stored choice but has loaded nothing refuses the tuned call captured
  // unprepared (CaptureCompile), rather than compiling and loading inside the capture.
  kjit_test::TempDir dir;
  kjit::RuntimeOptions ro;
  ro.cache.dir = dir.path;
  {
    kjit::Runtime tuner(ro);
    kjit::ops::prepare_group_norm(tuner, p, o);
  }
  kjit::Runtime fresh(ro);
  kjit::Stream s2(fresh);
  const size_t bytes = static_cast<size_t>(p.N * p.C * p.S) * 4;
  kjit::DeviceBuffer dx(fresh, bytes), dy(fresh, bytes), dw(fresh, p.C * 4), db(fresh, p.C * 4);
  auto ptr = [](const kjit::DeviceBuffer& b) { return reinterpret_cast<void*>(b.ptr()); };
  std::string refusal;
  try {
    kjit::Graph g(fresh, s2, [&] {
      kjit::ops::group_norm(fresh, p, ptr(dx), ptr(dy), ptr(dw), ptr(db), o, s2);
    });
  } catch (const kjit::Error& e) {
    refusal = kjit::errc_name(e.code());
  }
  CHECK(refusal == kjit::errc_name(kjit::Errc::CaptureCompile));
}

// Autotuning a problem with split candidates times them with partials in a workspace set of its
// own; whichever config wins must then run on the caller's stream (split: with a fresh workspace).
// A runtime of its own with the disk cache off, so that no stored choice skips the timing.
TEST_CASE("group_norm: autotune over a split-eligible problem") {
  if (runtime().props().cc() < 90) return;
  kjit_test::TempDir dir;
  kjit::RuntimeOptions ro;
  ro.cache.mode = kjit::cache::Mode::Off;
  ro.cache.dir = dir.path;
  kjit::Runtime rt(ro);
  Case cs = named({1, 16, 256, 256}, 4, DType::F32);
  auto cands = kjit::ops::group_norm_candidates(cs.p, rt.props().cc());
  REQUIRE(std::any_of(cands.begin(), cands.end(), [](const auto& k) {
    return k.family == F::Split || k.family == F::SplitCoop;
  }));
  kjit::ops::GroupNormOptions o;
  o.autotune = true;
  const auto c = kjit::ops::prepare_group_norm(rt, cs.p, o);
  MESSAGE("autotuned " << cs.p.describe() << ": " << c.describe() << " (of " << cands.size()
                       << ")");
  kjit::Stream stream(rt);
  cs.autotune = true;
  check_result(cs, run_case(cs, stream, kjit_test::seed() + 7, rt));
}
