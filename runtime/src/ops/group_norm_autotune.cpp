// GroupNorm autotuning through kjit::Autotuner: every candidate config timed on scratch buffers
// of the problem's size, the fastest remembered in the disk cache (kjit/autotune.hpp says what
// the record is keyed by; the key below adds the problem and the switches that change what a
// candidate runs).
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

// Version 3: the candidates are timed by kjit::TimingRule (version 2 timed 5 x 10 calls).
kjit::Autotuner<GroupNormConfig> make_tuner(const GroupNormProblem& p, bool aligned,
                                            std::vector<GroupNormConfig> cands) {
  kjit::Autotuner<GroupNormConfig> tuner("group_norm", 3, std::move(cands),
                                         [](const GroupNormConfig& c) { return c.describe(); });
  tuner.key("problem", p.describe()).key("param_dtype", dtype_name(p.param_dtype));
  tuner.key("aligned", aligned ? 1 : 0).key("pdl", env_pdl() ? 1 : 0);
  tuner.key("pipe_grid", env_positive("KJIT_GN_PIPE_GRID"));
  tuner.key("pipe_lag", env_positive("KJIT_GN_PIPE_LAG"));
  return tuner;
}

// A candidate's plan; one the device cannot schedule is not a candidate here.
std::shared_ptr<GnPlan> build(Runtime& rt, const GroupNormProblem& p, const GroupNormConfig& c) {
  std::shared_ptr<GnPlan> plan = build_plan(rt, p, c, nullptr);
  if (!plan->runnable)
    throw Error(Errc::Unsupported,
                "group_norm: " + c.describe() + " cannot be scheduled on " + rt.props().name);
  return plan;
}

// Inputs of the problem's size, offset by one element when the caller's are unaligned, filled on
// autotuning's own stream: DeviceBuffer's helpers synchronize the context, which would wait for
// other threads' work and break another thread's global-mode capture.
struct Scratch {
  Scratch(Runtime& rt, const GroupNormProblem& p, bool aligned, float eps)
      : bytes(static_cast<size_t>(p.N * p.C * p.S) * dtype_size(p.dtype)),
        off(aligned ? 0 : dtype_size(p.dtype)),
        x(rt, bytes + 16),
        y(rt, bytes + 16),
        w(rt, static_cast<size_t>(p.C) * 4),
        b(rt, static_cast<size_t>(p.C) * 4) {
    std::vector<unsigned char> host(bytes);
    std::mt19937 gen(1234);
    for (auto& v : host) v = static_cast<unsigned char>(gen() & 0x3f);  // finite in every dtype
    Stream s(rt);
    kjit::detail::ContextGuard g(rt.context());
    kjit::detail::check_cu(
        kjit::detail::driver().cuMemcpyHtoDAsync_fn(x.ptr() + off, host.data(), bytes, s),
        "cuMemcpyHtoDAsync");
    fill_async(w.ptr(), 0x3c, w.bytes(), s);
    fill_async(b.ptr(), 0x01, b.bytes(), s);
    s.synchronize();
    args =
        GnArgs{reinterpret_cast<const void*>(x.ptr() + off), reinterpret_cast<void*>(y.ptr() + off),
               p.has_weight ? reinterpret_cast<const void*>(w.ptr()) : nullptr,
               p.has_bias ? reinterpret_cast<const void*>(b.ptr()) : nullptr, eps};
  }
  size_t bytes, off;
  DeviceBuffer x, y, w, b;
  GnArgs args{};
};

}  // namespace

GroupNormConfig autotune(Runtime& rt, const GroupNormProblem& p, bool aligned, float eps,
                         CUstream caller) {
  GroupNormOptions tuned;
  tuned.autotune = true;
  const kjit::Autotuner<GroupNormConfig> tuner =
      make_tuner(p, aligned, group_norm_configs_for(p, Target::of(rt), tuned, aligned));
  const auto recall = tuner.recall(rt, [&](const GroupNormConfig& c) -> Launch {
    build(rt, p, c);
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
              std::shared_ptr<GnPlan> plan = build(rt, p, c);
              return [&rt, &scratch, &ws, plan](CUstream s) {
                launch_plan(rt, *plan, scratch.args, s, &ws);
              };
            })
      .config;
}

}  // namespace kjit::ops::detail
