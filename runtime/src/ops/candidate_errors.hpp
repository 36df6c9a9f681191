// Which failures rule an autotune or fallback candidate out for good, and fills on a stream for
// autotuning's scratch inputs.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

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

// A block of varied values of `elem_bytes` (2: +-[1, 2) in fp16, +-[2^-7, 2) in bf16; 4: +-[1, 2)
// in fp32). Tensor cores draw less power, and may clock higher, on constant operands: a GEMM
// timed on them can rank algorithms differently than on real data.
inline std::vector<unsigned char> varied_block(int elem_bytes) {
  std::vector<unsigned char> out(size_t{1} << 20);
  std::mt19937 gen(12345);
  for (size_t i = 0; i + 4 <= out.size(); i += 4) {
    uint32_t v = gen();
    v = elem_bytes == 2 ? ((v & 0x83FF83FFu) | 0x3C003C00u) : ((v & 0x807FFFFFu) | 0x3F800000u);
    std::memcpy(out.data() + i, &v, 4);
  }
  return out;
}

// Fills n bytes at p on stream s with `block` repeated (one upload, then copies that double).
// `block` must live until s is synchronized.
inline void fill_varied_async(CUdeviceptr p, size_t n, const std::vector<unsigned char>& block,
                              CUstream s) {
  const auto& d = kjit::detail::driver();
  size_t done = std::min(n, block.size());
  kjit::detail::check_cu(d.cuMemcpyHtoDAsync_fn(p, block.data(), done, s), "cuMemcpyHtoDAsync");
  while (done < n) {
    const size_t c = std::min(done, n - done);
    kjit::detail::check_cu(d.cuMemcpyDtoDAsync_fn(p + done, p, c, s), "cuMemcpyDtoDAsync");
    done += c;
  }
}

}  // namespace kjit::ops::detail
