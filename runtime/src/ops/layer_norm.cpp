// LayerNorm / RMSNorm op: call checks, the plan table (hot path) and the launch. Written as a
// host app writes its own op: kjit's public headers only (kjit/op/*.hpp, Runtime::extension,
// typed Kernel launches), nothing of the runtime's private code.
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kjit/error.hpp"
#include "kjit/kernel.hpp"
#include "kjit/op/checks.hpp"
#include "kjit/op/launch.hpp"
#include "kjit/op/plan_table.hpp"
#include "kjit/op/record.hpp"
#include "kjit/ops/layer_norm.hpp"
#include "ops/layer_norm_plan.hpp"
#include "ops/problem_json.hpp"

namespace kjit::ops {
namespace {

constexpr const char* kPrepareHint =
    "call prepare_layer_norm before capturing (pointers that are not 16-byte aligned use another "
    "plan: make one such call outside the capture first)";
constexpr const char* kReserveHint =
    "call reserve_layer_norm_workspace on the stream before capturing";

// A cooperative plan's workspace on `stream` in ws, allocated (or grown) first where it has none
// (CaptureCompile naming kReserveHint while the stream is being captured): partials, barriers.
std::pair<CUdeviceptr, CUdeviceptr> allocate_workspace(Runtime& rt, const LnPlan& plan,
                                                       op::BarrierWorkspaces& ws, CUstream stream) {
  return {ws.partials.get(rt, stream, plan.partials_bytes, plan.op, kReserveHint),
          ws.barriers.get(rt, stream, plan.barrier_bytes, plan.op, kReserveHint)};
}

LnKey make_key(const LayerNormProblem& p, bool aligned, bool in_place, const LayerNormConfig* f,
               bool tune) {
  return LnKey{static_cast<int64_t>(p.kind),
               static_cast<int64_t>(p.dtype),
               static_cast<int64_t>(p.param_dtype),
               static_cast<int64_t>(p.activation),
               p.has_weight,
               p.has_bias,
               p.residual,
               aligned,
               in_place,
               p.rows,
               p.width,
               f != nullptr,
               f ? f->threads : 0,
               f ? f->team : 0,
               f ? f->vec : 0,
               f ? f->iters : 0,
               f ? f->cluster : 0,
               f ? f->stream : 0,
               f ? f->replicas : 0,
               f ? f->coop : 0,
               tune};
}

// A cooperative plan's fallback: the first config of layer_norm_configs_for without coop that
// compiles and the device schedules (run in place without replicas, as `in_place` plans are).
// Other failures (out of memory, a capture elsewhere) reach the caller: a plan cached without
// its fallback would keep running a capture's fallback path into CaptureCompile.
std::unique_ptr<LnPlan> with_fallback(Runtime& rt, const LayerNormProblem& p, bool aligned,
                                      bool in_place, std::unique_ptr<LnPlan> plan,
                                      CUstream stream) {
  if (plan->config.coop == 1) return plan;
  for (LayerNormConfig c : layer_norm_configs_for(p, Target::of(rt), {}, aligned)) {
    if (c.coop > 1) continue;
    if (in_place) c = without_replicas(c);
    std::unique_ptr<LnPlan> fallback;
    try {
      fallback = layer_norm_plan(rt, p, c, aligned, stream);
    } catch (const Error& e) {
      if (e.code() != Errc::Compile && e.code() != Errc::Unsupported) throw;
      continue;
    }
    if (fallback->kernel.fits(fallback->launch)) {
      plan->fallback = std::move(fallback);
      break;
    }
  }
  return plan;
}

// The plan for p: found under a shared lock on the hot path; else built once (the first config
// of layer_norm_configs_for the device can schedule).
const LnPlan& plan_for(Runtime& rt, const LayerNormProblem& p, bool aligned, bool in_place,
                       const LayerNormOptions& opt, CUstream stream) {
  auto& table = rt.extension<LnState>().plans;
  const LayerNormConfig* forced = opt.config ? &*opt.config : nullptr;
  const bool tune = !forced && (opt.autotune || layer_norm_autotune_env());
  const LnKey key = make_key(p, aligned, in_place, forced, tune);
  if (const LnPlan* plan = table.find(key)) return *plan;
  if (in_place) {  // the plan of the same call on other outputs, without replicas: tuned once
    const LnPlan& base = plan_for(rt, p, aligned, false, opt, stream);
    return *table.find_or_build(key, [&] {
      auto plan = layer_norm_plan(rt, p, without_replicas(base.config), aligned, stream);
      return forced ? std::move(plan)
                    : with_fallback(rt, p, aligned, true, std::move(plan), stream);
    });
  }
  return *table.find_or_build(key, [&]() -> std::unique_ptr<LnPlan> {
    const op::ProblemScope rec = op::record_problem(
        rt, [&] { return forced ? std::string() : layer_norm_problem_json(p); }, aligned, tune);
    const char* op = norm_kind_name(p.kind);
    if (tune) {
      auto plan = layer_norm_plan(rt, p, layer_norm_autotune(rt, p, aligned, opt.eps, stream),
                                  aligned, stream);
      // A stored choice this device cannot schedule falls back to the untuned configs below.
      if (plan->kernel.fits(plan->launch))
        return with_fallback(rt, p, aligned, false, std::move(plan), stream);
    }
    LayerNormOptions plain = opt;
    plain.autotune = false;
    for (const LayerNormConfig& c : layer_norm_configs_for(p, Target::of(rt), plain, aligned)) {
      auto plan = layer_norm_plan(rt, p, c, aligned, stream);
      if (plan->kernel.fits(plan->launch))
        return forced ? std::move(plan)
                      : with_fallback(rt, p, aligned, false, std::move(plan), stream);
      if (forced)
        op::invalid(op, "config",
                    "config " + c.describe() + " cannot be scheduled on " + rt.props().name,
                    p.describe());
    }
    op::invalid(op, "config", "no launchable configuration on " + rt.props().name, p.describe());
  });
}

bool aligned16(std::initializer_list<const void*> ptrs) {
  uintptr_t bits = 0;
  for (const void* q : ptrs) bits |= reinterpret_cast<uintptr_t>(q);
  return (bits & 15) == 0;
}

}  // namespace

// The kernel of config c and its launch: one team per row, `cluster` CTAs per team's row.
std::unique_ptr<LnPlan> layer_norm_plan(Runtime& rt, const LayerNormProblem& p,
                                        const LayerNormConfig& c, bool aligned, CUstream stream) {
  const char* op = norm_kind_name(p.kind);
  validate_config(p, c, rt.props().cc(), aligned);
  const int64_t teams = c.threads / c.team, per_team = int64_t{c.cluster} * c.replicas * c.coop;
  const int64_t blocks = (p.rows + teams - 1) / teams;
  if (blocks > INT32_MAX / per_team)
    op::invalid(op, "rows",
                "rows = " + std::to_string(p.rows) + " need " + std::to_string(blocks) + " x " +
                    std::to_string(per_team) + " CTAs with config " + c.describe() +
                    ", more than a grid holds (2^31-1)",
                p.describe());
  const int64_t ctas = blocks * per_team;
  auto plan = std::make_unique<LnPlan>();
  plan->config = c;
  plan->op = op;
  plan->launch.grid.x = static_cast<unsigned>(ctas);
  plan->launch.block.x = static_cast<unsigned>(c.threads);
  plan->launch.cluster.x = static_cast<unsigned>(c.cluster);
  // Cluster kernels launch programmatically but never trigger early: with the early trigger,
  // back-to-back graph replays of a 16-CTA config faulted (5 of 7 runs) and, later, hung
  // (docs/ARCHITECTURE.md, "Cluster kernels never trigger their successor early"). Nor do
  // cooperative ones, whose CTAs wait for each other: none is given to a successor early.
  plan->launch.programmatic = op::programmatic_launch(rt);
  plan->trigger =
      plan->launch.programmatic && ctas <= rt.props().sm_count && c.cluster == 1 && c.coop == 1;
  if (c.coop > 1) {
    plan->launch.cooperative = true;
    plan->partials_bytes = static_cast<size_t>(ctas) * 16;  // a float4 per CTA
    plan->barrier_bytes = static_cast<size_t>(p.rows) * 8;  // two words per row
  }
  try {
    plan->kernel = rt.kernel(layer_norm_spec(p, c), stream);
  } catch (const Error& e) {
    if (e.code() != Errc::CaptureCompile) throw;
    op::capture_error(op, "compiling config " + c.describe(), p.describe(), kPrepareHint);
  }
  return plan;
}

void validate_call(const LayerNormProblem& p, const void* x, const void* residual, const void* y,
                   const void* sum, const void* weight, const void* bias, float eps) {
  validate(p);
  const char* op = norm_kind_name(p.kind);
  auto ctx = [&] { return p.describe(); };  // formatted only when a check fails
  op::check_eps(op, eps, ctx);
  const size_t esz = dtype_size(p.dtype), psz = dtype_size(p.param_dtype);
  op::check_pointer(op, "x", x, esz, ctx);
  op::check_pointer(op, "y", y, esz, ctx);
  if (p.residual) {
    op::check_pointer(op, "residual", residual, esz, ctx);
    op::check_pointer(op, "sum", sum, esz, ctx);
  }
  if (p.has_weight) op::check_pointer(op, "weight", weight, psz, ctx);
  if (p.has_bias) op::check_pointer(op, "bias", bias, psz, ctx);
  // In place is fine (y or sum the same tensor as x or residual): the thread that writes an
  // element has read it first, and no other thread reads it. Anything else must not overlap:
  // the outputs each other or the parameters, and x and residual each other (sum written over
  // x would change a residual another thread still reads).
  const size_t bytes = static_cast<size_t>(p.rows * p.width) * esz;
  const size_t pbytes = static_cast<size_t>(p.width) * psz;
  op::check_disjoint(op, "x", x, bytes, "y", y, bytes, true, ctx);
  if (p.residual) {
    op::check_disjoint(op, "x", x, bytes, "residual", residual, bytes, true, ctx);
    op::check_disjoint(op, "residual", residual, bytes, "y", y, bytes, true, ctx);
    op::check_disjoint(op, "x", x, bytes, "sum", sum, bytes, true, ctx);
    op::check_disjoint(op, "residual", residual, bytes, "sum", sum, bytes, true, ctx);
    op::check_disjoint(op, "y", y, bytes, "sum", sum, bytes, false, ctx);
  }
  for (const auto& [name, ptr, present] :
       {std::tuple{"weight", weight, p.has_weight}, std::tuple{"bias", bias, p.has_bias}}) {
    if (!present) continue;
    op::check_disjoint(op, "y", y, bytes, name, ptr, pbytes, false, ctx);
    if (p.residual) op::check_disjoint(op, "sum", sum, bytes, name, ptr, pbytes, false, ctx);
  }
}

void layer_norm(Runtime& rt, const LayerNormProblem& p, const void* x, const void* residual,
                void* y, void* sum, const void* weight, const void* bias,
                const LayerNormOptions& opt, CUstream stream) {
  validate_call(p, x, residual, y, sum, weight, bias, opt.eps);
  // What the problem does not use is passed as null, whatever the caller gave.
  const void* r = p.residual ? residual : nullptr;
  void* s = p.residual ? sum : nullptr;
  const void* w = p.has_weight ? weight : nullptr;
  const void* b = p.has_bias ? bias : nullptr;
  const bool aligned = aligned16({x, r, y, s, w, b});
  // validate_call allows no partial overlap: an output over an input is one of these.
  const bool in_place = y == x || (p.residual && (y == r || s == x || s == r));
  if (p.rows == 0) {  // nothing to do; a forced config must still fit the problem
    if (opt.config) validate_config(p, *opt.config, rt.props().cc(), aligned);
    return;
  }
  const LnPlan& plan = plan_for(rt, p, aligned, in_place, opt, stream);
  // validate: width < 2^31
  launch_layer_norm_plan(rt, plan, {x, r, y, s, w, b, opt.eps, static_cast<int>(p.width), p.rows},
                         stream);
}

void launch_layer_norm_plan(Runtime& rt, const LnPlan& plan, const LnArgs& a, CUstream stream,
                            op::BarrierWorkspaces* ws) {
  if (plan.config.coop == 1) {
    plan.kernel(stream, plan.launch, a.x, a.r, a.y, a.s, a.w, a.b, a.eps, a.width, a.rows,
                plan.trigger, static_cast<void*>(nullptr), static_cast<void*>(nullptr), 1);
    return;
  }
  if (plan.refused.load(std::memory_order_relaxed))
    return launch_layer_norm_plan(rt, *plan.fallback, a, stream, ws);
  if (!ws) ws = &rt.extension<LnState>().workspaces;
  CUdeviceptr part = ws->partials.find(stream, plan.partials_bytes);
  CUdeviceptr bar = ws->barriers.find(stream, plan.barrier_bytes);
  if (!part || !bar) {
    if (plan.fallback && op::capturing(rt, stream))
      return launch_layer_norm_plan(rt, *plan.fallback, a, stream, ws);
    std::tie(part, bar) = allocate_workspace(rt, plan, *ws, stream);
  }
  // Device addresses as the kernel's pointer parameters take them (same size: checked).
  void* part_ptr = reinterpret_cast<void*>(part);
  void* bar_ptr = reinterpret_cast<void*>(bar);
  try {
    plan.kernel(stream, plan.launch, a.x, a.r, a.y, a.s, a.w, a.b, a.eps, a.width, a.rows,
                plan.trigger, part_ptr, bar_ptr, plan.config.coop);
  } catch (const Error& e) {
    if (e.code() != Errc::Unsupported || !plan.fallback) throw;
    plan.refused.store(true, std::memory_order_relaxed);
    launch_layer_norm_plan(rt, *plan.fallback, a, stream, ws);
  }
}

void rms_norm(Runtime& rt, const LayerNormProblem& p, const void* x, const void* residual, void* y,
              void* sum, const void* weight, const LayerNormOptions& opt, CUstream stream) {
  if (p.kind != NormKind::RMSNorm)
    op::invalid("rms_norm", "kind", "rms_norm needs kind RMSNorm (layer_norm runs either)",
                p.describe());
  layer_norm(rt, p, x, residual, y, sum, weight, nullptr, opt, stream);
}

LayerNormConfig prepare_layer_norm(Runtime& rt, const LayerNormProblem& p,
                                   const LayerNormOptions& opt) {
  validate(p);
  if (p.rows == 0) {
    if (opt.config) validate_config(p, *opt.config, rt.props().cc(), true);
    return opt.config ? *opt.config : layer_norm_heuristic(p, Target::of(rt), true);
  }
  plan_for(rt, p, true, true, opt, nullptr);  // a call in place's, from the plan below
  return plan_for(rt, p, true, false, opt, nullptr).config;
}

size_t reserve_layer_norm_workspace(Runtime& rt, const LayerNormProblem& p,
                                    const LayerNormOptions& opt, CUstream stream) {
  validate(p);
  if (p.rows == 0) return 0;
  const LnPlan& plan = plan_for(rt, p, true, false, opt, stream);
  if (plan.config.coop == 1) return 0;
  allocate_workspace(rt, plan, rt.extension<LnState>().workspaces, stream);
  return plan.partials_bytes + plan.barrier_bytes;
}

}  // namespace kjit::ops
