// kjit_remote_bench: the first call of a kernel (Compiler::get, as Runtime::kernel makes it before
// loading the module) by where the binary comes from: NVRTC, the disk cache, the remote tier on
// a loopback redis-server; and what a dead, refused or paused server adds. Each source runs in a
// fresh Compiler with a folder of its own. Exits 1 when a paused server costs a remote lookup more
// than its timeouts (loosely: connect + op timeout + 100 ms), a first call more than that over the
// slowest compile, or when the breaker never opened.
//
//   kjit_remote_bench [kernels=8] [arch=sm_90] [affine|group_norm]
//
// affine: kjit::test_affine specializations (small: ~30-50 ms of NVRTC each); group_norm: the
// heuristic's GroupNorm+SiLU kernel for 8xCx24x24, G=32, C = 64, 96, ... (~100-250 ms each).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "kjit/compiler.hpp"
#include "kjit/ops/group_norm.hpp"
#include "redis_server.hpp"

namespace {

const std::string kFleetKey = "fleet-key-of-the-remote-benchmark-0123456789";

struct TempFolder {
  std::string path;
  TempFolder() {
    char tmpl[] = "/tmp/kjit-remote-bench-XXXXXX";
    path = ::mkdtemp(tmpl) ? tmpl : "";
  }
  ~TempFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

kjit::cache::Options options(const std::string& dir, const std::string& url) {
  kjit::cache::Options o;
  o.dir = dir;
  o.quiet = true;
  o.remote.url = url;
  o.remote.key = url.empty() ? "" : kFleetKey;
  return o;
}

bool g_group_norm = false;

kjit::Spec spec(int i, const std::string& arch) {
  if (g_group_norm) {
    auto p =
        kjit::ops::GroupNormProblem::from_shape({8, 64 + 32 * i, 24, 24}, 32, kjit::DType::F32);
    const int cc = kjit::Compiler::arch_sm(arch);
    return kjit::ops::group_norm_specs(p, kjit::ops::group_norm_heuristic(p, cc, true)).at(0);
  }
  kjit::Spec s("kjit/test_kernels.cuh", "kjit::test_affine");
  s.type(kjit::DType::F32).value(1000 + i).value(7).value(true);
  return s;
}

// Milliseconds of each first call of kernels [0, n) through `c`.
std::vector<double> first_calls(kjit::Compiler& c, int n, const std::string& arch) {
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    const kjit::Spec s = spec(i, arch);
    const auto t0 = std::chrono::steady_clock::now();
    c.get(s, arch);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return ms;
}

struct Row {
  std::string what;
  std::vector<double> ms;
  std::string note;
};

void print(const Row& r) {
  std::vector<double> s = r.ms;
  std::sort(s.begin(), s.end());
  double sum = 0;
  for (double v : s) sum += v;
  std::printf("| %-48s | %9.3f | %9.3f | %9.3f | %s |\n", r.what.c_str(), s[s.size() / 2],
              sum / static_cast<double>(s.size()), s.back(), r.note.c_str());
}

std::string counts(const kjit::CompilerStats& s) {
  return "nvrtc " + std::to_string(s.nvrtc_compiles) + ", remote hits " +
         std::to_string(s.remote.hits) + ", errors " + std::to_string(s.remote.errors) +
         ", skipped " + std::to_string(s.remote.skipped);
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::max(1, std::atoi(argv[1])) : 8;
  const std::string arch = argc > 2 ? argv[2] : "sm_90";
  g_group_norm = argc > 3 && std::string(argv[3]) == "group_norm";
  if (kjit_test::redis_server_binary().empty()) {
    std::fprintf(stderr, "kjit_remote_bench: redis-server is not installed\n");
    return 77;
  }
  kjit_test::RedisServer server;
  std::vector<Row> rows;
  TempFolder compiled, remote_hit, paused;
  {
    kjit::Compiler c(options(compiled.path, server.url()));
    rows.push_back({"NVRTC compile (empty disk, empty server)", first_calls(c, n, arch), ""});
    rows.back().note = counts(c.stats());
    c.disk_cache().remote()->flush(std::chrono::seconds(10));
  }
  {
    kjit::Compiler c(options(compiled.path, ""));
    rows.push_back({"disk hit", first_calls(c, n, arch), counts(c.stats())});
  }
  {
    kjit::Compiler c(options(remote_hit.path, server.url()));
    rows.push_back({"remote hit (loopback; verified, written to disk)", first_calls(c, n, arch),
                    counts(c.stats())});
  }
  const kjit_test::ClosedPort closed;  // refuses connections; no one else can take it
  const std::string refused = "redis://127.0.0.1:" + std::to_string(closed.port());
  {
    TempFolder d;
    kjit::Compiler c(options(d.path, refused));
    rows.push_back({"connection refused, then NVRTC", first_calls(c, n, arch), counts(c.stats())});
  }
  bool bounded = true;
  {
    // Paused for the whole run: the first calls pay the op timeout until the breaker opens.
    server.pause();
    kjit::Compiler c(options(paused.path, server.url()));
    std::vector<double> ms = first_calls(c, n, arch);
    server.resume();
    const kjit::CompilerStats s = c.stats();
    rows.push_back({"paused server (SIGSTOP), then NVRTC", ms, counts(s)});
    const double limit_ms = 50 + 50 + 100;  // the default timeouts, and slack
    const double added_ms = static_cast<double>(s.remote.get_us_max) / 1000.0;
    std::printf("paused server: the slowest remote lookup took %.1f ms (limit %.0f ms)\n", added_ms,
                limit_ms);
    if (added_ms > limit_ms) bounded = false;
    if (s.remote.skipped == 0 && n > 3) bounded = false;  // the breaker must have opened
    // A whole first call, the lease included: at most one timeout over the slowest compile.
    const double slowest = *std::max_element(ms.begin(), ms.end());
    const double compile_max = *std::max_element(rows[0].ms.begin(), rows[0].ms.end());
    std::printf(
        "paused server: the slowest first call took %.1f ms (limit %.0f ms: the slowest "
        "compile + %.0f ms)\n",
        slowest, compile_max + limit_ms, limit_ms);
    if (slowest > compile_max + limit_ms) bounded = false;
  }
  std::printf("\n%d kernels (%s, %s), ms per first call\n\n", n,
              g_group_norm ? "GroupNorm+SiLU 8xCx24x24" : "kjit::test_affine<float, ...>",
              arch.c_str());
  std::printf("| %-48s | %9s | %9s | %9s | %s |\n", "source", "median", "mean", "max", "counters");
  std::printf("| %s | --: | --: | --: | --- |\n", std::string(48, '-').c_str());
  for (const Row& r : rows) print(r);
  if (!bounded)
    std::fprintf(stderr, "kjit_remote_bench: a faulty server cost more than its bound\n");
  return bounded ? 0 : 1;
}
