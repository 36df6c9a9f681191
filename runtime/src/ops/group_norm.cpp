// GroupNorm op: validation, plan lookup (hot path), launch.
#include <algorithm>
#include <climits>
#include <cmath>

#include "cuda_driver.hpp"
#include "kjit/error.hpp"
#include "kjit/op/checks.hpp"
#include "kjit/op/record.hpp"
#include "kjit/ops/group_norm.hpp"
#include "ops/env.hpp"
#include "ops/group_norm_family.hpp"
#include "ops/group_norm_plan.hpp"
#include "ops/problem_json.hpp"

namespace kjit::ops {
namespace {

[[noreturn]] void bad(const GroupNormProblem& p, const std::string& what) {
  op::invalid("group_norm", "config", what, p.describe());
}

}  // namespace

void validate_call(const GroupNormProblem& p, const void* x, const void* y, const void* w,
                   const void* b, float eps) {
  validate(p);
  // Formatted only when a check fails: this runs on every call.
  auto ctx = [&] { return p.describe(); };
  op::check_eps("group_norm", eps, ctx);
  op::check_pointer("group_norm", "x", x, dtype_size(p.dtype), ctx);
  op::check_pointer("group_norm", "y", y, dtype_size(p.dtype), ctx);
  if (p.has_weight) op::check_pointer("group_norm", "weight", w, dtype_size(p.param_dtype), ctx);
  if (p.has_bias) op::check_pointer("group_norm", "bias", b, dtype_size(p.param_dtype), ctx);
  // In place (y == x) is fine: every element is read before it is written by the same thread.
  // The parameters are read by every group's CTA while others write y: never inside y.
  const size_t bytes = static_cast<size_t>(p.N * p.C * p.S) * dtype_size(p.dtype);
  const size_t pbytes = static_cast<size_t>(p.C) * dtype_size(p.param_dtype);
  op::check_disjoint("group_norm", "x", x, bytes, "y", y, bytes, true, ctx);
  if (p.has_weight)
    op::check_disjoint("group_norm", "y", y, bytes, "weight", w, pbytes, false, ctx);
  if (p.has_bias) op::check_disjoint("group_norm", "y", y, bytes, "bias", b, pbytes, false, ctx);
}

namespace detail {

constexpr const char* kReserveHint = "call reserve_group_norm_workspace before capturing";

GnKey make_key(const GroupNormProblem& p, bool aligned, bool autotune,
               const GroupNormConfig* forced) {
  return GnKey{static_cast<int64_t>(p.dtype),
               static_cast<int64_t>(p.param_dtype),
               static_cast<int64_t>(p.layout),
               static_cast<int64_t>(p.activation),
               p.has_weight,
               p.has_bias,
               aligned,
               p.N,
               p.C,
               p.S,
               p.groups,
               autotune,
               forced != nullptr,
               forced ? forced->threads : 0,
               forced ? forced->team : 0,
               forced ? forced->vec : 0,
               forced ? forced->iters : 0,
               forced ? forced->cluster : 0,
               forced ? static_cast<int64_t>(forced->family) : 0,
               forced ? forced->affine_smem : 0,
               forced ? forced->held : 0};
}

namespace {

// A pipe plan's persistent grid: as many CTAs as the device holds at once (fewer when there are
// fewer chunks). S items run ahead by about one grid of chunks: the H200 sweep found that
// better than half or twice as many (the read-ahead stays in L2; more of it evicts x before its
// A item), and at least a group plus half a grid, so that a group's S items have finished by
// the time its first A item is taken.
// KJIT_GN_PIPE_GRID and KJIT_GN_PIPE_LAG override both (any grid is correct, and the kernel
// raises a lag to a group's chunks and caps it at the tensor's): tests run the waits and the
// kernel's clamps through them.
void set_pipe_grid(const GroupNormProblem& p, GnPlan* plan) {
  const int64_t chunks = plan->launch.grid.x;
  const int64_t per_group = group_norm_split_chunks(p, plan->config);
  const int64_t resident = plan->kernel.resident_ctas(plan->launch);
  plan->runnable = resident > 0;
  const int64_t forced_grid = env_positive("KJIT_GN_PIPE_GRID");
  // Tickets run to 2 * chunks + grid: within 32 bits for chunks <= 2^30 (validate_config) and a
  // grid <= 2^30.
  const int64_t grid = forced_grid ? std::min<int64_t>(forced_grid, int64_t{1} << 30)
                                   : std::clamp<int64_t>(resident, 1, chunks);
  plan->launch.grid.x = static_cast<unsigned>(grid);
  plan->pipe_chunks = static_cast<unsigned>(chunks);
  const int64_t forced_lag = env_positive("KJIT_GN_PIPE_LAG");
  plan->pipe_lag =
      static_cast<unsigned>(forced_lag ? std::min<int64_t>(forced_lag, UINT32_MAX)
                                       : std::min(chunks, std::max(grid, per_group + grid / 2)));
  plan->partials_bytes = static_cast<size_t>(chunks + plan->num_groups) * 8;  // + group stats
  plan->barrier_bytes = static_cast<size_t>(plan->num_groups + 2) * 8;        // even words
}

}  // namespace

std::unique_ptr<GnPlan> build_plan(Runtime& rt, const GroupNormProblem& p, const GroupNormConfig& c,
                                   CUstream stream) {
  // Every config, also the heuristic's and the candidates', must be one the kernels support: a
  // wrong one would launch a grid its kernel does not expect and write wrong results silently.
  // (Vector width > 1 implies pointers the caller found aligned.)
  validate_config(p, c, rt.props().cc(), c.vec > 1);
  auto plan = std::make_unique<GnPlan>();
  plan->config = c;
  plan->groups = static_cast<int>(p.groups);
  plan->num_groups = p.N * p.groups;
  const int64_t teams = c.threads / c.team;
  const int64_t chunks = plan->num_groups * group_norm_split_chunks(p, c);
  const int64_t ctas =
      gn::row(c).has(gn::kChunked) ? chunks : (plan->num_groups + teams - 1) / teams * c.cluster;
  if (ctas > INT32_MAX)
    bad(p, "needs " + std::to_string(ctas) + " CTAs, more than a grid can hold (2^31-1)");
  plan->launch.grid.x = static_cast<unsigned>(ctas);
  plan->launch.block.x = static_cast<unsigned>(c.threads);
  // A cooperative group's CTAs meet through global memory: no hardware cluster.
  plan->launch.cluster.x = c.cooperative() ? 1u : static_cast<unsigned>(c.cluster);
  plan->launch.shared_bytes = static_cast<unsigned>(group_norm_smem_bytes(p, c));
  plan->launch.programmatic = use_pdl(rt.arch());
  plan->launch.cooperative = c.cooperative();
  const std::vector<Spec> specs = group_norm_specs(p, c);
  plan->kernel = rt.kernel(specs[0], stream);
  if (c.family == GroupNormFamily::Pipe) {
    set_pipe_grid(p, plan.get());  // grid, workspace and runnable from the device's occupancy
    return plan;
  }
  plan->runnable = plan->kernel.fits(plan->launch);
  if (c.needs_workspace())
    plan->partials_bytes = static_cast<size_t>(ctas) * 8;  // a float2 per CTA
  if (c.cooperative()) plan->barrier_bytes = static_cast<size_t>(plan->num_groups) * 8;  // 2 words
  if (specs.size() > 1) {  // Split: gn_apply, with the same launch
    plan->apply = rt.kernel(specs[1], stream);
    plan->runnable = plan->runnable && plan->apply.fits(plan->launch);
  }
  return plan;
}

void launch_plan(Runtime& rt, const GnPlan& plan, const GnArgs& a, CUstream stream,
                 GnWorkspaces* ws) {
  const void* x = a.x;
  void* y = a.y;
  const void* w = a.w;
  const void* b = a.b;
  const float eps = a.eps;
  const int groups = plan.groups;
  if (!plan.config.needs_workspace()) {
    const long long num_groups = plan.num_groups;
    plan.kernel(stream, plan.launch, x, y, w, b, eps, groups, num_groups);
    return;
  }
  if (plan.refused.load(std::memory_order_relaxed))
    return launch_plan(rt, *plan.fallback, a, stream, ws);
  if (!ws) ws = &rt.extension<detail::GnState>().workspaces;
  // The split pair passes its partials from one kernel to the next: the lease is held until the
  // second is enqueued, so that another thread's call on this stream cannot land between them.
  // One-launch plans (cooperative, Pipe) are ordered by the stream alone and let it go before
  // launching.
  kjit::op::StreamWorkspaces::Lease lease = ws->partials.try_lease(stream, plan.partials_bytes);
  CUdeviceptr bar = plan.barrier_bytes ? ws->barriers.find(stream, plan.barrier_bytes) : 0;
  if (!lease.ptr() || (plan.barrier_bytes && !bar)) {
    lease.release();
    if (plan.fallback && op::capturing(rt, stream))
      return launch_plan(rt, *plan.fallback, a, stream, ws);
    lease = ws->partials.lease(rt, stream, plan.partials_bytes, "group_norm", kReserveHint);
    if (plan.barrier_bytes)
      bar = ws->barriers.get(rt, stream, plan.barrier_bytes, "group_norm", kReserveHint);
  }
  // Device addresses as the kernels' pointer parameters take them (same size: checked).
  void* part = reinterpret_cast<void*>(lease.ptr());
  const GroupNormFamily family = plan.config.family;
  if (family != GroupNormFamily::Split) lease.release();
  if (family == GroupNormFamily::Pipe) {
    const unsigned n = plan.pipe_chunks, lag = plan.pipe_lag;
    plan.kernel(stream, plan.launch, x, y, part, bar, w, b, eps, groups, n, lag);
    return;
  }
  if (plan.config.cooperative()) {
    try {
      plan.kernel(stream, plan.launch, x, y, part, bar, w, b, eps, groups);
    } catch (const Error& e) {
      if (e.code() != Errc::Unsupported || !plan.fallback || plan.forced) throw;
      plan.refused.store(true, std::memory_order_relaxed);
      launch_plan(rt, *plan.fallback, a, stream, ws);
    }
    return;
  }
  plan.kernel(stream, plan.launch, x, part);
  plan.apply(stream, plan.launch, x, y, part, w, b, eps, groups);
}

namespace {

// A plan that needs a workspace also loads a one-kernel config: group_norm_capture_fallback,
// which kjit-precompile compiles next to the plan's kernels, else (a device that cannot schedule
// it) the first other candidate that needs no workspace and loads and fits.
std::unique_ptr<GnPlan> with_fallback(Runtime& rt, const GroupNormProblem& p, bool aligned,
                                      std::unique_ptr<GnPlan> plan, CUstream stream) {
  if (!plan->config.needs_workspace()) return plan;
  // The capture fallback group_norm_configs_for names for this config, then any other.
  const Target t = Target::of(rt);
  GroupNormOptions this_config;
  this_config.config = plan->config;
  std::vector<GroupNormConfig> order{group_norm_configs_for(p, t, this_config, aligned).at(1)};
  for (const GroupNormConfig& c : group_norm_candidates(p, t, aligned))
    if (!c.needs_workspace() && c.describe() != order[0].describe()) order.push_back(c);
  for (const GroupNormConfig& c : order) {
    try {
      plan->fallback = build_plan(rt, p, c, stream);
    } catch (const Error& e) {
      // A failure that may pass (out of memory, a capture elsewhere) reaches the caller, and
      // nothing is cached: a plan cached without its fallback would keep failing captures.
      if (!candidate_rejected(e)) throw;
      continue;  // a candidate that does not compile or this device cannot run is skipped
    }
    if (plan->fallback->runnable) return plan;
  }
  plan->fallback.reset();  // captures on a stream without a workspace raise CaptureCompile
  return plan;
}

}  // namespace

}  // namespace detail

static const detail::GnPlan& plan_for(Runtime& rt, const GroupNormProblem& p, bool aligned,
                                      const GroupNormOptions& opt, CUstream stream) {
  auto& table = rt.extension<detail::GnState>().plans;
  const GroupNormConfig* forced = opt.config ? &*opt.config : nullptr;
  const bool tune = !forced && (opt.autotune || detail::env_autotune());
  const detail::GnKey key = detail::make_key(p, aligned, tune, forced);
  if (const detail::GnPlan* plan = table.find(key)) return *plan;
  return *table.find_or_build(key, [&]() -> std::unique_ptr<detail::GnPlan> {
    const op::ProblemScope rec = op::record_problem(
        rt, [&] { return forced ? std::string() : group_norm_problem_json(p); }, aligned, tune);
    if (forced) {
      validate_config(p, *forced, rt.props().cc(), aligned);
      auto plan = detail::build_plan(rt, p, *forced, stream);
      if (!plan->runnable)
        bad(p, "config " + forced->describe() + " cannot be scheduled on " + rt.props().name);
      plan->forced = true;
      return detail::with_fallback(rt, p, aligned, std::move(plan), stream);
    }
    if (tune) {
      auto plan =
          detail::build_plan(rt, p, detail::autotune(rt, p, aligned, opt.eps, stream), stream);
      // A stored choice this device cannot schedule (a GPU of the same name with fewer SMs, MPS
      // limits) falls back to the untuned path below.
      if (plan->runnable) return detail::with_fallback(rt, p, aligned, std::move(plan), stream);
    }
    // The heuristic's choice (what group_norm_configs_for names first), unless the device cannot
    // co-schedule its cluster: then the first candidate it can.
    const Target t = Target::of(rt);
    GroupNormOptions plain;
    std::vector<GroupNormConfig> order{group_norm_configs_for(p, t, plain, aligned).front()};
    for (const GroupNormConfig& c : group_norm_candidates(p, t, aligned))
      if (c.describe() != order[0].describe()) order.push_back(c);
    for (const GroupNormConfig& c : order) {
      auto plan = detail::build_plan(rt, p, c, stream);
      if (plan->runnable) return detail::with_fallback(rt, p, aligned, std::move(plan), stream);
    }
    bad(p, "no launchable configuration on " + rt.props().name);
  });
}

// An empty tensor enqueues nothing. With N == 0 a config the caller forced must still be one the
// problem accepts (it would be rejected as soon as a batch arrived); with S == 0 the groups are
// empty and no config describes them (the heuristic's own has iters = 0), so none is checked.
static bool empty_problem(Runtime& rt, const GroupNormProblem& p, const GroupNormOptions& opt,
                          bool aligned) {
  if (p.N != 0 && p.S != 0) return false;
  if (opt.config && p.S != 0) validate_config(p, *opt.config, rt.props().cc(), aligned);
  return true;
}

void group_norm(Runtime& rt, const GroupNormProblem& p, const void* x, void* y, const void* weight,
                const void* bias, const GroupNormOptions& opt, CUstream stream) {
  validate_call(p, x, y, weight, bias, opt.eps);
  const bool aligned =
      ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
  if (empty_problem(rt, p, opt, aligned)) return;
  const detail::GnPlan& plan = plan_for(rt, p, aligned, opt, stream);
  detail::launch_plan(
      rt, plan,
      detail::GnArgs{x, y, p.has_weight ? weight : nullptr, p.has_bias ? bias : nullptr, opt.eps},
      stream);
}

GroupNormConfig prepare_group_norm(Runtime& rt, const GroupNormProblem& p,
                                   const GroupNormOptions& opt) {
  validate(p);
  if (empty_problem(rt, p, opt, true))
    return opt.config ? *opt.config : group_norm_heuristic(p, Target::of(rt));
  return plan_for(rt, p, true, opt, nullptr).config;
}

size_t reserve_group_norm_workspace(Runtime& rt, const GroupNormProblem& p,
                                    const GroupNormOptions& opt, CUstream stream) {
  validate(p);
  if (empty_problem(rt, p, opt, true)) return 0;
  const detail::GnPlan& plan = plan_for(rt, p, true, opt, stream);
  if (!plan.config.needs_workspace()) return 0;
  detail::GnWorkspaces& ws = rt.extension<detail::GnState>().workspaces;
  ws.partials.get(rt, stream, plan.partials_bytes, "group_norm", detail::kReserveHint);
  if (plan.barrier_bytes)
    ws.barriers.get(rt, stream, plan.barrier_bytes, "group_norm", detail::kReserveHint);
  return plan.partials_bytes + plan.barrier_bytes;
}

}  // namespace kjit::ops
