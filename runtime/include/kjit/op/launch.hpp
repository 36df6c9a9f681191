// Op support: the launch settings kjit's built-in ops follow, for a host app's op to follow too.
#pragma once

namespace kjit {
class Runtime;
namespace op {

// Whether an op's kernels on rt launch with programmatic dependent launch
// (LaunchConfig::programmatic): when rt's code is built for sm_90 or newer (where kjit/pdl.cuh's
// pdl_wait() is compiled in) and KJIT_PDL is not "0" (read once per process). Such a kernel must
// call kjit::pdl_wait() before it touches memory that earlier work on the stream uses.
bool programmatic_launch(const Runtime& rt);

}  // namespace op
}  // namespace kjit
