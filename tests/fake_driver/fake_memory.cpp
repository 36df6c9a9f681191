// The fake driver's memory: host memory, so that copies and memsets really happen, each within
// one live allocation. Inside a capture, the asynchronous ones become nodes and wait for the
// graph (which runs nothing); the synchronous ones, allocations and frees are refused, as the
// driver refuses them, and invalidate the capture.
#include <cstdlib>
#include <cstring>

#include "fake_entries.hpp"
#include "fake_state.hpp"

namespace kjit_fake {
namespace {

void* at(CUdeviceptr p) {
  return reinterpret_cast<void*>(p);
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

bool device_range(CUdeviceptr p, size_t n) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mem_mu);
  auto it = s.allocations.upper_bound(static_cast<uintptr_t>(p));
  if (it == s.allocations.begin()) return false;
  --it;
  return p - it->first <= it->second && n <= it->second - (p - it->first);
}

CUresult cuMemAlloc(CUdeviceptr* p, size_t bytes) {
  if (current() != primary()) return CUDA_ERROR_INVALID_CONTEXT;
  if (capture_forbids()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r; injected(kMemAlloc, &r)) return r;
  void* mem = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!mem) return CUDA_ERROR_OUT_OF_MEMORY;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mem_mu);
  s.allocations[reinterpret_cast<uintptr_t>(mem)] = bytes;
  *p = reinterpret_cast<CUdeviceptr>(mem);
  return CUDA_SUCCESS;
}
CUresult cuMemFree(CUdeviceptr p) {
  if (capture_forbids()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mem_mu);
  if (s.allocations.erase(static_cast<uintptr_t>(p)) == 0) return CUDA_ERROR_INVALID_VALUE;
  std::free(at(p));
  return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoD(CUdeviceptr d, const void* h, size_t n) {
  if (capture_forbids()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (!device_range(d, n)) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(at(d), h, n);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoH(void* h, CUdeviceptr d, size_t n) {
  if (capture_forbids()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (!device_range(d, n)) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(h, at(d), n);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoD(CUdeviceptr d, CUdeviceptr s, size_t n) {
  if (capture_forbids()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (!device_range(d, n) || !device_range(s, n)) return CUDA_ERROR_INVALID_VALUE;
  std::memmove(at(d), at(s), n);
  return CUDA_SUCCESS;
}
CUresult cuMemsetD8(CUdeviceptr d, unsigned char v, size_t n) {
  if (capture_forbids()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (!device_range(d, n)) return CUDA_ERROR_INVALID_VALUE;
  std::memset(at(d), v, n);
  return CUDA_SUCCESS;
}
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) {
  if (!device_range(d, n)) return CUDA_ERROR_INVALID_VALUE;
  return enqueue(s, CU_GRAPH_NODE_TYPE_MEMSET, [&] { std::memset(at(d), v, n); });
}
CUresult cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, CUstream s) {
  if (n > SIZE_MAX / 4 || !device_range(d, n * 4)) return CUDA_ERROR_INVALID_VALUE;
  return enqueue(s, CU_GRAPH_NODE_TYPE_MEMSET, [&] {
    auto* p = static_cast<unsigned*>(at(d));
    for (size_t i = 0; i < n; ++i) p[i] = v;
  });
}
CUresult cuMemcpyHtoDAsync(CUdeviceptr d, const void* h, size_t n, CUstream s) {
  if (!device_range(d, n)) return CUDA_ERROR_INVALID_VALUE;
  return enqueue(s, CU_GRAPH_NODE_TYPE_MEMCPY, [&] { std::memcpy(at(d), h, n); });
}
CUresult cuMemcpyDtoHAsync(void* h, CUdeviceptr d, size_t n, CUstream s) {
  if (!device_range(d, n)) return CUDA_ERROR_INVALID_VALUE;
  return enqueue(s, CU_GRAPH_NODE_TYPE_MEMCPY, [&] { std::memcpy(h, at(d), n); });
}
CUresult cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
  if (!device_range(d, n) || !device_range(s, n)) return CUDA_ERROR_INVALID_VALUE;
  return enqueue(st, CU_GRAPH_NODE_TYPE_MEMCPY, [&] { std::memmove(at(d), at(s), n); });
}

}  // namespace kjit_fake
