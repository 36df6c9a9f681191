// RAII for the driver objects tests, tools and host apps need next to kjit: streams, events,
// device buffers, and captured graphs. All work in the runtime's context.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "kjit/runtime.hpp"

namespace kjit {

class Stream {
 public:
  explicit Stream(Runtime& rt);  // a non-blocking stream
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUstream get() const { return s_; }
  operator CUstream() const { return s_; }
  void synchronize() const;

 private:
  Runtime& rt_;
  CUstream s_ = nullptr;
};

class Event {
 public:
  explicit Event(Runtime& rt);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(CUstream s);
  void synchronize() const;
  float ms_since(const Event& start) const;  // elapsed ms from start to this event

 private:
  Runtime& rt_;
  CUevent e_ = nullptr;
};

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Runtime& rt, size_t bytes);
  // A buffer holding a copy of `host` (complete on return).
  template <class T>
  static DeviceBuffer from_host(Runtime& rt, const std::vector<T>& host) {
    DeviceBuffer b(rt, host.size() * sizeof(T));
    b.upload(host.data(), host.size() * sizeof(T));
    return b;
  }
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr ptr() const { return p_; }
  template <class T>
  T* as() const {
    return reinterpret_cast<T*>(p_);
  }
  size_t bytes() const { return bytes_; }
  // Synchronous helpers for tests and tools: complete when they return. download does not wait
  // for kernels on the caller's streams: synchronize those first.
  void upload(const void* host, size_t bytes, size_t offset = 0);
  void download(void* host, size_t bytes, size_t offset = 0) const;
  void fill_bytes(unsigned char value);  // e.g. 0xFF: NaN in every float format
  template <class T>
  std::vector<T> to_host(size_t n) const {
    std::vector<T> v(n);
    download(v.data(), n * sizeof(T));
    return v;
  }

 private:
  void reset();
  Runtime* rt_ = nullptr;
  CUdeviceptr p_ = 0;
  size_t bytes_ = 0;
};

// The (mangled) names of the kernel nodes of any graph of rt's context, e.g. one another library
// captured (nodes made from a cuLibrary CUkernel included). CUDA 12.3+ driver; NotFound below.
std::vector<std::string> graph_kernel_names(Runtime& rt, CUgraph graph);

// Captures what `body` enqueues on `stream` into a graph, instantiated for replay.
class Graph {
 public:
  Graph(Runtime& rt, CUstream stream, const std::function<void()>& body);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  void launch(CUstream stream) const;
  // Nodes captured (kernel launches, copies, ...): e.g. to see how many kernels an op recorded.
  size_t nodes() const;
  // The (mangled) names of the kernels captured, one per kernel node, in no particular order:
  // e.g. to see which kernel an op chose inside a capture. Needs a CUDA 12.3+ driver
  // (cuFuncGetName); NotFound below that.
  std::vector<std::string> kernel_names() const;

 private:
  Runtime& rt_;
  CUgraph g_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

void synchronize(Runtime& rt);

// A CUDA driver entry point by name, from the libcuda kjit loaded ("cuLaunchKernel", ...), for
// host code that wants the driver API without linking libcuda. Throws NoDriver / NotFound.
// This one is asked for at the CUDA_VERSION of the cuda.h kjit was built with, which gives the
// newest variant: mostly the type cuda.h declares for the name, but not always (with CUDA 13,
// "cuCtxSynchronize" is cuCtxSynchronize_v2(CUcontext), not the cuCtxSynchronize(void) that cuda.h
// declares). The second form pins the ABI: cast to PFN_<name>_v<cuda_version> of cudaTypedefs.h,
// e.g. reinterpret_cast<PFN_cuCtxSynchronize_v2000>(driver_proc("cuCtxSynchronize", 2000)).
void* driver_proc(const char* name);
void* driver_proc(const char* name, int cuda_version);
// For the results of such calls: nothing on CUDA_SUCCESS, else kjit::Error (Cuda) naming `what`
// and the driver's name and text for r, as kjit's own driver calls report theirs.
void check_driver(CUresult r, const char* what);

}  // namespace kjit
