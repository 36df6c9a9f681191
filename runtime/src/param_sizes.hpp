// The byte size of each parameter of a loaded kernel, as the driver reports it: what the typed
// Kernel::operator() compares its arguments with.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <optional>
#include <vector>

namespace kjit::detail {

// cuFuncGetParamCount (documented by CUDA 13.4; the 13.0 driver lacks it) and cuFuncGetParamInfo
// (12.4 and newer), typed here: the toolkits kjit builds with may lack either's declaration.
using ParamCountFn = CUresult (*)(CUfunction, size_t*);
using ParamInfoFn = CUresult (*)(CUfunction, size_t, size_t*, size_t*);

// The most parameters a kernel can take: 32764 bytes of parameter space (CUDA 12.1 and newer,
// Volta and newer) at one byte each.
inline constexpr size_t kMaxKernelParams = 32764;

// fn's parameter sizes, or nullopt where the driver cannot say (no `info`, or it fails). With a
// count query the sizes are read index by index up to the count; without one (or where it fails)
// they are read until the driver answers CUDA_ERROR_INVALID_VALUE for an index past the last,
// which tools such as compute-sanitizer's memcheck report as an API error at every load.
std::optional<std::vector<size_t>> read_param_sizes(CUfunction fn, ParamCountFn count,
                                                    ParamInfoFn info);

// The driver's own entry points, resolved once (null where it lacks one).
ParamCountFn driver_param_count_fn();
ParamInfoFn driver_param_info_fn();

}  // namespace kjit::detail
