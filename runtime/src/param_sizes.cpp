#include "param_sizes.hpp"

#include <algorithm>

#include "cuda_driver.hpp"
#include "kjit/error.hpp"

namespace kjit::detail {

namespace {

std::optional<std::vector<size_t>> counted(CUfunction fn, size_t n, ParamInfoFn info) {
  std::vector<size_t> sizes;
  sizes.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    size_t offset = 0, size = 0;
    if (info(fn, i, &offset, &size) != CUDA_SUCCESS) return std::nullopt;
    sizes.push_back(size);
  }
  return sizes;
}

std::optional<std::vector<size_t>> probed(CUfunction fn, ParamInfoFn info) {
  std::vector<size_t> sizes;
  for (size_t i = 0; i <= kMaxKernelParams; ++i) {  // index kMaxKernelParams must be past the end
    size_t offset = 0, size = 0;
    const CUresult r = info(fn, i, &offset, &size);
    if (r == CUDA_ERROR_INVALID_VALUE) return sizes;
    if (r != CUDA_SUCCESS) return std::nullopt;  // the driver cannot say: leave the check off
    sizes.push_back(size);
  }
  return std::nullopt;  // no end in sight: not an answer to trust
}

// A driver entry point at `version`, or null where the driver lacks it. Never asked above the
// driver's own version: what an older driver answers for a newer one is not documented.
void* entry_or_null(const char* name, int version) {
  try {
    return driver_proc(name, std::min(version, driver().version));
  } catch (const Error&) {
    return nullptr;
  }
}

}  // namespace

std::optional<std::vector<size_t>> read_param_sizes(CUfunction fn, ParamCountFn count,
                                                    ParamInfoFn info) {
  if (!info) return std::nullopt;
  size_t n = 0;
  if (count && count(fn, &n) == CUDA_SUCCESS && n <= kMaxKernelParams) return counted(fn, n, info);
  return probed(fn, info);
}

ParamCountFn driver_param_count_fn() {
  // Asked at the version whose documentation gives the signature typed above (13.4), or the
  // driver's own if older: a driver that has the entry point answers with that variant, and one
  // that later re-versions it (a _v2 with other parameters) still gives this one.
  static const ParamCountFn fn =
      reinterpret_cast<ParamCountFn>(entry_or_null("cuFuncGetParamCount", 13040));
  return fn;
}

ParamInfoFn driver_param_info_fn() {
  static const ParamInfoFn fn =
      reinterpret_cast<ParamInfoFn>(entry_or_null("cuFuncGetParamInfo", 12040));
  return fn;
}

}  // namespace kjit::detail
