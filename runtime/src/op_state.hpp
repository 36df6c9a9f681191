// Per-runtime state of the built-in ops: their plan tables and library handles.
#pragma once

#include "kjit/runtime.hpp"
#include "ops/group_norm_plan.hpp"

namespace kjit {

struct Runtime::OpState {
  explicit OpState(Runtime& rt) : rt(rt) {}
  Runtime& rt;
  ops::detail::GnPlanTable group_norm;
};

}  // namespace kjit
