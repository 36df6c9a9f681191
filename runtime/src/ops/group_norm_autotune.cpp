// GroupNorm autotuning through kjit::Autotuner: every candidate config timed on scratch buffers
// of the problem's size, the fastest remembered in the disk cache (kjit/autotune.hpp says what
// the record is keyed by; the key below adds the problem and the switches that change what a
// candidate runs).
#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "cuda_driver.hpp"
#include "kjit/autotune.hpp"
#include "kjit/cuda.hpp"
#include "kjit/error.hpp"
#include "kjit/op/checks.hpp"
#include "ops/env.hpp"
#include "ops/group_norm_plan.hpp"

namespace kjit::ops::detail {
namespace {

// Version 4: timed over rotating sets larger than the L2 (3: by kjit::TimingRule on one set; 2:
// 5 x 10 calls).
kjit::Autotuner<GroupNormConfig> make_tuner(const GroupNormProblem& p, bool aligned,
                                            std::vector<GroupNormConfig> cands) {
  kjit::Autotuner<GroupNormConfig> tuner("group_norm", 4, std::move(cands),
                                         [](const GroupNormConfig& c) { return c.describe(); });
  tuner.key("problem", p.describe()).key("param_dtype", dtype_name(p.param_dtype));
  tuner.key("aligned", aligned ? 1 : 0).key("pdl", env_pdl() ? 1 : 0);
  tuner.key("pipe_grid", env_positive("KJIT_GN_PIPE_GRID"));
  tuner.key("pipe_lag", env_positive("KJIT_GN_PIPE_LAG"));
  return tuner;
}

// A candidate's plan; one the device cannot schedule is not a candidate here. Built for the
// caller's stream: a stored choice not loaded yet is then a CaptureCompile inside a capture, not
// a compile there.
std::shared_ptr<GnPlan> build(Runtime& rt, const GroupNormProblem& p, const GroupNormConfig& c,
                              CUstream caller) {
  std::shared_ptr<GnPlan> plan = build_plan(rt, p, c, caller);
  if (!plan->runnable)
    throw Error(Errc::Unsupported,
                "group_norm: " + c.describe() + " cannot be scheduled on " + rt.props().name);
  return plan;
}

// x and y of the problem's size in kjit::rotating_sets sets, offset by one element when the
// caller's are unaligned: the calls rotate through them. Filled on
// autotuning's own stream: DeviceBuffer's helpers synchronize the context, which would wait for
// other threads' work and break another thread's global-mode capture.
struct Scratch {
  Scratch(Runtime& rt, const GroupNormProblem& p, bool aligned, float eps)
      : bytes(static_cast<size_t>(p.N * p.C * p.S) * dtype_size(p.dtype)),
        off(aligned ? 0 : dtype_size(p.dtype)),
        stride((bytes + 16 + 255) / 256 * 256),
        sets(rotating_sets(rt, 2 * stride)),
        x(rt, stride * static_cast<size_t>(sets)),
        y(rt, stride * static_cast<size_t>(sets)),
        w(rt, static_cast<size_t>(p.C) * 4),
        b(rt, static_cast<size_t>(p.C) * 4) {
    std::vector<unsigned char> host(bytes);
    std::mt19937 gen(1234);
    for (auto& v : host) v = static_cast<unsigned char>(gen() & 0x3f);  // finite in every dtype
    Stream s(rt);
    kjit::detail::ContextGuard g(rt.context());
    const auto& d = kjit::detail::driver();
    kjit::detail::check_cu(d.cuMemcpyHtoDAsync_fn(x.ptr() + off, host.data(), bytes, s),
                           "cuMemcpyHtoDAsync");
    for (int k = 1; k < sets; ++k)
      kjit::detail::check_cu(d.cuMemcpyDtoDAsync_fn(x.ptr() + stride * static_cast<size_t>(k) + off,
                                                    x.ptr() + off, bytes, s),
                             "cuMemcpyDtoDAsync");
    fill_async(w.ptr(), 0x3c, w.bytes(), s);
    fill_async(b.ptr(), 0x01, b.bytes(), s);
    s.synchronize();
    for (int k = 0; k < sets; ++k) {
      const size_t at = stride * static_cast<size_t>(k) + off;
      args.push_back(GnArgs{reinterpret_cast<const void*>(x.ptr() + at),
                            reinterpret_cast<void*>(y.ptr() + at),
                            p.has_weight ? reinterpret_cast<const void*>(w.ptr()) : nullptr,
                            p.has_bias ? reinterpret_cast<const void*>(b.ptr()) : nullptr, eps});
    }
  }
  size_t bytes, off, stride;
  int sets;
  DeviceBuffer x, y, w, b;
  std::vector<GnArgs> args;  // one per set
};

}  // namespace

GroupNormConfig autotune(Runtime& rt, const GroupNormProblem& p, bool aligned, float eps,
                         CUstream caller) {
  GroupNormOptions tuned;
  tuned.autotune = true;
  const kjit::Autotuner<GroupNormConfig> tuner =
      make_tuner(p, aligned, group_norm_configs_for(p, Target::of(rt), tuned, aligned));
  const auto recall = tuner.recall(rt, [&](const GroupNormConfig& c) -> Launch {
    build(rt, p, c, caller);
    return {};
  });
  if (recall) return recall->config;
  // Timing allocates and synchronizes, which would invalidate the caller's capture.
  if (op::capturing(rt, caller))
    op::capture_error("group_norm", "autotuning would time the candidates", p.describe(),
                      "call prepare_group_norm with autotune before capturing");
  const Scratch scratch(rt, p, aligned, eps);
  // Split candidates' partials live in a workspace set of autotuning's own, freed when it returns
  // (tuning has waited for its stream). The runtime's set would keep them until the Runtime
  // goes, and its entry for this handle may belong to an earlier stream a live graph still uses.
  kjit::detail::ContextGuard guard(rt.context());  // current while `ws` frees
  GnWorkspaces ws;
  return tuner
      .tune(rt,
            [&](const GroupNormConfig& c) -> Launch {
              std::shared_ptr<GnPlan> plan = build(rt, p, c, caller);
              return [&rt, &scratch, &ws, plan, k = size_t{0}](CUstream s) mutable {
                k = (k + 1) % scratch.args.size();
                launch_plan(rt, *plan, scratch.args[k], s, &ws);
              };
            })
      .config;
}

}  // namespace kjit::ops::detail
