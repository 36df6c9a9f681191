// Op support: device scratch memory kept per stream for ops that need it (Linear-GN-min's GEMM
// output, GroupNorm's split statistics, or a host app's own op). Work on one stream runs in order,
// so one buffer per stream is never used by two calls at once.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace kjit {
class Runtime;
namespace op {

class StreamWorkspaces {
 public:
  // zeroed: every buffer is filled with zero bytes when allocated (on a private stream, which
  // allocation then waits for), before any work on any stream can use it (GroupNorm's barrier
  // words).
  explicit StreamWorkspaces(bool zeroed = false) : zeroed_(zeroed) {}
  ~StreamWorkspaces();  // frees the buffers: the owner makes their context current first
  StreamWorkspaces(const StreamWorkspaces&) = delete;
  StreamWorkspaces& operator=(const StreamWorkspaces&) = delete;

  // A stream's buffer, held for one call: while a Lease lives, no other thread can take the
  // same stream's buffer. An op whose launches pass data through the buffer (a GEMM, then the
  // kernel that reads its output) holds the lease until its last launch is enqueued, so that
  // two threads enqueueing on one stream cannot interleave between them. It serializes only
  // calls on the same stream, which the stream serializes anyway.
  class Lease {
   public:
    Lease() = default;
    CUdeviceptr ptr() const { return ptr_; }
    void release() {
      if (lock_.owns_lock()) lock_.unlock();
      ptr_ = 0;
    }

   private:
    friend class StreamWorkspaces;
    std::unique_lock<std::mutex> lock_;
    CUdeviceptr ptr_ = 0;
  };

  // `stream`'s buffer when it has one of at least `bytes`, else 0: a lookup under a shared lock.
  CUdeviceptr find(CUstream stream, size_t bytes) const;
  // The lease of `stream`'s buffer when it has one of at least `bytes`; else ptr() is 0 and
  // nothing is held.
  Lease try_lease(CUstream stream, size_t bytes);
  // The lease of `stream`'s buffer, grown to at least `bytes` first if needed. Allocating while
  // `stream` is being captured would break the capture: then it throws CaptureCompile with `op`
  // and `hint` (what the caller should have done first) in the message. A buffer it replaces is
  // kept until the Runtime goes (work queued on it, or a graph captured with it, may still use
  // it). A buffer grows to at least twice its size when the device has room (else to `bytes`):
  // a long sequence of slowly growing calls allocates a few buffers, not one per call.
  Lease lease(Runtime& rt, CUstream stream, size_t bytes, const char* op, const char* hint);
  // lease(), released at once: a reservation before a capture.
  CUdeviceptr get(Runtime& rt, CUstream stream, size_t bytes, const char* op, const char* hint);

 private:
  struct Buf {
    CUdeviceptr ptr = 0;  // written under both `order` and mu_
    size_t bytes = 0;
    std::mutex order;  // held by the stream's Lease
  };
  // A new buffer of *bytes, or of `need` when *bytes does not fit (*bytes is then set to it),
  // zeroed when zeroed_, not yet anyone's; throws Errc::Cuda.
  CUdeviceptr allocate(size_t need, size_t* bytes, const char* op) const;
  Buf* slot(CUstream stream);  // the stream's entry, created empty if it has none
  const bool zeroed_;
  mutable std::shared_mutex mu_;
  // By handle: a destroyed stream's handle can come back for a new stream (cuStreamGetId would
  // tell them apart, but it fails while a stream is capturing). The driver frees a stream only
  // after its queued work completes, so a new stream never shares a buffer with live work.
  // Entries are never erased: a Buf's address stays valid (node-based map) for its Lease.
  std::unordered_map<CUstream, Buf> by_stream_;
  std::vector<CUdeviceptr> retired_;
};

// The per-stream workspaces of kernels whose CTAs meet in global memory (kjit/group_barrier.cuh:
// GroupNorm's and LayerNorm's cooperative plans): partial statistics, and barrier words, kept
// apart because the barrier words' even-indexed ones must be zero between calls, which another
// problem's partials written over them would break (the odd ones are generations: any value).
struct BarrierWorkspaces {
  StreamWorkspaces partials;
  StreamWorkspaces barriers{true};  // zeroed when allocated
};

}  // namespace op
}  // namespace kjit
