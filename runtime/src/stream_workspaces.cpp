#include "kjit/op/stream_workspaces.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>

#include "cuda_driver.hpp"
#include "kjit/error.hpp"
#include "kjit/runtime.hpp"

namespace kjit::op {
using kjit::detail::capturing;
using kjit::detail::ContextGuard;
using kjit::detail::cu_error_text;
using kjit::detail::driver;
using kjit::detail::Driver;
using kjit::detail::driver_available;
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

StreamWorkspaces::Buf* StreamWorkspaces::slot(CUstream stream) {
  const CUstream key = key_of(stream);
  {
    std::shared_lock lock(mu_);
    auto it = by_stream_.find(key);
    if (it != by_stream_.end()) return &it->second;
  }
  std::unique_lock lock(mu_);
  return &by_stream_[key];
}

StreamWorkspaces::Lease StreamWorkspaces::try_lease(CUstream stream, size_t bytes) {
  Buf* b = nullptr;
  {
    std::shared_lock lock(mu_);
    auto it = by_stream_.find(key_of(stream));
    if (it != by_stream_.end()) b = &it->second;
  }
  Lease l;
  if (!b) return l;
  l.lock_ = std::unique_lock<std::mutex>(b->order);
  if (b->ptr && b->bytes >= bytes) {
    l.ptr_ = b->ptr;
  } else {
    l.lock_.unlock();  // ptr() 0: nothing held
  }
  return l;
}

StreamWorkspaces::Lease StreamWorkspaces::lease(Runtime& rt, CUstream stream, size_t bytes,
                                                const char* op, const char* hint) {
  Lease l = try_lease(stream, bytes);
  if (l.ptr_) return l;
  Buf* b = slot(stream);
  l.lock_ = std::unique_lock<std::mutex>(b->order);
  if (b->ptr && b->bytes >= bytes) {  // another thread on this stream grew it meanwhile
    l.ptr_ = b->ptr;
    return l;
  }
  if (capturing(rt.context(), stream))
    throw Error(Errc::CaptureCompile, std::string(op) + ": the stream has no workspace of " +
                                          std::to_string(bytes) +
                                          " bytes yet and is being captured into a graph: " + hint);
  // Allocated (and zeroed) outside mu_: lookups of other streams never wait behind it.
  ContextGuard guard(rt.context());
  // Whole words (for the memset), at least one; at least twice the old size when there is room.
  const size_t need = (std::max<size_t>(bytes, 1) + 3) / 4 * 4;
  size_t got = std::max(need, 2 * b->bytes);
  const CUdeviceptr p = allocate(need, &got, op);
  std::unique_lock lock(mu_);
  if (b->ptr) retired_.push_back(b->ptr);
  b->ptr = p;
  b->bytes = got;
  l.ptr_ = p;
  return l;
}

CUdeviceptr StreamWorkspaces::get(Runtime& rt, CUstream stream, size_t bytes, const char* op,
                                  const char* hint) {
  return lease(rt, stream, bytes, op, hint).ptr();
}

CUdeviceptr StreamWorkspaces::allocate(size_t need, size_t* bytes, const char* op) const {
  const Driver& d = driver();
  CUdeviceptr p = 0;
  CUresult r = d.cuMemAlloc_fn(&p, *bytes);
  if (r == CUDA_ERROR_OUT_OF_MEMORY && *bytes > need) {  // no room to double: what is needed
    *bytes = need;
    r = d.cuMemAlloc_fn(&p, *bytes);
  }
  if (r != CUDA_SUCCESS)
    throw Error(Errc::Cuda, std::string(op) + ": cuMemAlloc of its " + std::to_string(*bytes) +
                                "-byte workspace failed: " + cu_error_text(r));
  if (!zeroed_) return p;
  // Zeroed on a stream of its own, before any stream may use it (a graph captured on one stream
  // may be replayed on another). Waiting on the caller's stream instead would block this call
  // behind all of its queued work, and forever if that work waits for the host.
  CUstream z = nullptr;
  r = d.cuStreamCreate_fn(&z, CU_STREAM_NON_BLOCKING);
  if (r == CUDA_SUCCESS) r = d.cuMemsetD32Async_fn(p, 0, *bytes / 4, z);
  if (r == CUDA_SUCCESS) r = d.cuStreamSynchronize_fn(z);
  if (z) d.cuStreamDestroy_fn(z);
  if (r != CUDA_SUCCESS) {
    d.cuMemFree_fn(p);
    throw Error(Errc::Cuda, std::string(op) + ": zeroing its " + std::to_string(*bytes) +
                                "-byte workspace failed: " + cu_error_text(r));
  }
  return p;
}

}  // namespace kjit::op
