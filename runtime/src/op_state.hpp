// Per-runtime state of the built-in ops: their plan tables and library handles.
#pragma once

#include "kjit/runtime.hpp"
#include "ops/group_norm_plan.hpp"
#include "ops/linear_gn_min_plan.hpp"
#include "stream_workspaces.hpp"

namespace kjit {

struct Runtime::OpState {
  explicit OpState(Runtime& rt) : rt(rt) {}
  Runtime& rt;
  ops::detail::GnPlanTable group_norm;
  ops::detail::GnWorkspaces group_norm_ws;  // split GroupNorm's, per stream
  ops::detail::LgmState linear_gn_min;      // cuBLASLt handle, plans, per-stream workspaces
};

}  // namespace kjit
