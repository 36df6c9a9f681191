// LayerNorm / RMSNorm's plans: what the op, its autotuning and its registry entry share. Still
// public headers only, as a host app's op would be written.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>

#include "kjit/kernel.hpp"
#include "kjit/op/plan_table.hpp"
#include "kjit/ops/layer_norm.hpp"

namespace kjit::ops {

// All int64: a key without padding bytes (the table hashes and compares it bytewise).
struct LnKey {
  int64_t kind, dtype, param_dtype, activation, has_weight, has_bias, residual, aligned;
  int64_t in_place;  // an output aliases an input: replicas = 1
  int64_t rows, width;
  // A config forced through LayerNormOptions::config (all zero otherwise).
  int64_t forced, threads, team, vec, iters, cluster, stream, replicas;
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
};

// The op's per-runtime state (Runtime::extension<LnState>()).
struct LnState {
  explicit LnState(Runtime&) {}
  op::PlanTable<LnKey, LnPlan> plans;
};

// The kernel of config c (validated against p) and its launch; CaptureCompile (with the op's
// hint) when it would compile while `stream` is being captured.
std::unique_ptr<LnPlan> layer_norm_plan(Runtime& rt, const LayerNormProblem& p,
                                        const LayerNormConfig& c, bool aligned, CUstream stream);

// KJIT_AUTOTUNE=1 (read once per process, as for the other ops).
bool layer_norm_autotune_env();

// Times layer_norm_candidates on scratch buffers and returns the fastest (kjit::Autotuner: stored
// in the disk cache, reused by later processes without timing). CaptureCompile when it would
// have to time them while `caller` is being captured.
LayerNormConfig layer_norm_autotune(Runtime& rt, const LayerNormProblem& p, bool aligned, float eps,
                                    CUstream caller);

}  // namespace kjit::ops
