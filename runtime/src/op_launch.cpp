#include "kjit/op/launch.hpp"

#include "kjit/runtime.hpp"
#include "ops/env.hpp"

namespace kjit::op {

// The rule GroupNorm and Linear-GN-min follow (ops/env.hpp), so that KJIT_PDL=0 turns it off for
// every op alike.
bool programmatic_launch(const Runtime& rt) {
  return ops::detail::use_pdl(rt.arch());
}

}  // namespace kjit::op
