// Device scratch memory kjit keeps per stream for ops that need it (Linear-GN-min's GEMM output,
// GroupNorm's split statistics). Work on one stream runs in order, so one buffer per stream is
// never used by two calls at once.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace kjit {
class Runtime;
namespace detail {

class StreamWorkspaces {
 public:
  // zeroed: every buffer is filled with zero bytes when allocated (on its stream, which get()
  // then waits for), before any work on any stream can use it (GroupNorm's barrier words).
  explicit StreamWorkspaces(bool zeroed = false) : zeroed_(zeroed) {}
  ~StreamWorkspaces();  // frees the buffers: the owner makes their context current first
  StreamWorkspaces(const StreamWorkspaces&) = delete;
  StreamWorkspaces& operator=(const StreamWorkspaces&) = delete;

  // `stream`'s buffer when it has one of at least `bytes`, else 0: a lookup under a shared lock.
  CUdeviceptr find(CUstream stream, size_t bytes) const;
  // find(), or a new buffer of `bytes` for `stream`. Allocating while `stream` is being captured
  // would break the capture: then it throws CaptureCompile with `op` and `hint` (what the caller
  // should have done first) in the message. A smaller buffer it replaces is kept until the
  // Runtime goes: work queued on it, or a graph captured with it, may still use it.
  CUdeviceptr get(Runtime& rt, CUstream stream, size_t bytes, const char* op, const char* hint);

 private:
  // A new buffer of `bytes` (zeroed when zeroed_), not yet anyone's; throws Errc::Cuda.
  CUdeviceptr allocate(CUstream stream, size_t bytes, const char* op) const;
  struct Buf {
    CUdeviceptr ptr = 0;
    size_t bytes = 0;
  };
  const bool zeroed_;
  mutable std::shared_mutex mu_;
  // By handle: a destroyed stream's handle can come back for a new stream (cuStreamGetId would
  // tell them apart, but it fails while a stream is capturing). The driver frees a stream only
  // after its queued work completes, so a new stream never shares a buffer with live work.
  std::unordered_map<CUstream, Buf> by_stream_;
  std::vector<CUdeviceptr> retired_;
};

}  // namespace detail
}  // namespace kjit
