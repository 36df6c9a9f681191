#include "stream_workspaces.hpp"

#include <atomic>
#include <cstdint>
#include <mutex>

#include "cuda_driver.hpp"
#include "kjit/error.hpp"
#include "kjit/runtime.hpp"

namespace kjit::detail {
namespace {

// CU_STREAM_PER_THREAD is one handle for a different stream in every thread, so its buffers are
// kept per thread, under a key no stream handle can be (odd, and never 0x1 or 0x2). Ids are never
// reused: a new thread cannot inherit a buffer the old one's stream may still be using.
CUstream key_of(CUstream stream) {
  if (stream != CU_STREAM_PER_THREAD) return stream;
  static std::atomic<uintptr_t> next{0};
  thread_local const uintptr_t id = next.fetch_add(1, std::memory_order_relaxed);
  return reinterpret_cast<CUstream>((id << 4) | 0xB);
}

}  // namespace

StreamWorkspaces::~StreamWorkspaces() {
  if (!driver_available()) return;
  const Driver& d = driver();
  for (auto& kv : by_stream_)
    if (kv.second.ptr) d.cuMemFree_fn(kv.second.ptr);
  for (CUdeviceptr p : retired_) d.cuMemFree_fn(p);
}

CUdeviceptr StreamWorkspaces::find(CUstream stream, size_t bytes) const {
  std::shared_lock lock(mu_);
  auto it = by_stream_.find(key_of(stream));
  return it != by_stream_.end() && it->second.bytes >= bytes ? it->second.ptr : 0;
}

CUdeviceptr StreamWorkspaces::get(Runtime& rt, CUstream stream, size_t bytes, const char* op,
                                  const char* hint) {
  if (const CUdeviceptr p = find(stream, bytes)) return p;
  if (capturing(rt.context(), stream))
    throw Error(Errc::CaptureCompile, std::string(op) + ": the stream has no workspace of " +
                                          std::to_string(bytes) +
                                          " bytes yet and is being captured into a graph: " + hint);
  // Allocated (and zeroed, which waits for the stream) before the lock: lookups of other streams
  // on the launch path never wait behind it.
  ContextGuard guard(rt.context());
  bytes = (bytes + 3) / 4 * 4;  // whole 32-bit words, for the memset
  const CUdeviceptr p = allocate(stream, bytes, op);
  std::unique_lock lock(mu_);
  Buf& b = by_stream_[key_of(stream)];
  if (b.bytes >= bytes) {  // another thread on this stream got there first; p was never used
    driver().cuMemFree_fn(p);
    return b.ptr;
  }
  if (b.ptr) retired_.push_back(b.ptr);
  b.ptr = p;
  b.bytes = bytes;
  return p;
}

CUdeviceptr StreamWorkspaces::allocate(CUstream stream, size_t bytes, const char* op) const {
  CUdeviceptr p = 0;
  CUresult r = driver().cuMemAlloc_fn(&p, bytes);
  if (r != CUDA_SUCCESS)
    throw Error(Errc::Cuda, std::string(op) + ": cuMemAlloc of its " + std::to_string(bytes) +
                                "-byte workspace failed: " + cu_error_text(r));
  if (!zeroed_) return p;
  // Zero before any stream may use it: a graph captured on `stream` may be replayed on another.
  r = driver().cuMemsetD32Async_fn(p, 0, bytes / 4, stream);
  if (r == CUDA_SUCCESS) r = driver().cuStreamSynchronize_fn(stream);
  if (r != CUDA_SUCCESS) {
    driver().cuMemFree_fn(p);
    throw Error(Errc::Cuda, std::string(op) + ": zeroing its " + std::to_string(bytes) +
                                "-byte workspace failed: " + cu_error_text(r));
  }
  return p;
}

}  // namespace kjit::detail
