// embed_demo: a host application that embeds kjit through its installed package
// (find_package(kjit), kjit::kjit). On its own stream it runs GroupNorm+SiLU (directly and
// replayed from a CUDA graph), Linear -> GroupNorm -> min -> + bias, and a template of its own,
// checks each against a CPU reference (PASS/FAIL), and exits non-zero on a failure. Without a GPU
// it says so and exits 0.
//
// docs/API.md quotes the regions between "// [name]" and "// [/name]";
// tests/cpu/api_doc_examples_test.cpp checks that the quotes match this file.
#include <kjit/host_math.hpp>
#include <kjit/kjit.hpp>
#include <kjit/ops/group_norm.hpp>
#include <kjit/ops/linear_gn_min.hpp>
#include <kjit/reference.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

// Seeded random fp32 data, and device buffers from / back to host vectors: kjit's own helpers.
// DeviceBuffer::to_host does not wait for your streams: synchronize them first.
using kjit::DeviceBuffer;

std::vector<float> normal(size_t n, float mean, float sd, uint64_t seed) {
  return kjit::host::random_normal(kjit::DType::F32, n, mean, sd, seed);
}

// fp32 tolerances of kjit's tests: relative L2 error <= 1e-5 and max abs error <= 1e-4.
bool report(const char* what, const std::vector<float>& out, const std::vector<double>& ref) {
  const kjit::host::ErrorStats e = kjit::host::compare(out, ref, 1e-4, 1e-4);
  const bool pass = e.nonfinite == 0 && e.rel_l2 <= 1e-5 && e.max_abs <= 1e-4;
  std::printf("embed_demo: %-32s %s  (%zu values: rel L2 %.2e <= 1e-5, max abs %.2e <= 1e-4)\n",
              what, pass ? "PASS" : "FAIL", ref.size(), e.rel_l2, e.max_abs);
  return pass;
}

// silu(group_norm(x, 16, weight, bias, 1e-5)) on a random x [4, 64, 12, 12] fp32; then the same
// op captured into a CUDA graph and replayed on new data.
bool run_group_norm(kjit::Runtime& rt, kjit::Stream& stream) {
  // [group_norm]
  using namespace kjit::ops;
  // from_shape keeps the struct's defaults: activation SiLU, weight and bias present.
  const GroupNormProblem p = GroupNormProblem::from_shape({4, 64, 12, 12}, 16, kjit::DType::F32);
  const GroupNormOptions opt;  // eps = 1e-5, no autotuning
  const size_t n = static_cast<size_t>(p.N * p.C * p.S), c = static_cast<size_t>(p.C);
  const std::vector<float> x = normal(n, 1.f, 2.f, 1), w = normal(c, 1.f, .5f, 2),
                           b = normal(c, 0.f, .5f, 3);
  kjit::DeviceBuffer dx = DeviceBuffer::from_host(rt, x), dw = DeviceBuffer::from_host(rt, w),
                     db = DeviceBuffer::from_host(rt, b);
  kjit::DeviceBuffer dy(rt, n * sizeof(float));
  group_norm(rt, p, dx.as<float>(), dy.as<float>(), dw.as<float>(), db.as<float>(), opt, stream);
  stream.synchronize();  // DeviceBuffer::download does not wait for work on your streams
  const std::vector<float> y = dy.to_host<float>(n);
  const std::vector<double> ref = kjit::reference::group_norm(p, x, w.data(), b.data(), opt.eps);
  // [/group_norm]
  bool ok = report("group_norm (+SiLU)", y, ref);

  // [graph]
  // Compile and load ahead so that the capture compiles nothing (else Errc::CaptureCompile).
  prepare_group_norm(rt, p, opt);
  kjit::Graph graph(rt, stream, [&] {
    group_norm(rt, p, dx.as<float>(), dy.as<float>(), dw.as<float>(), db.as<float>(), opt, stream);
  });
  // A replay reads whatever the captured buffers hold when it runs.
  const std::vector<float> x2 = normal(n, -.5f, 3.f, 4);
  dx.upload(x2.data(), n * sizeof(float));
  dy.fill_bytes(0xFF);  // NaN: an element the replay does not write fails the check
  graph.launch(stream);
  stream.synchronize();
  // [/graph]
  ok &= report("group_norm replayed from a graph", dy.to_host<float>(n),
               kjit::reference::group_norm(p, x2, w.data(), b.data(), opt.eps));
  return ok;
}

// min over channels of GroupNorm(x W^T + lb) + bias: x [64, 256], Linear(256, 512), G = 32.
bool run_linear_gn_min(kjit::Runtime& rt, kjit::Stream& stream) {
  // [linear_gn_min]
  using namespace kjit::ops;
  LinearGnMinProblem p;
  p.M = 64;                      // batch (rows of x)
  p.K = 256;                     // in_features
  p.N = 512;                     // out_features = GroupNorm channels
  p.G = 32;                      // groups; precision = Precision::Fp32 (strict) by default
  const LinearGnMinOptions opt;  // eps = 1e-5
  const size_t M = static_cast<size_t>(p.M), K = static_cast<size_t>(p.K),
               N = static_cast<size_t>(p.N);
  const float bound = 1.f / std::sqrt(static_cast<float>(K));  // nn.Linear's initialization
  const std::vector<float> x = normal(M * K, 0.f, 1.f, 5),
                           w = kjit::host::random_uniform(N * K, bound, 6),
                           lb = kjit::host::random_uniform(N, bound, 7),
                           gamma = normal(N, 1.f, .5f, 8), beta = normal(N, 0.f, .5f, 9),
                           bias = normal(N, 0.f, 1.f, 10);
  kjit::DeviceBuffer dx = DeviceBuffer::from_host(rt, x), dw = DeviceBuffer::from_host(rt, w),
                     dlb = DeviceBuffer::from_host(rt, lb),
                     dgamma = DeviceBuffer::from_host(rt, gamma),
                     dbeta = DeviceBuffer::from_host(rt, beta),
                     dbias = DeviceBuffer::from_host(rt, bias);
  kjit::DeviceBuffer out(rt, N * M * sizeof(float));  // shape [1, N, M, 1]
  linear_gn_min(rt, p, dx.as<float>(), dw.as<float>(), dlb.as<float>(), dgamma.as<float>(),
                dbeta.as<float>(), dbias.as<float>(), out.as<float>(), opt, stream);
  stream.synchronize();
  const std::vector<float> o = out.to_host<float>(N * M);  // o[c * M + m] = min_m + bias[c]
  // [/linear_gn_min]
  std::vector<int64_t> rows(M);
  for (size_t m = 0; m < M; ++m) rows[m] = static_cast<int64_t>(m);
  const std::vector<double> mins = kjit::reference::linear_gn_min_rows(
      p, x.data(), w.data(), lb.data(), gamma.data(), beta.data(), opt.eps, rows);
  std::vector<double> ref(N * M);
  for (size_t ch = 0; ch < N; ++ch)
    for (size_t m = 0; m < M; ++m) ref[ch * M + m] = mins[m] + bias[ch];
  return report("linear_gn_min", o, ref);
}

// The app's own template (the README's example) through the same specialize / compile / cache /
// launch path as kjit's built-in ops.
bool run_own_template(kjit::Runtime& rt, kjit::Stream& stream) {
  const int n = 1000;
  const std::vector<float> hx = normal(n, 0.f, 10.f, 11);
  kjit::DeviceBuffer x = DeviceBuffer::from_host(rt, hx), y(rt, n * sizeof(float));
  // [own_template]
  rt.templates().add("app/scale.cuh", R"(
  template <class T, int kScale>
  __global__ void scale(const T* x, T* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * kScale;
  })");
  kjit::Kernel k = rt.kernel(kjit::Spec("app/scale.cuh", "scale").type(kjit::DType::F32).value(3));
  kjit::LaunchConfig cfg;
  cfg.grid.x = (n + 255) / 256;
  cfg.block.x = 256;
  k(stream, cfg, x.ptr(), y.ptr(), n);  // each argument exactly as the kernel declares it
  stream.synchronize();
  // [/own_template]
  const std::vector<float> hy = y.to_host<float>(n);
  int wrong = 0;
  for (int i = 0; i < n; ++i) wrong += hy[i] != hx[i] * 3.f;
  std::printf("embed_demo: %-32s %s  (%d values: %d differ from 3 * x)\n",
              k.instantiation().c_str(), wrong == 0 ? "PASS" : "FAIL", n, wrong);
  return wrong == 0;
}

bool run_all(kjit::Runtime& rt, kjit::Stream& stream) {
  const kjit::DeviceProps& d = rt.props();
  std::printf("embed_demo: kjit %s on device %d, %s (%s, %d SMs), cache %s\n", KJIT_VERSION_STRING,
              d.ordinal, d.name.c_str(), rt.arch().c_str(), d.sm_count,
              rt.compiler().disk_cache().dir().c_str());
  bool ok = run_group_norm(rt, stream);
  ok &= run_linear_gn_min(rt, stream);
  ok &= run_own_template(rt, stream);
  const kjit::RuntimeStats st = rt.stats();
  std::printf(
      "embed_demo: %s; %llu kernel(s) loaded, %llu NVRTC compile(s), %llu disk cache hit(s)\n",
      ok ? "all checks passed" : "CHECK FAILED", static_cast<unsigned long long>(st.kernels_loaded),
      static_cast<unsigned long long>(st.compiler.nvrtc_compiles),
      static_cast<unsigned long long>(st.compiler.disk.hits));
  return ok;
}

}  // namespace

int main() {
  // [main]
  std::string why;
  if (!kjit::gpu_available(&why)) {
    std::printf("embed_demo: no GPU (%s): nothing to run\n", why.c_str());
    return 0;
  }
  try {
    kjit::Runtime rt;         // device KJIT_DEVICE (default 0), in its primary context
    kjit::Stream stream(rt);  // the app's own non-blocking stream
    return run_all(rt, stream) ? 0 : 1;
  } catch (const kjit::Error& e) {  // kjit's one exception type
    std::fprintf(stderr, "embed_demo: %s error: %s\n", kjit::errc_name(e.code()), e.what());
    return 1;
  }
  // [/main]
}
