// The fake driver's memory. Device addresses lie in a window of address space reserved with no
// access, so host code that dereferences a device pointer faults, as it would beside a real GPU;
// each allocation's bytes live in host memory of their own, so that copies and memsets really
// happen, each within one live allocation. Addresses are never reused: a stale pointer stays
// invalid. Inside a capture, the asynchronous copies and memsets become nodes and wait for the
// graph (which runs nothing); the synchronous ones, allocations and frees are refused, as the
// driver refuses them, and invalidate the capture.
#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "fake_entries.hpp"
#include "fake_state.hpp"

namespace kjit_fake {
namespace {

constexpr size_t kWindowBytes = size_t{64} << 30;  // address space only: nothing is committed

// The window's first address, or 0 when it could not be reserved (said once on stderr).
uintptr_t window() {
  static const uintptr_t base = [] {
    void* p =
        mmap(nullptr, kWindowBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) return reinterpret_cast<uintptr_t>(p);
    std::fprintf(stderr, "kjit fake driver: cannot reserve %zu bytes of address space: %s\n",
                 kWindowBytes, std::strerror(errno));
    return uintptr_t{0};
  }();
  return base;
}

// Device ranges resolved to the host bytes behind them, under the memory lock for as long as the
// Access lives: a cuMemFree racing a copy waits for it, as the driver's waits for pending work.
class Access {
 public:
  Access() : lock_(state().mem_mu) {}
  // The host bytes behind [p, p + n), or null when that is not inside one live allocation.
  void* host(CUdeviceptr p, size_t n) const {
    const auto& all = state().allocations;
    auto it = all.upper_bound(static_cast<uintptr_t>(p));
    if (it == all.begin()) return nullptr;
    --it;
    const size_t off = p - it->first, bytes = it->second.bytes;
    if (off > bytes || n > bytes - off) return nullptr;
    return it->second.host.get() + off;
  }

 private:
  std::lock_guard<std::mutex> lock_;
};

// work(the host bytes behind [d, d + n)) under the memory lock; INVALID_VALUE when the range is
// not inside one live allocation.
template <class Work>
CUresult on_device(CUdeviceptr d, size_t n, Work work) {
  const Access a;
  void* p = a.host(d, n);
  return p ? work(p) : CUDA_ERROR_INVALID_VALUE;
}

// A synchronous copy or memset, done.
CUresult done(void*) {
  return CUDA_SUCCESS;
}

// A copy or memset enqueued on s: a node of s's capture (nothing done now), or `work` now.
template <class Work>
CUresult enqueue(CUstream s, CUgraphNodeType type, Work work) {
  Stream* st = stream_of(s);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  if (!capture_node(*st, Node{type, nullptr, 100})) work();
  return CUDA_SUCCESS;
}

}  // namespace

CUresult cuMemAlloc(CUdeviceptr* p, size_t bytes) {
  if (current() != primary()) return CUDA_ERROR_INVALID_CONTEXT;
  if (capture_forbids()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r; injected(kMemAlloc, &r)) return r;
  const uintptr_t base = window();
  if (base == 0 || bytes > kWindowBytes) return CUDA_ERROR_OUT_OF_MEMORY;
  const size_t rounded = (bytes + 255) / 256 * 256;
  Allocation a;
  a.bytes = bytes;
  a.host.reset(new (std::nothrow) unsigned char[rounded]);
  if (!a.host) return CUDA_ERROR_OUT_OF_MEMORY;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mem_mu);
  if (rounded > kWindowBytes - s.next_device) return CUDA_ERROR_OUT_OF_MEMORY;
  const uintptr_t at = base + s.next_device;
  s.next_device += rounded;
  s.allocations[at] = std::move(a);
  *p = static_cast<CUdeviceptr>(at);
  return CUDA_SUCCESS;
}
CUresult cuMemFree(CUdeviceptr p) {
  if (capture_forbids()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mem_mu);
  if (s.allocations.erase(static_cast<uintptr_t>(p)) == 0) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoD(CUdeviceptr d, const void* h, size_t n) {
  if (capture_forbids()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return on_device(d, n, [&](void* dst) { return done(std::memcpy(dst, h, n)); });
}
CUresult cuMemcpyDtoH(void* h, CUdeviceptr d, size_t n) {
  if (capture_forbids()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return on_device(d, n, [&](void* src) { return done(std::memcpy(h, src, n)); });
}
CUresult cuMemcpyDtoD(CUdeviceptr d, CUdeviceptr s, size_t n) {
  if (capture_forbids()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  const Access a;
  void *dst = a.host(d, n), *src = a.host(s, n);
  return dst && src ? done(std::memmove(dst, src, n)) : CUDA_ERROR_INVALID_VALUE;
}
CUresult cuMemsetD8(CUdeviceptr d, unsigned char v, size_t n) {
  if (capture_forbids()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return on_device(d, n, [&](void* dst) { return done(std::memset(dst, v, n)); });
}
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) {
  return on_device(d, n, [&](void* dst) {
    return enqueue(s, CU_GRAPH_NODE_TYPE_MEMSET, [&] { std::memset(dst, v, n); });
  });
}
CUresult cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, CUstream s) {
  if (d % 4 != 0 || n > SIZE_MAX / 4) return CUDA_ERROR_INVALID_VALUE;
  return on_device(d, n * 4, [&](void* dst) {
    return enqueue(s, CU_GRAPH_NODE_TYPE_MEMSET, [&] {
      auto* p = static_cast<unsigned*>(dst);
      for (size_t i = 0; i < n; ++i) p[i] = v;
    });
  });
}
CUresult cuMemcpyHtoDAsync(CUdeviceptr d, const void* h, size_t n, CUstream s) {
  return on_device(d, n, [&](void* dst) {
    return enqueue(s, CU_GRAPH_NODE_TYPE_MEMCPY, [&] { std::memcpy(dst, h, n); });
  });
}
CUresult cuMemcpyDtoHAsync(void* h, CUdeviceptr d, size_t n, CUstream s) {
  return on_device(d, n, [&](void* src) {
    return enqueue(s, CU_GRAPH_NODE_TYPE_MEMCPY, [&] { std::memcpy(h, src, n); });
  });
}
CUresult cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
  const Access a;
  void *dst = a.host(d, n), *src = a.host(s, n);
  if (!dst || !src) return CUDA_ERROR_INVALID_VALUE;
  return enqueue(st, CU_GRAPH_NODE_TYPE_MEMCPY, [&] { std::memmove(dst, src, n); });
}

}  // namespace kjit_fake
