// LayerNorm / RMSNorm's plans: what the op, its autotuning and its registry entry share. Still
// public headers only, as a host app's op would be written.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "kjit/kernel.hpp"
#include "kjit/op/plan_table.hpp"
#include "kjit/op/stream_workspaces.hpp"
#include "kjit/ops/layer_norm.hpp"

namespace kjit::ops {

// All int64: a key without padding bytes (the table hashes and compares it bytewise).
struct LnKey {
  int64_t kind, dtype, param_dtype, activation, has_weight, has_bias, residual, aligned;
  int64_t in_place;  // an output aliases an input: replicas = 1
  int64_t rows, width;
  // A config forced through LayerNormOptions::config (all zero otherwise).
  int64_t forced, threads, team, vec, iters, cluster, stream, replicas, coop;
  int64_t autotune;
};

struct LnPlan {
  Kernel kernel;
  LaunchConfig launch;
  LayerNormConfig config;
  // Programmatic grids of at most one wave let the stream's next kernel be scheduled as they
  // start (the kernel's `trigger`): that hides the next launch's latency behind a short kernel.
  // Larger grids do not: a dependent's early CTAs would take SM slots from this kernel's later
  // ones.
  int trigger = 0;
  const char* op = "layer_norm";  // norm_kind_name, for errors
  // Cooperative plans (config.coop > 1): their workspace (a float4 of partial statistics per CTA,
  // two barrier words per row), and the plan a call runs where they cannot: inside a capture on
  // a stream without a workspace, or once the device refused the grid (`refused`). None for a
  // pinned config.
  size_t partials_bytes = 0, barrier_bytes = 0;
  std::unique_ptr<LnPlan> fallback;
  mutable std::atomic<bool> refused{false};
};

// A call's operands, as the kernel takes them.
struct LnArgs {
  const void *x, *r;
  void *y, *s;
  const void *w, *b;
  float eps;
  int width;
  long long rows;
};

// The op's per-runtime state (Runtime::extension<LnState>()).
struct LnState {
  explicit LnState(Runtime&) {}
  op::PlanTable<LnKey, LnPlan> plans;
  op::BarrierWorkspaces workspaces;  // cooperative plans': each stream's own
};

// The kernel of config c (validated against p) and its launch; CaptureCompile (with the op's
// hint) when it would compile while `stream` is being captured.
std::unique_ptr<LnPlan> layer_norm_plan(Runtime& rt, const LayerNormProblem& p,
                                        const LayerNormConfig& c, bool aligned, CUstream stream);

// Enqueues plan's kernel on `stream`: a cooperative plan with the stream's workspace in `ws`
// (null: the runtime's), allocated on first use; inside a capture on a stream without one, the
// plan's fallback runs, or CaptureCompile without one. Once the stream has its workspace, it
// allocates nothing and looks it up under a shared lock released before the launch.
void launch_layer_norm_plan(Runtime& rt, const LnPlan& plan, const LnArgs& a, CUstream stream,
                            op::BarrierWorkspaces* ws = nullptr);

// KJIT_AUTOTUNE=1 (read once per process, as for the other ops).
bool layer_norm_autotune_env();

// Times layer_norm_candidates on scratch buffers and returns the fastest (kjit::Autotuner: stored
// in the disk cache, reused by later processes without timing). CaptureCompile when it would
// have to time them while `caller` is being captured.
LayerNormConfig layer_norm_autotune(Runtime& rt, const LayerNormProblem& p, bool aligned, float eps,
                                    CUstream caller);

}  // namespace kjit::ops
