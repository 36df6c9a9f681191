// Which failures rule an autotune or fallback candidate out for good, and a fill on a stream for
// autotuning's scratch inputs.
#pragma once

#include <cuda.h>

#include <cstddef>

#include "cuda_driver.hpp"
#include "kjit/error.hpp"

namespace kjit::ops::detail {

// A candidate failed for good on this device (it does not compile, or the device cannot run it):
// trying the next one is right. Other failures (out of memory, a driver error) may pass: they
// belong to the caller, and nothing chosen without that candidate may be remembered.
inline bool candidate_rejected(const Error& e) {
  return e.code() == Errc::Compile || e.code() == Errc::Unsupported;
}

// Fills n bytes at p with v on stream s (the caller waits for s). Autotuning fills its scratch
// this way: DeviceBuffer::fill_bytes synchronizes the whole context, which waits for other
// threads' work and is not allowed while another thread captures in global mode.
inline void fill_async(CUdeviceptr p, unsigned char v, size_t n, CUstream s) {
  kjit::detail::check_cu(kjit::detail::driver().cuMemsetD8Async_fn(p, v, n, s), "cuMemsetD8Async");
}

}  // namespace kjit::ops::detail
