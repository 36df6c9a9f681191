// The built-in ops for Python: GroupNorm, Linear-GN-min, LayerNorm / RMSNorm, and their
// prepare functions. Each checks every argument (dtype, shape, layout, then the device) before it
// needs a GPU, and launches on the stream handle it is given.
#pragma once

#include <nanobind/nanobind.h>

namespace kjit::py {

void bind_group_norm(nanobind::module_& m);
void bind_linear_gn_min(nanobind::module_& m);
void bind_layer_norm(nanobind::module_& m);

}  // namespace kjit::py
