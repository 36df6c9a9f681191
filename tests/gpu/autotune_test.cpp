// kjit::Autotuner on the device: a user template tuned in one process, its winner reused by the
// next process with nothing timed; the timing rule itself.
#include <doctest/doctest.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gpu_env.hpp"
#include "kjit/autotune.hpp"
#include "test_util.hpp"

extern char** environ;

namespace {

const char* kSource = R"(
template <int kThreads, int kItems>
__global__ void __launch_bounds__(kThreads) add_one(const float* x, float* y, long long n) {
  const long long base = static_cast<long long>(blockIdx.x) * kThreads * kItems + threadIdx.x;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const long long i = base + static_cast<long long>(k) * kThreads;
    if (i < n) y[i] = x[i] + 1.f;
  }
})";

struct Tile {
  int threads, items;
};

// What one process did, as the child writes it.
struct ChildReport {
  int from_record = -1, timed = -1, index = -1, stored = -1, wrong = -1;
  long long nvrtc = -1;
};

// Runs this test binary again, as a fresh process, for the child test case alone.
ChildReport run_child(const std::string& cache_dir, const std::string& out) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("KJIT_CACHE_DIR=", 0) != 0) env.emplace_back(*e);
  env.push_back("KJIT_CACHE_DIR=" + cache_dir);
  env.push_back("KJIT_TEST_TUNE_OUT=" + out);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe", tc = "-tc=autotune child*";
  char* argv[] = {exe.data(), tc.data(), nullptr};
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, envp.data()) == 0);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE_MESSAGE((WIFEXITED(status) && WEXITSTATUS(status) == 0), "child status " << status);
  ChildReport r;
  std::ifstream in(out);
  in >> r.from_record >> r.timed >> r.index >> r.stored >> r.wrong >> r.nvrtc;
  return r;
}

}  // namespace

// The child's half: only when the test below runs this binary with KJIT_TEST_TUNE_OUT set.
TEST_CASE("autotune child: tune a user template in a fresh runtime and report (run as a child)") {
  const char* out = std::getenv("KJIT_TEST_TUNE_OUT");
  if (!out) return;
  kjit::Runtime rt;  // its cache: KJIT_CACHE_DIR, the parent's temp folder
  rt.templates().add("test/add_one.cuh", kSource);
  const long long n = (1 << 22) + 77;
  std::vector<float> hx(static_cast<size_t>(n));
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = static_cast<float>(i % 4099);
  kjit::DeviceBuffer x = kjit::DeviceBuffer::from_host(rt, hx), y(rt, hx.size() * 4);
  std::vector<Tile> tiles;
  for (int t : {64, 256, 1024})
    for (int i : {1, 4}) tiles.push_back(Tile{t, i});
  kjit::Autotuner<Tile> tuner("test.add_one", 1, tiles, [](const Tile& t) {
    return std::to_string(t.threads) + "x" + std::to_string(t.items);
  });
  tuner.key("n", n).depends_on(rt, "test/add_one.cuh");
  auto launch_of = [&](const Tile& t) -> kjit::Launch {
    const kjit::Kernel k =
        rt.kernel(kjit::Spec("test/add_one.cuh", "add_one").value(t.threads).value(t.items));
    kjit::LaunchConfig cfg;
    cfg.block.x = static_cast<unsigned>(t.threads);
    cfg.grid.x = static_cast<unsigned>((n + t.threads * t.items - 1) / (t.threads * t.items));
    const float* xp = x.as<float>();
    float* yp = y.as<float>();
    return [=](CUstream s) { k(s, cfg, xp, yp, n); };
  };
  const kjit::TuneResult<Tile> r = tuner.tune(rt, launch_of);
  y.fill_bytes(0xff);  // NaN: the winner must write every element
  kjit::Stream s(rt);
  launch_of(r.config)(s);
  s.synchronize();
  const std::vector<float> hy = y.to_host<float>(hx.size());
  int wrong = 0;
  for (size_t i = 0; i < hx.size(); ++i) wrong += hy[i] != hx[i] + 1.f;
  std::ofstream(out) << r.from_record << " " << r.timed << " " << r.index << " " << r.stored << " "
                     << wrong << " " << rt.stats().compiler.nvrtc_compiles << "\n";
}

TEST_CASE("autotune: a user template's winner is stored; the next process reuses it untimed") {
  kjit_test::TempDir dir;
  const std::string cache = dir.path + "/cache", out = dir.path + "/report";
  const ChildReport first = run_child(cache, out);
  CHECK(first.from_record == 0);
  CHECK(first.timed == 6);
  CHECK(first.stored == 1);
  CHECK(first.wrong == 0);
  CHECK(first.nvrtc == 6);  // every candidate compiled once
  const ChildReport second = run_child(cache, out);
  CHECK(second.from_record == 1);
  CHECK(second.timed == 0);
  CHECK(second.index == first.index);
  CHECK(second.wrong == 0);
  CHECK(second.nvrtc == 0);  // the winner's cubin comes from the disk cache too
  MESSAGE("winner: candidate " << first.index << " of 6");
}

TEST_CASE("autotune: the timing rule measures a kernel's time per call") {
  kjit::Runtime& rt = kjit_test::runtime();
  rt.templates().add("test/add_one.cuh", kSource);
  const long long n = 1 << 24;
  kjit::DeviceBuffer x(rt, static_cast<size_t>(n) * 4), y(rt, static_cast<size_t>(n) * 4);
  const kjit::Kernel k = rt.kernel(kjit::Spec("test/add_one.cuh", "add_one").value(256).value(4));
  kjit::LaunchConfig cfg;
  cfg.block.x = 256;
  cfg.grid.x = static_cast<unsigned>(n / 1024);
  kjit::Stream s(rt);
  int calls = 0;
  const float ms = kjit::time_calls(rt, s, [&](CUstream st) {
    ++calls;
    k(st, cfg, x.as<float>(), y.as<float>(), n);
  });
  // 128 MiB moved: at 2-5 TB/s about 27-70 us per call.
  CHECK(ms > 0.005f);
  CHECK(ms < 1.0f);
  CHECK(calls >= 2 + 5);
  MESSAGE("add_one over 64 MiB: " << ms * 1000 << " us per call, " << calls << " calls");
  kjit::TimingRule bad;
  bad.rounds = 0;
  CHECK_KJIT_ERROR(kjit::time_calls(
                       rt, s, [&](CUstream) {}, bad),
                   kjit::Errc::InvalidArgument);
}
