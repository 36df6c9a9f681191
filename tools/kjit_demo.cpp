// kjit-demo: the two seed workloads (docs/ARCHITECTURE.md, "The seed workloads") run once on the
// GPU, checked against the float64 CPU reference, and timed. The README's main job runs it after
// kjit-precompile, so the kernels come from the disk cache (the summary line says how many NVRTC
// compiles it needed). Without a GPU it says so and exits 0: everything before it (build,
// precompile) needs none.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "kjit/host_math.hpp"
#include "kjit/kjit.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/ops/linear_gn_min.hpp"
#include "kjit/reference.hpp"
#include "tool_util.hpp"

namespace {

std::vector<float> normal(size_t n, float mean, float sd, uint64_t seed) {
  return kjit::host::random_normal(kjit::DType::F32, n, mean, sd, seed);
}

// Device time of one call: CUDA events around a single call (after `warmup` calls), median of
// `calls` such measurements, in microseconds. Inputs stay in L2 where they fit.
double device_us_per_call(kjit::Runtime& rt, CUstream stream, int warmup, int calls,
                          const std::function<void()>& call) {
  kjit::Event start(rt), stop(rt);
  for (int i = 0; i < warmup; ++i) call();
  std::vector<double> us;
  for (int i = 0; i < calls; ++i) {
    start.record(stream);
    call();
    stop.record(stream);
    stop.synchronize();
    us.push_back(1000.0 * stop.ms_since(start));
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

void finish(kjit::Runtime& rt, CUstream stream) {
  kjit::Event done(rt);
  done.record(stream);
  done.synchronize();
}

// silu(group_norm(x, 32, weight, bias, 1e-5)) on x of 8x256x24x24 fp32, random affine.
bool group_norm_seed(kjit::Runtime& rt, CUstream stream, int calls) {
  using namespace kjit::ops;
  GroupNormProblem p = GroupNormProblem::from_shape({8, 256, 24, 24}, 32, kjit::DType::F32);
  p.activation = Activation::SiLU;
  p.has_weight = p.has_bias = true;
  const GroupNormOptions opt;  // eps 1e-5
  const size_t n = static_cast<size_t>(p.N * p.C * p.S);
  std::printf("GroupNorm+SiLU   x [8, 256, 24, 24] fp32, G=32, affine\n");
  const GroupNormConfig cfg = prepare_group_norm(rt, p, opt);
  std::printf("  kernel: %s\n", cfg.describe().c_str());

  const auto x = normal(n, 1.f, 2.f, 42);
  const auto w = normal(static_cast<size_t>(p.C), 1.f, 0.5f, 43);
  const auto b = normal(static_cast<size_t>(p.C), 0.f, 0.5f, 44);
  auto dx = kjit::DeviceBuffer::from_host(rt, x), dw = kjit::DeviceBuffer::from_host(rt, w),
       db = kjit::DeviceBuffer::from_host(rt, b);
  kjit::DeviceBuffer dy(rt, n * sizeof(float));
  auto call = [&] {
    group_norm(rt, p, reinterpret_cast<void*>(dx.ptr()), reinterpret_cast<void*>(dy.ptr()),
               reinterpret_cast<void*>(dw.ptr()), reinterpret_cast<void*>(db.ptr()), opt, stream);
  };
  dy.fill_bytes(0xFF);    // NaN: an element the kernel does not write fails the check
  kjit::synchronize(rt);  // the copies and the memset are not ordered with `stream`
  call();
  finish(rt, stream);
  const auto ref = kjit::reference::group_norm(p, x, w.data(), b.data(), opt.eps);
  const auto e = kjit::host::compare(dy.to_host<float>(n), ref, 1e-4, 1e-4);
  const bool pass = e.nonfinite == 0 && e.rel_l2 <= 1e-5;
  std::printf(
      "  check: %s  (all %zu elements vs float64 CPU reference: rel L2 %.2e <= 1e-5, "
      "allclose(1e-4) %s, non-finite %lld)\n",
      pass ? "PASS" : "FAIL", n, e.rel_l2, e.allclose ? "yes" : "no", e.nonfinite);
  const double us = device_us_per_call(rt, stream, 5, calls, call);
  std::printf(
      "  device time per call: %.2f us  (median of %d, CUDA events around one launch; "
      "x and y stay in L2)\n",
      us, calls);
  return pass;
}

// The seed module (docs/ARCHITECTURE.md): min over channels of GroupNorm(x W^T + lb) + bias, x
// [1024, 8192], W [8192, 8192], G = 512, strict fp32 GEMM. nn.Linear's init: W, lb ~ U(-1/sqrt(K),
// 1/sqrt(K)).
bool linear_gn_min_seed(kjit::Runtime& rt, CUstream stream, int calls) {
  using namespace kjit::ops;
  LinearGnMinProblem p;
  p.M = 1024;
  p.K = 8192;
  p.N = 8192;
  p.G = 512;
  p.precision = Precision::Fp32;
  const LinearGnMinOptions opt;  // eps 1e-5
  std::printf("Linear->GroupNorm->min->bias   x [1024, 8192], Linear(8192, 8192), G=512, fp32\n");
  const LinearGnMinInfo info = prepare_linear_gn_min(rt, p, opt);
  std::printf("  kernel: %s\n  GEMM: %s (%s, bias %s)\n", info.kernel.c_str(),
              info.gemm_algo.c_str(), info.gemm_source.c_str(),
              info.gemm_bias_epilogue ? "by the cuBLASLt epilogue" : "added by the kernel");

  const float bound = 1.f / std::sqrt(static_cast<float>(p.K));
  const auto x = normal(static_cast<size_t>(p.M * p.K), 0.f, 1.f, 1);
  const auto w = kjit::host::random_uniform(static_cast<size_t>(p.N * p.K), bound, 2);
  const auto lb = kjit::host::random_uniform(static_cast<size_t>(p.N), bound, 3);
  const auto gamma = normal(static_cast<size_t>(p.N), 1.f, 0.5f, 4);
  const auto beta = normal(static_cast<size_t>(p.N), 0.f, 0.5f, 5);
  const auto bias = normal(static_cast<size_t>(p.N), 0.f, 1.f, 6);  // torch.randn(1, N, 1, 1)
  auto dx = kjit::DeviceBuffer::from_host(rt, x), dw = kjit::DeviceBuffer::from_host(rt, w),
       dlb = kjit::DeviceBuffer::from_host(rt, lb), dg = kjit::DeviceBuffer::from_host(rt, gamma),
       dbe = kjit::DeviceBuffer::from_host(rt, beta), db = kjit::DeviceBuffer::from_host(rt, bias);
  const size_t n_out = static_cast<size_t>(p.M * p.N);
  kjit::DeviceBuffer out(rt, n_out * sizeof(float));
  auto call = [&] {
    linear_gn_min(rt, p, reinterpret_cast<void*>(dx.ptr()), reinterpret_cast<void*>(dw.ptr()),
                  dlb.as<float>(), dg.as<float>(), dbe.as<float>(), db.as<float>(), out.as<float>(),
                  opt, stream);
  };
  out.fill_bytes(0xFF);
  kjit::synchronize(rt);
  call();
  finish(rt, stream);
  const auto o = out.to_host<float>(n_out);  // [1, N, M, 1]: o[c * M + m] = min_m + bias[c]
  const std::vector<int64_t> rows = {0, 1, p.M / 3, p.M / 2, p.M - 2, p.M - 1};
  const auto mins = kjit::reference::linear_gn_min_rows(p, x.data(), w.data(), lb.data(),
                                                        gamma.data(), beta.data(), opt.eps, rows);
  const bool finite = std::all_of(o.begin(), o.end(), [](float v) { return std::isfinite(v); });
  double max_abs = 0;
  for (size_t r = 0; r < rows.size(); ++r)
    for (int64_t c = 0; c < p.N; ++c)
      max_abs = std::max(max_abs, std::fabs(o[static_cast<size_t>(c * p.M + rows[r])] -
                                            (mins[r] + bias[static_cast<size_t>(c)])));
  const bool pass = finite && max_abs <= 1e-4;
  std::printf(
      "  check: %s  (output [1, %lld, %lld, 1] all finite: %s; %zu sampled rows x %lld "
      "channels vs float64 CPU reference: max abs err %.2e <= 1e-4)\n",
      pass ? "PASS" : "FAIL", static_cast<long long>(p.N), static_cast<long long>(p.M),
      finite ? "yes" : "no", rows.size(), static_cast<long long>(p.N), max_abs);
  const double us = device_us_per_call(rt, stream, 3, calls, call);
  std::printf(
      "  device time per call: %.1f us = %.1f TFLOP/s  (median of %d, CUDA events around "
      "one call: GEMM + fused kernel)\n",
      us, 2.0 * p.M * p.N * p.K / (us * 1e-6) / 1e12, calls);
  return pass;
}

}  // namespace

int run(int argc, char** argv) {
  CLI::App app{
      "kjit-demo: run the two seed workloads (GroupNorm+SiLU 8x256x24x24 G=32; "
      "Linear->GroupNorm->min->bias 1024x8192x8192 G=512) once on the GPU, check them against "
      "the float64 CPU reference and print their device time per call. Without a GPU it says "
      "so and exits 0."};
  int calls = 20;
  app.add_option("--calls", calls, "timed calls per workload (the median is printed)")
      ->check(CLI::Range(1, 100000));
  if (const auto rc = kjit::tools::parse_args(app, argc, argv)) return *rc;

  std::string why;
  if (!kjit::gpu_available(&why)) {
    std::printf("kjit-demo: no GPU: %s; the seed workloads need a device\n", why.c_str());
    return 0;
  }
  try {
    kjit::Runtime rt;
    kjit::Stream stream(rt);
    const auto& d = rt.props();
    std::printf("kjit-demo: %s (%s, %d SMs), cache %s\n", d.name.c_str(), rt.arch().c_str(),
                d.sm_count, rt.compiler().disk_cache().dir().c_str());
    const bool gn = group_norm_seed(rt, stream, calls);
    const bool lgm = linear_gn_min_seed(rt, stream, calls);
    const kjit::RuntimeStats st = rt.stats();
    std::printf(
        "kjit-demo: %s; %llu kernel(s) loaded, %llu from the disk cache, %llu NVRTC "
        "compile(s)%s\n",
        gn && lgm ? "all checks passed" : "CHECK FAILED",
        static_cast<unsigned long long>(st.kernels_loaded),
        static_cast<unsigned long long>(st.compiler.disk.hits),
        static_cast<unsigned long long>(st.compiler.nvrtc_compiles),
        st.compiler.nvrtc_compiles ? " (kjit-precompile for this device first makes it 0)" : "");
    return gn && lgm ? 0 : 1;
  } catch (const kjit::Error& e) {
    std::fprintf(stderr, "kjit-demo: %s error: %s\n", kjit::errc_name(e.code()), e.what());
    return 1;
  }
}

int main(int argc, char** argv) {
  return kjit::tools::finish_output("kjit-demo", run(argc, argv));
}
