// kjit's own host cost per call, on the fake driver (tests/fake_driver/): the fake's
// cuLaunchKernelEx checks the launch and runs nothing, so what a call costs above a bare call
// of it is kjit's. Not a test: `kjit_host_bench [case] [calls]` prints ns per call (the median of
// 15 batches) for each case, or runs only `case` `calls` times (for valgrind --tool=callgrind,
// whose instruction counts do not depend on the machine's load).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <cudaTypedefs.h>

#include "host_env.hpp"
#include "kjit/c_api.h"
#include "kjit/ops/group_norm.hpp"
#include "kjit/ops/layer_norm.hpp"

namespace {

using kjit::DType;
using kjit::ops::LayerNormProblem;
using kjit_host::operand;

struct Case {
  std::string name;
  std::function<void()> call;
};

double ns_per_call(const std::function<void()>& f, int calls) {
  std::vector<double> batches;
  for (int b = 0; b < 15; ++b) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) f();
    const auto t1 = std::chrono::steady_clock::now();
    batches.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / calls);
  }
  std::sort(batches.begin(), batches.end());
  return batches[batches.size() / 2];
}

std::vector<Case> cases(kjit::Runtime& rt, CUstream stream) {
  std::vector<Case> out;
  const LayerNormProblem ln = LayerNormProblem::layer_norm(16384, 4096, DType::BF16);
  const LayerNormProblem held = LayerNormProblem::layer_norm(1, 65536, DType::F32);
  kjit::ops::prepare_layer_norm(rt, ln);
  kjit::ops::prepare_layer_norm(rt, held);
  const kjit::ops::LayerNormConfig c = kjit::ops::prepare_layer_norm(rt, ln);
  // The same kernel as layer_norm launches, launched by hand: bare, then typed.
  static kjit::Kernel k = rt.kernel(kjit::ops::layer_norm_spec(ln, c));
  static kjit::LaunchConfig cfg;
  cfg.grid.x = static_cast<unsigned>((ln.rows + c.threads / c.team - 1) / (c.threads / c.team));
  cfg.block.x = static_cast<unsigned>(c.threads);
  cfg.programmatic = true;
  static const void *x = operand(0), *y = operand(1), *w = operand(2), *b = operand(3);
  static const void* none = nullptr;
  static float eps = 1e-5f;
  static int width = static_cast<int>(ln.width), trigger = 0, coop = 1;
  static long long rows = ln.rows;
  static void* params[] = {&x,     &none, &y,       &none, &w,    &b,   &eps,
                           &width, &rows, &trigger, &none, &none, &coop};
  static const auto launch_ex =
      reinterpret_cast<PFN_cuLaunchKernelEx_v11060>(kjit::driver_proc("cuLaunchKernelEx", 11060));
  static CUlaunchAttribute attr[1];
  attr[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr[0].value.programmaticStreamSerializationAllowed = 1;
  static CUlaunchConfig bare{};
  bare.gridDimX = cfg.grid.x, bare.gridDimY = bare.gridDimZ = 1;
  bare.blockDimX = cfg.block.x, bare.blockDimY = bare.blockDimZ = 1;
  bare.hStream = stream;
  bare.attrs = attr;
  bare.numAttrs = 1;
  // The context current on this thread for the bare launches, as an app would hold it.
  const auto push =
      reinterpret_cast<PFN_cuCtxPushCurrent_v4000>(kjit::driver_proc("cuCtxPushCurrent", 4000));
  kjit::check_driver(push(rt.context()), "cuCtxPushCurrent");
  out.push_back({"bare cuLaunchKernelEx", [] {
                   if (launch_ex(&bare, k.function(), params, nullptr) != CUDA_SUCCESS)
                     std::abort();
                 }});
  out.push_back({"kjit::Kernel typed launch", [stream] {
                   k(stream, cfg, x, none, y, none, w, b, eps, width, rows, trigger,
                     static_cast<void*>(nullptr), static_cast<void*>(nullptr), coop);
                 }});
  out.push_back({"layer_norm bf16 16384x4096", [&rt, ln, stream] {
                   kjit::ops::layer_norm(rt, ln, x, nullptr, const_cast<void*>(y), nullptr, w, b,
                                         {}, stream);
                 }});
  out.push_back({"layer_norm f32 1x65536 (cluster)", [&rt, held, stream] {
                   kjit::ops::layer_norm(rt, held, x, nullptr, const_cast<void*>(y), nullptr, w, b,
                                         {}, stream);
                 }});
  out.push_back({"kjit_layer_norm (C ABI) bf16 16384x4096", [stream] {
                   if (kjit_layer_norm("layer_norm", "bf16", nullptr, 16384, 4096, 0, x, nullptr,
                                       const_cast<void*>(y), nullptr, w, b, 1e-5f, stream, 0,
                                       nullptr) != KJIT_OK)
                     std::abort();
                 }});
  const auto gn = kjit::ops::GroupNormProblem::from_shape({8, 256, 64, 64}, 32, DType::BF16);
  kjit::ops::prepare_group_norm(rt, gn);
  out.push_back({"group_norm bf16 8x256x64x64", [&rt, gn, stream] {
                   kjit::ops::group_norm(rt, gn, x, const_cast<void*>(y), w, b, {}, stream);
                 }});
  for (Case& c2 : out) c2.call();  // plans, leases: built before timing
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string why;
  if (!kjit_host::load_fake_driver(KJIT_FAKE_DRIVER, &why)) {
    std::fprintf(stderr, "kjit_host_bench: %s\n", why.c_str());
    return 1;
  }
  kjit::Runtime& rt = kjit_host::runtime();
  kjit::Stream stream(rt);
  const std::vector<Case> all = cases(rt, stream);
  if (argc >= 3) {
    const int calls = std::atoi(argv[2]);
    for (const Case& c : all)
      if (c.name.rfind(argv[1], 0) == 0) {
        for (int i = 0; i < calls; ++i) c.call();
        return 0;
      }
    std::fprintf(stderr, "kjit_host_bench: no case starts with '%s'\n", argv[1]);
    return 2;
  }
  std::printf("| case | ns per call |\n| --- | --- |\n");
  for (const Case& c : all)
    std::printf("| %s | %.1f |\n", c.name.c_str(), ns_per_call(c.call, 20000));
  return 0;
}
