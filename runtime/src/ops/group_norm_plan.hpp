// GroupNorm's per-runtime plan: the loaded kernel and its launch configuration for one problem.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "kjit/kernel.hpp"
#include "kjit/op/plan_table.hpp"
#include "kjit/op/stream_workspaces.hpp"
#include "kjit/ops/group_norm.hpp"
#include "ops/candidate_errors.hpp"

namespace kjit::ops::detail {

// All int64 so the key has no padding bytes (it is hashed and compared bytewise).
struct GnKey {
  int64_t dtype, param_dtype, layout, activation, has_weight, has_bias, aligned;
  int64_t N, C, S, groups, autotune;
  // A config forced through GroupNormOptions::config (all zero otherwise).
  int64_t forced, threads, team, vec, iters, cluster, family, affine_smem, held;
};

struct GnPlan {
  // The config's first kernel (Split: gn_partials).
  Kernel kernel;
  LaunchConfig launch;
  Kernel apply;               // Split: gn_apply, with the same launch
  size_t partials_bytes = 0;  // config.needs_workspace(): the stream workspace it needs
  size_t barrier_bytes = 0;   // cooperative or Pipe: the stream's barrier words it needs
  unsigned pipe_chunks = 0;   // Pipe: chunks in the tensor (grid: what the device holds)
  unsigned pipe_lag = 0;      // Pipe: how many chunks S items run ahead of A items
  // config.needs_workspace(): the one-kernel plan run inside a capture on a stream with no
  // workspace yet.
  std::unique_ptr<GnPlan> fallback;
  GroupNormConfig config;
  int groups = 0;
  long long num_groups = 0;
  bool runnable =
      false;  // Kernel::fits: the device can schedule it (a config it cannot is skipped)
  // cooperative: the driver refused the grid at launch although fits() accepted it (an MPS limit
  // kjit could not see): every call since runs the fallback. Not for a forced config: the
  // caller asked for that kernel, so the refusal reaches them instead.
  mutable std::atomic<bool> refused{false};
  bool forced = false;  // GroupNormOptions::config
};

// One call's arguments, as group_norm received them (w, b null when the problem has none).
struct GnArgs {
  const void* x;
  void* y;
  const void* w;
  const void* b;
  float eps;
};

using GnPlanTable = kjit::op::PlanTable<GnKey, GnPlan>;

// Per-stream workspaces of plans that need one (group_norm_pipe.cuh's counters follow the same
// rule as group_barrier.cuh's words).
using GnWorkspaces = kjit::op::BarrierWorkspaces;

// GroupNorm's per-runtime state (Runtime::extension<GnState>()).
struct GnState {
  explicit GnState(Runtime&) {}
  GnPlanTable plans;
  GnWorkspaces workspaces;
};

GnKey make_key(const GroupNormProblem& p, bool aligned, bool autotune,
               const GroupNormConfig* forced = nullptr);
// Loads the kernel for config c and computes the launch (grid, smem, cluster).
std::unique_ptr<GnPlan> build_plan(Runtime& rt, const GroupNormProblem& p, const GroupNormConfig& c,
                                   CUstream stream);
// Launches plan's kernels on `stream`. A plan that needs a workspace takes its partials buffer
// (and a cooperative or Pipe plan its barrier words) from the stream's workspaces in `ws` (the
// runtime's when null; allocated on first use), or runs its fallback inside a capture when the
// stream has none.
void launch_plan(Runtime& rt, const GnPlan& plan, const GnArgs& a, CUstream stream,
                 GnWorkspaces* ws = nullptr);
// Times the candidates on scratch buffers and returns the fastest (stored in the disk cache).
// Throws CaptureCompile when it would have to time them while `caller` is being captured.
GroupNormConfig autotune(Runtime& rt, const GroupNormProblem& p, bool aligned, float eps,
                         CUstream caller);

}  // namespace kjit::ops::detail
