// Record and replay on the device (kjit/record.hpp, docs/TOOLS.md "Deploying an app's kernels"):
// a runtime recording a run of a user kernel and two built-in ops; kjit-precompile filling a fresh
// cache from the recording, for this device's arch and SM count; then a runtime on that cache,
// read-only, doing the same run with 0 NVRTC compiles and the same results.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kjit/kjit.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/ops/layer_norm.hpp"
#include "kjit/reference.hpp"
#include "test_util.hpp"

namespace {

const char* const kScale = R"(#include "app/common.cuh"
template <class T, int kScale>
__global__ void scale(const T* x, T* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = app::times<kScale>(x[i]);
})";
const char* const kCommon = R"(#pragma once
namespace app { template <int k, class T> T times(T v) { return v * k; } }
)";

struct Outputs {
  std::vector<float> scaled, gn, ln, ln_unaligned;
  kjit::RuntimeStats stats;
};

// The app's run: its own kernel, a GroupNorm and a LayerNorm, on fixed random inputs.
Outputs run_app(kjit::RuntimeOptions opts) {
  kjit::Runtime rt(std::move(opts));
  rt.templates().add("app/common.cuh", kCommon);
  rt.templates().add("app/scale.cuh", kScale);
  kjit::Stream stream(rt);
  std::mt19937 gen(24);
  std::normal_distribution<float> nd(0.5f, 2.f);
  auto random = [&](size_t n) {
    std::vector<float> v(n);
    for (float& f : v) f = nd(gen);
    return v;
  };
  Outputs out;

  const int n = 100003;
  const std::vector<float> hx = random(n);
  kjit::DeviceBuffer x = kjit::DeviceBuffer::from_host(rt, hx), y(rt, n * sizeof(float));
  y.fill_bytes(0xff);
  kjit::Kernel k = rt.kernel(kjit::Spec("app/scale.cuh", "scale").type(kjit::DType::F32).value(3));
  kjit::LaunchConfig cfg;
  cfg.grid.x = (n + 255) / 256;
  cfg.block.x = 256;
  k(stream, cfg, x.ptr(), y.ptr(), n);

  auto gp = kjit::ops::GroupNormProblem::from_shape({4, 96, 17, 19}, 24, kjit::DType::F32);
  const size_t gsize = static_cast<size_t>(gp.N * gp.C * gp.S);
  const std::vector<float> gx = random(gsize), gw = random(96), gb = random(96);
  kjit::DeviceBuffer dgx = kjit::DeviceBuffer::from_host(rt, gx), dgy(rt, gsize * 4),
                     dgw = kjit::DeviceBuffer::from_host(rt, gw),
                     dgb = kjit::DeviceBuffer::from_host(rt, gb);
  dgy.fill_bytes(0xff);
  kjit::ops::group_norm(rt, gp, dgx.as<void>(), dgy.as<void>(), dgw.as<void>(), dgb.as<void>(), {},
                        stream);

  auto lp = kjit::ops::LayerNormProblem::layer_norm(300, 1000, kjit::DType::F32);
  const size_t lsize = 300 * 1000;
  const std::vector<float> lx = random(lsize), lw = random(1000), lb = random(1000);
  kjit::DeviceBuffer dlx = kjit::DeviceBuffer::from_host(rt, lx), dly(rt, lsize * 4),
                     dlw = kjit::DeviceBuffer::from_host(rt, lw),
                     dlb = kjit::DeviceBuffer::from_host(rt, lb);
  dly.fill_bytes(0xff);
  kjit::ops::layer_norm(rt, lp, dlx.as<void>(), nullptr, dly.as<void>(), nullptr, dlw.as<void>(),
                        dlb.as<void>(), {}, stream);
  // x and y 4 bytes past 16-byte alignment: another plan, recorded with "aligned": false.
  auto lp2 = kjit::ops::LayerNormProblem::layer_norm(64, 1000, kjit::DType::F32);
  kjit::DeviceBuffer dly2(rt, lsize * 4);
  dly2.fill_bytes(0xff);
  kjit::ops::layer_norm(rt, lp2, dlx.as<float>() + 1, nullptr, dly2.as<float>() + 1, nullptr,
                        dlw.as<void>(), dlb.as<void>(), {}, stream);
  stream.synchronize();
  out.ln_unaligned = dly2.to_host<float>(64 * 1000 + 1);
  out.ln_unaligned.erase(out.ln_unaligned.begin());
  out.scaled = y.to_host<float>(n);
  out.gn = dgy.to_host<float>(gsize);
  out.ln = dly.to_host<float>(lsize);
  out.stats = rt.stats();

  // Against float64: the app's kernel exactly, GroupNorm within fp32's tolerance.
  for (int i = 0; i < n; ++i) REQUIRE(out.scaled[i] == hx[i] * 3);
  const std::vector<double> ref = kjit::reference::group_norm(gp, gx, gw.data(), gb.data(), 1e-5);
  for (size_t i = 0; i < gsize; ++i)
    REQUIRE(std::fabs(out.gn[i] - ref[i]) <= 1e-4 + 1e-4 * std::fabs(ref[i]));
  for (float v : out.ln) REQUIRE(std::isfinite(v));
  for (float v : out.ln_unaligned) REQUIRE(std::isfinite(v));
  return out;
}

}  // namespace

TEST_CASE("record a run, precompile it, replay from a read-only cache with 0 NVRTC compiles") {
#ifndef KJIT_TOOLS_DIR
  MESSAGE("built without the tools (KJIT_BUILD_TOOLS=OFF): nothing to replay with");
#else
  kjit_test::TempDir dir;
  const std::string rec = dir.path + "/app.kjit.jsonl", fresh = dir.path + "/fresh";

  kjit::RuntimeOptions first;
  first.cache.dir = dir.path + "/dev-cache";
  first.cache.mode = kjit::cache::Mode::ReadWrite;
  first.record = rec;
  const Outputs a = run_app(first);
  CHECK(a.stats.compiler.nvrtc_compiles >= 3);  // a fresh cache: everything compiled

  std::ifstream in(rec);
  std::string line, text;
  int kernels = 0, problems = 0, unaligned = 0;
  while (std::getline(in, line)) {
    text += line + "\n";
    kernels += line.find("\"kernel\":\"app/scale.cuh:scale\"") != std::string::npos;
    problems += line.find("\"op\":\"group_norm\"") != std::string::npos ||
                line.find("\"op\":\"layer_norm\"") != std::string::npos;
    unaligned += line.find("\"aligned\":false") != std::string::npos;
    CHECK(line.find("\"kernel\":\"kjit/") == std::string::npos);  // ops' kernels: as problems
  }
  INFO(text);
  CHECK(kernels == 1);
  CHECK(problems == 3);  // GroupNorm, LayerNorm aligned and not
  CHECK(unaligned == 1);

  // The build pipeline's step, for this device's arch and SM count (the ops' configs use both).
  kjit::Runtime probe;
  const std::string target = probe.arch() + ":" + std::to_string(probe.props().sm_count);
  const std::string cmd = std::string(KJIT_TOOLS_DIR) + "/kjit-precompile " + rec + " -a " +
                          target + " --cache-dir " + fresh + " -q 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string log;
  char buf[512];
  for (size_t got; (got = std::fread(buf, 1, sizeof buf, p)) > 0;) log.append(buf, got);
  const int status = ::pclose(p);
  INFO(log);
  REQUIRE(status == 0);

  kjit::RuntimeOptions second;
  second.cache.dir = fresh;
  second.cache.mode = kjit::cache::Mode::ReadOnly;  // KJIT_CACHE=ro
  second.record.clear();
  const Outputs b = run_app(second);
  CHECK(b.stats.compiler.nvrtc_compiles == 0);
  CHECK(b.stats.compiler.disk.hits == a.stats.compiler.nvrtc_compiles);
  CHECK(b.scaled == a.scaled);
  CHECK(b.gn == a.gn);
  CHECK(b.ln == a.ln);
  CHECK(b.ln_unaligned == a.ln_unaligned);
  MESSAGE("recorded " << a.stats.compiler.nvrtc_compiles << " compiles; replayed with "
                      << b.stats.compiler.nvrtc_compiles << " NVRTC compiles, "
                      << b.stats.compiler.disk.hits << " disk hits");
#endif
}
