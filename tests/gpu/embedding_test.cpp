// Embedding kjit in a host application (issue 8):
//   - threads: 8 host threads share one Runtime, each on its own stream, launching many GroupNorm
//     ops of shared and thread-unique shapes; every result is checked against the float64
//     reference, and every specialization is compiled (and loaded) exactly once;
//   - CUDA graphs: prepared ops capture and replay on new data without compiling; an unprepared
//     op raises Errc::CaptureCompile and leaves the stream usable;
//   - contexts: kjit keeps working, and leaves the caller's current context as it was, when the
//     app has its own context current, when it made the primary context current itself (as the
//     CUDA runtime and PyTorch do) and on a thread with no context; a runtime per device.
// Fixed shapes and seeds (independent of KJIT_TEST_SEED): the same checks on every run.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gpu_env.hpp"
#include "kjit/host_math.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/reference.hpp"
#include "test_util.hpp"

using kjit::DType;
using kjit::ops::Activation;
using kjit::ops::GroupNormProblem;
using kjit::ops::Layout;

namespace {

// ---- problems, inputs, references -------------------------------------------------------------

GroupNormProblem gn(std::vector<int64_t> shape, int64_t groups, DType t,
                    Layout layout = Layout::NCHW) {
  return GroupNormProblem::from_shape(shape, groups, t, layout);
}

// Host side of one problem: two input sets (so that a stale output from the previous call fails
// the check), the affine parameters, and the float64 reference of each set.
struct HostCase {
  GroupNormProblem p;
  std::vector<float> x[2], w, b;
  std::vector<unsigned char> x_bytes[2], w_bytes, b_bytes;
  std::vector<double> ref[2];
  size_t elems() const { return static_cast<size_t>(p.N * p.C * p.S); }
  size_t x_size() const { return elems() * kjit::dtype_size(p.dtype); }
};

constexpr float kEps = 1e-5f;

HostCase make_case(const GroupNormProblem& p, uint64_t seed) {
  HostCase h;
  h.p = p;
  using kjit::host::random_normal;
  const size_t c = static_cast<size_t>(p.C);
  h.w = random_normal(p.param_dtype, c, 1.f, .5f, seed);
  h.b = random_normal(p.param_dtype, c, -.25f, 1.f, seed + 1);
  h.w_bytes = kjit::host::to_bytes(p.param_dtype, h.w);
  h.b_bytes = kjit::host::to_bytes(p.param_dtype, h.b);
  for (int s = 0; s < 2; ++s) {
    h.x[s] = random_normal(p.dtype, h.elems(), s ? -1.f : 3.f, s ? 1.f : 2.f, seed + 2 + s);
    h.x_bytes[s] = kjit::host::to_bytes(p.dtype, h.x[s]);
    h.ref[s] = kjit::reference::group_norm(p, h.x[s], p.has_weight ? h.w.data() : nullptr,
                                           p.has_bias ? h.b.data() : nullptr, kEps);
  }
  return h;
}

// The suites' tolerances: fp32 relative L2 <= 1e-5 and allclose(1e-4, 1e-4); 16-bit <= 1e-2 and
// allclose(1e-2, 1e-2).
struct Verdict {
  bool pass = false;
  std::string what;
};

Verdict judge(const HostCase& h, const std::vector<float>& y, int set) {
  const bool f32 = h.p.dtype == DType::F32;
  const kjit::host::ErrorStats e =
      kjit::host::compare(y, h.ref[set], f32 ? 1e-4 : 1e-2, f32 ? 1e-4 : 1e-2);
  Verdict v;
  v.pass = e.nonfinite == 0 && e.allclose && e.rel_l2 <= (f32 ? 1e-5 : 1e-2);
  v.what = h.p.describe() + " input set " + std::to_string(set) + ": rel L2 " +
           std::to_string(e.rel_l2) + ", max abs " + std::to_string(e.max_abs) + ", non-finite " +
           std::to_string(e.nonfinite) +
           (e.allclose ? ""
            : f32      ? ", not allclose(1e-4)"
                       : ", not allclose(1e-2)");
  return v;
}

// Device side of one problem: its own buffers in the runtime's context.
struct DeviceCase {
  const HostCase* h = nullptr;
  kjit::DeviceBuffer x[2], w, b, y;

  DeviceCase(kjit::Runtime& rt, const HostCase& hc) : h(&hc) {
    for (int s = 0; s < 2; ++s) {
      x[s] = kjit::DeviceBuffer(rt, hc.x_size());
      x[s].upload(hc.x_bytes[s].data(), hc.x_bytes[s].size());
    }
    w = kjit::DeviceBuffer(rt, hc.w_bytes.size());
    w.upload(hc.w_bytes.data(), hc.w_bytes.size());
    b = kjit::DeviceBuffer(rt, hc.b_bytes.size());
    b.upload(hc.b_bytes.data(), hc.b_bytes.size());
    y = kjit::DeviceBuffer(rt, (hc.x_size() + 3) / 4 * 4);  // whole 32-bit words (see poison)
    y.fill_bytes(0xFF);
  }
  int words() const { return static_cast<int>(y.bytes() / 4); }

  void launch(kjit::Runtime& rt, CUstream s, int set) const {
    kjit::ops::GroupNormOptions opt;
    opt.eps = kEps;
    kjit::ops::group_norm(rt, h->p, reinterpret_cast<void*>(x[set].ptr()),
                          reinterpret_cast<void*>(y.ptr()),
                          h->p.has_weight ? reinterpret_cast<void*>(w.ptr()) : nullptr,
                          h->p.has_bias ? reinterpret_cast<void*>(b.ptr()) : nullptr, opt, s);
  }
  // After the caller synchronized the stream the op ran on.
  Verdict check(int set) const {
    std::vector<unsigned char> raw(h->x_size());
    y.download(raw.data(), raw.size());
    return judge(*h, kjit::host::from_bytes(h->p.dtype, raw), set);
  }
};

// Waits for what is queued on any stream (kjit's or the app's) so far.
void wait_for(kjit::Runtime& rt, CUstream s) {
  kjit::Event done(rt);
  done.record(s);
  done.synchronize();
}

// Runs one op on `s` with fresh buffers, waits, checks.
Verdict run_once(kjit::Runtime& rt, CUstream s, const HostCase& h, int set) {
  DeviceCase d(rt, h);
  d.launch(rt, s, set);
  wait_for(rt, s);
  return d.check(set);
}

// The app's own template: poisons an output (all bits set: NaN in every float format) on the
// stream, so that an op that does not run, or does not write everything, fails its check.
const char* const kFillSource = R"(
template <int kWord>
__global__ void fill_words(int* p, long long n) {
  long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < n) p[i] = kWord;
})";

kjit::Spec fill_spec() {
  return kjit::Spec("test/fill.cuh", "fill_words").value(-1);
}

void poison(const kjit::Kernel& fill, CUstream s, const DeviceCase& d) {
  kjit::LaunchConfig cfg;
  cfg.grid.x = static_cast<unsigned>((d.words() + 255) / 256);
  cfg.block.x = 256;
  const long long n = d.words();
  fill(s, cfg, d.y.ptr(), n);
}

// A runtime of its own with the disk cache off (a fresh folder, never written): its NVRTC
// compile and module load counts are exactly what this test made it do.
kjit::RuntimeOptions fresh_options(const kjit_test::TempDir& dir) {
  kjit::RuntimeOptions o;
  o.cache.mode = kjit::cache::Mode::Off;
  o.cache.dir = dir.path;
  return o;
}

bool autotune_env() {
  const char* e = std::getenv("KJIT_AUTOTUNE");
  return e && std::strcmp(e, "1") == 0;
}

// Driver entry points for the app's side of the context tests: through kjit::driver_proc, typed
// as cuda.h declares them. For the names used here the newest ABI (what the one-argument form
// resolves) is the one cuda.h declares; docs/API.md says when that is not so.
template <class F>
F proc(const char* name) {
  return reinterpret_cast<F>(kjit::driver_proc(name));
}

struct AppDriver {
  decltype(&::cuCtxCreate) ctx_create = proc<decltype(&::cuCtxCreate)>("cuCtxCreate");
  decltype(&::cuCtxDestroy) ctx_destroy = proc<decltype(&::cuCtxDestroy)>("cuCtxDestroy");
  decltype(&::cuCtxGetCurrent) get_current = proc<decltype(&::cuCtxGetCurrent)>("cuCtxGetCurrent");
  decltype(&::cuCtxSetCurrent) set_current = proc<decltype(&::cuCtxSetCurrent)>("cuCtxSetCurrent");
  decltype(&::cuCtxPushCurrent) push = proc<decltype(&::cuCtxPushCurrent)>("cuCtxPushCurrent");
  decltype(&::cuCtxPopCurrent) pop = proc<decltype(&::cuCtxPopCurrent)>("cuCtxPopCurrent");
  decltype(&::cuDeviceGet) device_get = proc<decltype(&::cuDeviceGet)>("cuDeviceGet");
  decltype(&::cuDeviceGetCount) device_count =
      proc<decltype(&::cuDeviceGetCount)>("cuDeviceGetCount");
  decltype(&::cuDevicePrimaryCtxRetain) primary_retain =
      proc<decltype(&::cuDevicePrimaryCtxRetain)>("cuDevicePrimaryCtxRetain");
  decltype(&::cuDevicePrimaryCtxRelease) primary_release =
      proc<decltype(&::cuDevicePrimaryCtxRelease)>("cuDevicePrimaryCtxRelease");
  decltype(&::cuStreamCreate) stream_create = proc<decltype(&::cuStreamCreate)>("cuStreamCreate");
  decltype(&::cuStreamDestroy) stream_destroy =
      proc<decltype(&::cuStreamDestroy)>("cuStreamDestroy");
  decltype(&::cuStreamIsCapturing) is_capturing =
      proc<decltype(&::cuStreamIsCapturing)>("cuStreamIsCapturing");

  CUcontext current() const {
    CUcontext c = nullptr;
    REQUIRE_NOTHROW(kjit::check_driver(get_current(&c), "cuCtxGetCurrent"));
    return c;
  }

  // A new (non-primary) context on dev, made current on this thread (pushed). CUDA 13's
  // cuCtxCreate is cuCtxCreate_v4, which takes creation parameters (none here).
  CUresult create_context(CUcontext* ctx, CUdevice dev) const {
#if CUDA_VERSION >= 13000
    CUresult r = ctx_create(ctx, nullptr, 0, dev);
    if (r == CUDA_ERROR_INVALID_VALUE) {  // a driver that wants a parameter block
      CUctxCreateParams params{};
      r = ctx_create(ctx, &params, 0, dev);
    }
    return r;
#else
    return ctx_create(ctx, 0, dev);
#endif
  }
};

}  // namespace

// ---- threads ------------------------------------------------------------------------------------

TEST_CASE(
    "embedding: 8 threads share one runtime; all correct, each specialization compiled once") {
  constexpr int kThreads = 8, kRounds = 10;
  kjit_test::TempDir dir;
  kjit::Runtime rt(fresh_options(dir));
  rt.templates().add("test/fill.cuh", kFillSource);
  const int cc = rt.props().cc();

  // Shapes every thread runs: each regime without clusters (tiny groups in warp teams, groups
  // held by a whole CTA, the seed shape), 1-D and prime spatial sizes, NHWC, 16-bit dtypes, no
  // affine. Plus two per thread that no other thread runs: one with a specialization of its own
  // (its spatial size), and one whose specialization it shares with "shared" problem 0 (same
  // C/G and S, other N and C) but whose plan is its own.
  std::vector<GroupNormProblem> shared = {
      gn({2, 64, 12, 12}, 8, DType::F32),
      gn({4, 128, 7, 7}, 32, DType::F32),
      gn({3, 24, 13}, 6, DType::F32),
      gn({2, 64, 16, 16}, 16, DType::BF16),
      gn({2, 8, 8, 64}, 16, DType::F32, Layout::NHWC),
      gn({3, 96, 10, 10}, 32, DType::F16),
      gn({8, 256, 24, 24}, 32, DType::F32),
      gn({1, 32, 32, 32}, 8, DType::F32),
  };
  shared[5].has_weight = shared[5].has_bias = false;
  shared[5].activation = Activation::None;
  std::vector<HostCase> shared_cases;
  for (size_t i = 0; i < shared.size(); ++i) shared_cases.push_back(make_case(shared[i], 100 + i));
  std::vector<std::vector<HostCase>> own_cases(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    own_cases[t].push_back(
        make_case(gn({1 + t % 3, 16 * (t + 1), 5 + t, 9}, 4 * (t + 1), DType::F32), 200 + t));
    own_cases[t].push_back(make_case(gn({t + 3, 128, 12, 12}, 16, DType::F32), 300 + t));
  }

  // The specializations the ops need: the heuristic's config for 16-byte aligned pointers
  // (cuMemAlloc gives 256). None uses a cluster, so the first config tried is always the one
  // launched (a cluster config the device cannot co-schedule would make kjit try the next).
  std::set<std::string> specs;
  auto add_spec = [&](const GroupNormProblem& p) {
    const kjit::ops::GroupNormConfig c = kjit::ops::group_norm_heuristic(p, cc, true);
    CHECK_MESSAGE(c.cluster == 1, p.describe());
    for (const kjit::Spec& s : kjit::ops::group_norm_specs(p, c)) specs.insert(s.instantiation());
  };
  for (const auto& h : shared_cases) add_spec(h.p);
  for (const auto& v : own_cases)
    for (const auto& h : v) add_spec(h.p);
  CHECK(specs.size() < shared_cases.size() + 2 * kThreads);  // some problems share one

  // Every thread's buffers, made before the threads start.
  std::vector<std::vector<DeviceCase>> dev(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    for (const auto& h : shared_cases) dev[t].emplace_back(rt, h);
    for (const auto& h : own_cases[t]) dev[t].emplace_back(rt, h);
  }

  struct Outcome {
    int ops = 0, failed = 0;
    std::string first_failure, error;
  };
  std::vector<Outcome> out(kThreads);
  std::atomic<int> arrived{0};
  auto worker = [&](int t) {
    Outcome& o = out[t];
    // Start together, so that first uses of a specialization race across threads.
    arrived.fetch_add(1);
    while (arrived.load() < kThreads) std::this_thread::yield();
    try {
      kjit::Stream stream(rt);
      const kjit::Kernel fill = rt.kernel(fill_spec());
      const std::vector<DeviceCase>& cases = dev[t];
      for (int r = 0; r < kRounds; ++r) {
        const int set = (r + t) % 2;
        // Each round enqueues every problem back to back (order rotating per thread and round),
        // then waits once and checks every output.
        for (size_t i = 0; i < cases.size(); ++i) {
          const DeviceCase& d = cases[(i + t + r) % cases.size()];
          poison(fill, stream, d);
          d.launch(rt, stream, set);
          ++o.ops;
        }
        stream.synchronize();
        for (const DeviceCase& d : cases) {
          const Verdict v = d.check(set);
          if (!v.pass && o.failed++ == 0) o.first_failure = v.what;
        }
      }
    } catch (const std::exception& e) {
      o.error = e.what();
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  int ops = 0;
  for (int t = 0; t < kThreads; ++t) {
    CAPTURE(t);
    CHECK_MESSAGE(out[t].error.empty(), out[t].error);
    CHECK_MESSAGE(out[t].failed == 0,
                  out[t].failed << " failed checks, first: " << out[t].first_failure);
    ops += out[t].ops;
  }
  CHECK(ops == kThreads * kRounds * static_cast<int>(shared_cases.size() + 2));
  const kjit::RuntimeStats st = rt.stats();
  const uint64_t expected = specs.size() + 1;  // + the fill kernel
  MESSAGE(kThreads << " threads, " << ops << " GroupNorm ops (+ as many fills) on "
                   << shared_cases.size() + 2 * kThreads << " problems in " << s
                   << " s: " << specs.size() << " GroupNorm specializations + 1 fill kernel; "
                   << st.compiler.nvrtc_compiles << " NVRTC compiles, " << st.kernels_loaded
                   << " modules loaded");
  if (autotune_env()) {
    MESSAGE("KJIT_AUTOTUNE=1: autotuning compiles every candidate; compile counts not checked");
    return;
  }
  CHECK(st.compiler.nvrtc_compiles == expected);
  CHECK(st.kernels_loaded == expected);
  CHECK(st.compiler.disk.hits == 0);
}

// ---- CUDA graphs --------------------------------------------------------------------------------

TEST_CASE(
    "embedding: prepared GroupNorm ops capture into a graph, replay on new data, compile "
    "nothing") {
  auto& rt = kjit_test::runtime();
  kjit::Stream stream(rt);
  const GroupNormProblem p = gn({4, 96, 20, 20}, 24, DType::F32);
  const GroupNormProblem q = gn({2, 6, 6, 128}, 32, DType::BF16, Layout::NHWC);
  kjit::ops::GroupNormOptions opt;
  opt.eps = kEps;
  kjit::ops::prepare_group_norm(rt, p, opt);
  kjit::ops::prepare_group_norm(rt, q, opt);
  const HostCase hp = make_case(p, 400), hq = make_case(q, 401);
  DeviceCase dp(rt, hp), dq(rt, hq);

  const kjit::RuntimeStats before = rt.stats();
  // Both ops read input set 0's buffers; a replay runs on whatever those buffers hold by then.
  kjit::Graph graph(rt, stream, [&] {
    dp.launch(rt, stream, 0);
    dq.launch(rt, stream, 0);
  });
  const kjit::RuntimeStats after = rt.stats();
  CHECK(after.compiler.nvrtc_compiles == before.compiler.nvrtc_compiles);
  CHECK(after.kernels_loaded == before.kernels_loaded);

  for (int replay = 0; replay < 4; ++replay) {
    const int set = replay % 2;  // fresh data into the captured buffers
    dp.x[0].upload(hp.x_bytes[set].data(), hp.x_bytes[set].size());
    dq.x[0].upload(hq.x_bytes[set].data(), hq.x_bytes[set].size());
    dp.y.fill_bytes(0xFF);
    dq.y.fill_bytes(0xFF);
    graph.launch(stream);
    stream.synchronize();
    CAPTURE(replay);
    const Verdict vp = dp.check(set), vq = dq.check(set);
    CHECK_MESSAGE(vp.pass, vp.what);
    CHECK_MESSAGE(vq.pass, vq.what);
  }
}

TEST_CASE("embedding: capturing an unprepared op raises CaptureCompile; the stream stays usable") {
  kjit_test::TempDir dir;
  kjit::Runtime rt(fresh_options(dir));  // nothing loaded yet
  const AppDriver d;
  kjit::Stream stream(rt);
  const GroupNormProblem p = gn({2, 32, 9, 9}, 8, DType::F32);
  const HostCase h = make_case(p, 500);
  DeviceCase dc(rt, h);
  auto body = [&] { dc.launch(rt, stream, 0); };

  bool thrown = false;
  try {
    kjit::Graph graph(rt, stream, body);
  } catch (const kjit::Error& e) {
    thrown = true;
    CHECK_MESSAGE(e.code() == kjit::Errc::CaptureCompile, e.what());
    CHECK_MESSAGE(std::string(e.what()).find("prepare") != std::string::npos, e.what());
  }
  CHECK(thrown);
  CHECK(rt.stats().compiler.nvrtc_compiles == 0);  // nothing compiled or loaded during capture
  CHECK(rt.stats().kernels_loaded == 0);
  {
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    REQUIRE_NOTHROW(kjit::check_driver(d.push(rt.context()), "cuCtxPushCurrent"));
    CHECK_NOTHROW(kjit::check_driver(d.is_capturing(stream, &status), "cuStreamIsCapturing"));
    CUcontext popped = nullptr;
    d.pop(&popped);
    CHECK(status == CU_STREAM_CAPTURE_STATUS_NONE);  // the Graph ended the capture
  }

  // The stream runs the op (which compiles now, outside the capture) ...
  dc.launch(rt, stream, 0);
  stream.synchronize();
  Verdict v = dc.check(0);
  CHECK_MESSAGE(v.pass, v.what);
  CHECK(rt.stats().compiler.nvrtc_compiles == 1);
  // ... and now captures it.
  kjit::Graph graph(rt, stream, body);
  dc.x[0].upload(h.x_bytes[1].data(), h.x_bytes[1].size());
  dc.y.fill_bytes(0xFF);
  graph.launch(stream);
  stream.synchronize();
  v = dc.check(1);
  CHECK_MESSAGE(v.pass, v.what);
  CHECK(rt.stats().compiler.nvrtc_compiles == 1);
}

// Autotuning allocates and synchronizes: a first autotuned call inside a capture must refuse
// cleanly (CaptureCompile, nothing timed), and work once prepared.
TEST_CASE(
    "embedding: an autotuned GroupNorm refuses to tune inside a capture; prepared, it captures") {
  kjit_test::TempDir dir;
  kjit::Runtime rt(fresh_options(dir));  // cache off: no stored tuning result to fall back on
  kjit::Stream stream(rt);
  const GroupNormProblem p = gn({2, 64, 16, 16}, 8, DType::F32);
  const HostCase h = make_case(p, 600);
  DeviceCase dc(rt, h);
  kjit::ops::GroupNormOptions opt;
  opt.eps = kEps;
  opt.autotune = true;
  auto body = [&] {
    kjit::ops::group_norm(rt, p, reinterpret_cast<void*>(dc.x[0].ptr()),
                          reinterpret_cast<void*>(dc.y.ptr()), reinterpret_cast<void*>(dc.w.ptr()),
                          reinterpret_cast<void*>(dc.b.ptr()), opt, stream);
  };
  try {
    kjit::Graph graph(rt, stream, body);
    FAIL("autotuning inside a capture did not refuse");
  } catch (const kjit::Error& e) {
    CHECK_MESSAGE(e.code() == kjit::Errc::CaptureCompile, e.what());
    CHECK_MESSAGE(std::string(e.what()).find("prepare_group_norm") != std::string::npos, e.what());
  }
  kjit::ops::prepare_group_norm(rt, p, opt);  // tunes now, outside any capture
  dc.y.fill_bytes(0xFF);
  kjit::synchronize(rt);
  kjit::Graph graph(rt, stream, body);
  graph.launch(stream);
  stream.synchronize();
  const Verdict v = dc.check(0);
  CHECK_MESSAGE(v.pass, v.what);
}

// ---- contexts -----------------------------------------------------------------------------------

TEST_CASE("embedding: kjit works while the app has its own context current, and keeps it current") {
  auto& rt = kjit_test::runtime();
  const AppDriver d;
  const CUcontext before = d.current();
  CUdevice dev = 0;
  REQUIRE_NOTHROW(kjit::check_driver(d.device_get(&dev, rt.props().ordinal), "cuDeviceGet"));
  CUcontext app = nullptr;
  const CUresult r = d.create_context(&app, dev);
  REQUIRE_NOTHROW(kjit::check_driver(r, "cuCtxCreate"));
  REQUIRE(d.current() == app);
  CHECK(app != rt.context());
  {
    // Everything here is new to kjit while the app's context is current: a stream, buffers, a
    // specialization compiled and loaded (into kjit's context), launches, copies.
    kjit::Stream stream(rt);
    const HostCase h = make_case(gn({3, 40, 11, 11}, 5, DType::F32), 600);
    Verdict v = run_once(rt, stream, h, 0);
    CHECK_MESSAGE(v.pass, v.what);
    CHECK(d.current() == app);
    v = run_once(rt, stream, h, 1);
    CHECK_MESSAGE(v.pass, v.what);
  }
  CHECK(d.current() == app);  // after kjit's destructors too
  CHECK_NOTHROW(kjit::check_driver(d.ctx_destroy(app),
                                   "cuCtxDestroy"));  // pops it: the thread's context is as before
  CHECK(d.current() == before);
}

TEST_CASE("embedding: kjit shares the primary context the CUDA runtime (PyTorch) makes current") {
  auto& rt = kjit_test::runtime();
  const AppDriver d;
  const CUcontext before = d.current();
  CUdevice dev = 0;
  REQUIRE_NOTHROW(kjit::check_driver(d.device_get(&dev, rt.props().ordinal), "cuDeviceGet"));
  CUcontext primary = nullptr;
  REQUIRE_NOTHROW(kjit::check_driver(d.primary_retain(&primary, dev), "cuDevicePrimaryCtxRetain"));
  CHECK(primary == rt.context());
  REQUIRE_NOTHROW(kjit::check_driver(d.set_current(primary),
                                     "cuCtxSetCurrent"));  // what cudaSetDevice + first use do
  // The app's own stream, as torch.cuda.current_stream().cuda_stream would be.
  CUstream app_stream = nullptr;
  REQUIRE_NOTHROW(
      kjit::check_driver(d.stream_create(&app_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  const HostCase h = make_case(gn({2, 48, 15, 15}, 12, DType::F16), 700);
  const Verdict v = run_once(rt, app_stream, h, 0);
  CHECK_MESSAGE(v.pass, v.what);
  CHECK(d.current() == primary);
  CHECK_NOTHROW(kjit::check_driver(d.stream_destroy(app_stream), "cuStreamDestroy"));
  CHECK_NOTHROW(kjit::check_driver(d.set_current(before), "cuCtxSetCurrent"));
  CHECK_NOTHROW(kjit::check_driver(d.primary_release(dev), "cuDevicePrimaryCtxRelease"));
}

TEST_CASE("embedding: kjit works on a thread with no current context and leaves none") {
  auto& rt = kjit_test::runtime();
  const AppDriver d;
  const HostCase h = make_case(gn({1, 64, 30, 30}, 16, DType::F32), 800);
  CUcontext at_start = reinterpret_cast<CUcontext>(1), at_end = reinterpret_cast<CUcontext>(1);
  Verdict v;
  std::string error;
  std::thread([&] {
    try {
      d.get_current(&at_start);
      kjit::Stream stream(rt);
      v = run_once(rt, stream, h, 0);
      d.get_current(&at_end);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }).join();
  CHECK_MESSAGE(error.empty(), error);
  CHECK(at_start == nullptr);
  CHECK(at_end == nullptr);
  CHECK_MESSAGE(v.pass, v.what);
}

TEST_CASE("embedding: a runtime per device on a machine with several GPUs") {
  auto& rt0 = kjit_test::runtime();
  const AppDriver d;
  int count = 0;
  REQUIRE_NOTHROW(kjit::check_driver(d.device_count(&count), "cuDeviceGetCount"));
  if (count < 2) {
    MESSAGE("one device: the runtime-per-device check needs two (skipped)");
    return;
  }
  kjit_test::TempDir dir;
  kjit::RuntimeOptions o = fresh_options(dir);
  o.device = (rt0.props().ordinal + 1) % count;
  kjit::Runtime rt1(o);
  CHECK(rt1.props().ordinal == o.device);
  CHECK(rt1.context() != rt0.context());
  const HostCase h = make_case(gn({4, 64, 14, 14}, 32, DType::F32), 900);
  kjit::Stream s0(rt0), s1(rt1);
  for (int set = 0; set < 2; ++set) {
    const Verdict v1 = run_once(rt1, s1, h, set), v0 = run_once(rt0, s0, h, set);
    CHECK_MESSAGE(v1.pass, "device " << o.device << ": " << v1.what);
    CHECK_MESSAGE(v0.pass, "device " << rt0.props().ordinal << ": " << v0.what);
  }
  CHECK(rt1.stats().kernels_loaded == 1);
}
