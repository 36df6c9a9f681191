// autotune_demo: a host application autotunes a template of its own with kjit::Autotuner, the
// tuner kjit's built-in ops use: candidate configs, a key, the winner stored in kjit's disk cache
// and reused by the next run without timing anything. Run it twice: the first run times every
// candidate, the second says "from the cache". Checks the result against the host (PASS/FAIL)
// and exits non-zero on a failure. Without a GPU it says so and exits 0.
//
// docs/API.md quotes the region between "// [autotune]" and "// [/autotune]".
#include <kjit/autotune.hpp>
#include <kjit/kjit.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

// y = a * x + b, each thread handling kItems elements kThreads apart.
const char* kSource = R"(
#include "kjit/types.cuh"
template <class T, int kThreads, int kItems>
__global__ void __launch_bounds__(kThreads)
    scale_add(const T* x, T* y, float a, float b, long long n) {
  const long long base = static_cast<long long>(blockIdx.x) * kThreads * kItems + threadIdx.x;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const long long i = base + static_cast<long long>(k) * kThreads;
    if (i < n) y[i] = kjit::from_float<T>(a * kjit::to_float(x[i]) + b);
  }
})";

struct Tile {
  int threads = 256, items = 1;
  std::string name() const {
    return "threads=" + std::to_string(threads) + " items=" + std::to_string(items);
  }
};

bool run(kjit::Runtime& rt, kjit::Stream& stream) {
  const int64_t n = int64_t{1} << 24;
  std::vector<float> hx(static_cast<size_t>(n));
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = static_cast<float>(i % 1000) - 500.f;
  kjit::DeviceBuffer x = kjit::DeviceBuffer::from_host(rt, hx), y(rt, hx.size() * sizeof(float));
  const float* xp = x.as<float>();
  float* yp = y.as<float>();
  rt.templates().add("app/scale_add.cuh", kSource);
  // [autotune]
  std::vector<Tile> tiles;
  for (int threads : {128, 256, 512})
    for (int items : {1, 2, 4, 8}) tiles.push_back(Tile{threads, items});
  kjit::Autotuner<Tile> tuner("app.scale_add", 1, tiles, [](const Tile& t) { return t.name(); });
  tuner.key("n", n).key("dtype", "f32").depends_on(rt, "app/scale_add.cuh");

  // A candidate's launch: compiled and loaded here (a candidate that does not compile is
  // skipped), run by the tuner on its own stream as often as its timing rule needs.
  auto launch_of = [&](const Tile& t) -> kjit::Launch {
    kjit::Spec spec("app/scale_add.cuh", "scale_add");
    spec.type(kjit::DType::F32).value(t.threads).value(t.items);
    const kjit::Kernel k = rt.kernel(spec);
    kjit::LaunchConfig cfg;
    cfg.block.x = static_cast<unsigned>(t.threads);
    cfg.grid.x = static_cast<unsigned>((n + t.threads * t.items - 1) / (t.threads * t.items));
    return [=](CUstream s) { k(s, cfg, xp, yp, 2.f, 1.f, static_cast<long long>(n)); };
  };
  const kjit::TuneResult<Tile> best = tuner.tune(rt, launch_of);
  launch_of(best.config)(stream);  // the app's call, with the winner
  // [/autotune]
  stream.synchronize();
  if (best.from_record)
    std::printf("autotune_demo: %s from the cache (nothing timed)\n", best.config.name().c_str());
  else
    std::printf("autotune_demo: %s fastest of %d timed, %.2f us per call%s\n",
                best.config.name().c_str(), best.timed, best.ms * 1000.0,
                best.stored ? ", stored" : " (not stored: a candidate failed and may pass)");
  const std::vector<float> hy = y.to_host<float>(hx.size());
  size_t wrong = 0;
  for (size_t i = 0; i < hx.size(); ++i) wrong += hy[i] != 2.f * hx[i] + 1.f;
  std::printf("autotune_demo: %s  (%zu values: %zu differ from 2 * x + 1)\n",
              wrong == 0 ? "PASS" : "FAIL", hx.size(), wrong);
  return wrong == 0;
}

}  // namespace

int main() {
  std::string why;
  if (!kjit::gpu_available(&why)) {
    std::printf("autotune_demo: no GPU (%s): nothing to run\n", why.c_str());
    return 0;
  }
  try {
    kjit::Runtime rt;
    kjit::Stream stream(rt);
    return run(rt, stream) ? 0 : 1;
  } catch (const kjit::Error& e) {
    std::fprintf(stderr, "autotune_demo: %s error: %s\n", kjit::errc_name(e.code()), e.what());
    return 1;
  }
}
