// LayerNorm / RMSNorm autotuning through kjit::Autotuner: every candidate config timed on scratch
// buffers of the problem's size, the fastest remembered in the disk cache. Public headers only.
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kjit/autotune.hpp"
#include "kjit/cuda.hpp"
#include "kjit/error.hpp"
#include "kjit/op/checks.hpp"
#include "kjit/op/launch.hpp"
#include "ops/layer_norm_plan.hpp"

namespace kjit::ops {
namespace {

// The runtime's context current on this thread for a scope (the driver calls below need it; a
// host app's thread may have none or another one current).
class CurrentContext {
 public:
  // Both entry points are looked up here: the destructor must not throw.
  explicit CurrentContext(Runtime& rt)
      : pop_(reinterpret_cast<PFN_cuCtxPopCurrent_v4000>(driver_proc("cuCtxPopCurrent", 4000))) {
    auto push = reinterpret_cast<PFN_cuCtxPushCurrent_v4000>(driver_proc("cuCtxPushCurrent", 4000));
    if (CUresult r = push(rt.context()); r != CUDA_SUCCESS)
      throw Error(Errc::Cuda, "layer_norm autotune: cuCtxPushCurrent failed (" +
                                  std::to_string(static_cast<int>(r)) + ")");
  }
  ~CurrentContext() {
    CUcontext popped = nullptr;
    pop_(&popped);
  }
  CurrentContext(const CurrentContext&) = delete;
  CurrentContext& operator=(const CurrentContext&) = delete;

 private:
  PFN_cuCtxPopCurrent_v4000 pop_;
};

// Every operand of a call, on the device, in as many sets as it takes to exceed twice the L2
// (at most 256): the calls rotate through them, so that each candidate is timed reading memory,
// as the app's calls will, and not a working set the L2 holds. (Timed on one set, RMSNorm f32
// 32768x128 picked threads=512 team=8: 9.74 us under kjit-bench's rotation, against 9.68 for
// the heuristic's config and 9.57 for the best.) A set holds x, residual, y, sum [rows, width]
// (residual and sum only when the problem has them) and weight, bias [width], each 256-byte
// aligned, offset by one element when the caller's pointers are not 16-byte aligned. Filled on a
// stream of its own (DeviceBuffer's helpers synchronize the whole context, which would wait for
// other threads' work and break another thread's global-mode capture).
struct Scratch {
  Scratch(Runtime& rt, const LayerNormProblem& p, bool aligned) {
    const size_t esz = dtype_size(p.dtype), off = aligned ? 0 : esz;
    auto round = [](size_t b) { return (b + 16 + 255) / 256 * 256; };
    const size_t n = round(static_cast<size_t>(p.rows * p.width) * esz);
    const size_t w = round(static_cast<size_t>(p.width) * dtype_size(p.param_dtype));
    const size_t sizes[6] = {n, p.residual ? n : 0, n, p.residual ? n : 0, w, w};
    size_t set = 0;
    for (size_t b : sizes) set += b;
    sets = rotating_sets(rt, set);
    buf = DeviceBuffer(rt, set * static_cast<size_t>(sets));
    auto memset = reinterpret_cast<PFN_cuMemsetD8Async_v3020>(driver_proc("cuMemsetD8Async", 3020));
    Stream s(rt);
    const CurrentContext current(rt);
    // 0x3c: 0.0115 in fp32, 1.06 in fp16, 0.0114 in bf16; finite everywhere.
    if (CUresult r = memset(buf.ptr(), 0x3c, buf.bytes(), s); r != CUDA_SUCCESS)
      throw Error(Errc::Cuda, "layer_norm autotune: cuMemsetD8Async failed (" +
                                  std::to_string(static_cast<int>(r)) + ")");
    for (int k = 0; k < sets; ++k) {
      size_t at = buf.ptr() + set * static_cast<size_t>(k);
      for (int i = 0; i < 6; ++i) {
        ptr.push_back(reinterpret_cast<void*>(at + (i < 4 ? off : 0)));
        at += sizes[i];
      }
    }
    s.synchronize();
  }
  // Operand i (x, residual, y, sum, weight, bias) of set k.
  void* at(int k, int i) const { return ptr[static_cast<size_t>(k * 6 + i)]; }
  DeviceBuffer buf;
  int sets = 1;
  std::vector<void*> ptr;
};

}  // namespace

bool layer_norm_autotune_env() {
  // Read once: plan_for asks on every call, and the hot path reads no environment.
  static const bool on = [] {
    const char* v = std::getenv("KJIT_AUTOTUNE");
    return v && std::strcmp(v, "1") == 0;
  }();
  return on;
}

LayerNormConfig layer_norm_autotune(Runtime& rt, const LayerNormProblem& p, bool aligned, float eps,
                                    CUstream caller) {
  const char* op = norm_kind_name(p.kind);
  // Version 3: cooperative candidates (coop) among the long rows' (records of version 2 never
  // timed them; version 1's were timed in the L2).
  kjit::Autotuner<LayerNormConfig> tuner(op, 3, layer_norm_candidates(p, Target::of(rt), aligned),
                                         [](const LayerNormConfig& c) { return c.describe(); });
  tuner.key("problem", p.describe()).key("aligned", aligned ? 1 : 0);
  tuner.key("pdl", op::programmatic_launch(rt) ? 1 : 0);
  // A candidate the device cannot schedule (a cluster too large for it) is not one here. Built
  // for the caller's stream: a stored choice not loaded yet is then a CaptureCompile inside a
  // capture, not a compile there.
  auto build = [&](const LayerNormConfig& c) {
    std::shared_ptr<LnPlan> plan = layer_norm_plan(rt, p, c, aligned, caller);
    if (!plan->kernel.fits(plan->launch))
      throw Error(Errc::Unsupported, std::string(op) + ": " + c.describe() +
                                         " cannot be scheduled on " + rt.props().name);
    return plan;
  };
  if (auto stored = tuner.recall(rt, [&](const LayerNormConfig& c) -> Launch {
        build(c);
        return {};
      }))
    return stored->config;
  // Timing allocates and synchronizes, which would invalidate the caller's capture.
  if (op::capturing(rt, caller))
    op::capture_error(op, "autotuning would time the candidates", p.describe(),
                      "call prepare_layer_norm with autotune before capturing");
  const Scratch s(rt, p, aligned);
  const int width = static_cast<int>(p.width);
  const long long rows = p.rows;
  // Cooperative candidates' workspaces are a set of autotuning's own, freed when it returns
  // (tuning has waited for its stream), as GroupNorm's autotuning keeps its own: the runtime's
  // set would keep them until the Runtime goes, and its entry for the tuning stream's handle may
  // belong to an earlier stream that a live graph still uses.
  const CurrentContext current(rt);  // while `ws` frees
  op::BarrierWorkspaces ws;
  return tuner
      .tune(rt,
            [&](const LayerNormConfig& c) -> Launch {
              std::shared_ptr<LnPlan> plan = build(c);
              return [plan, &rt, &s, &p, &ws, eps, width, rows, k = 0](CUstream st) mutable {
                k = (k + 1) % s.sets;
                launch_layer_norm_plan(
                    rt, *plan,
                    {s.at(k, 0), p.residual ? s.at(k, 1) : nullptr, s.at(k, 2),
                     p.residual ? s.at(k, 3) : nullptr, p.has_weight ? s.at(k, 4) : nullptr,
                     p.has_bias ? s.at(k, 5) : nullptr, eps, width, rows},
                    st, &ws);
              };
            })
      .config;
}

}  // namespace kjit::ops
