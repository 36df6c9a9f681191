#include <string>
#include <utility>
#include <vector>

#include "cuda_driver.hpp"
#include "kjit/cuda.hpp"
#include "kjit/error.hpp"

namespace kjit {

using detail::ContextGuard;
using detail::driver;

Stream::Stream(Runtime& rt) : rt_(rt) {
  ContextGuard g(rt_.context());
  KJIT_CU(cuStreamCreate, &s_, CU_STREAM_NON_BLOCKING);
}

Stream::~Stream() {
  ContextGuard g(rt_.context(), std::nothrow);
  driver().cuStreamDestroy_fn(s_);
}

void Stream::synchronize() const {
  KJIT_CU(cuStreamSynchronize, s_);
}

Event::Event(Runtime& rt) : rt_(rt) {
  ContextGuard g(rt_.context());
  KJIT_CU(cuEventCreate, &e_, CU_EVENT_DEFAULT);
}

Event::~Event() {
  ContextGuard g(rt_.context(), std::nothrow);
  driver().cuEventDestroy_fn(e_);
}

void Event::record(CUstream s) {
  KJIT_CU(cuEventRecord, e_, s);
}
void Event::synchronize() const {
  KJIT_CU(cuEventSynchronize, e_);
}

float Event::ms_since(const Event& start) const {
  float ms = 0;
  KJIT_CU(cuEventElapsedTime, &ms, start.e_, e_);
  return ms;
}

DeviceBuffer::DeviceBuffer(Runtime& rt, size_t bytes) : rt_(&rt), bytes_(bytes) {
  if (bytes == 0) return;
  ContextGuard g(rt.context());
  KJIT_CU(cuMemAlloc, &p_, bytes);
}

DeviceBuffer::~DeviceBuffer() {
  reset();
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : rt_(o.rt_), p_(std::exchange(o.p_, 0)), bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    rt_ = o.rt_;
    p_ = std::exchange(o.p_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::reset() {
  if (p_) {
    ContextGuard g(rt_->context(), std::nothrow);  // runs in the destructor and noexcept moves
    driver().cuMemFree_fn(p_);
    p_ = 0;
  }
}

static void check_range(size_t off, size_t n, size_t size, const char* what) {
  if (off > size || n > size - off)
    throw Error(Errc::InvalidArgument, std::string(what) + ": range [" + std::to_string(off) +
                                           ", +" + std::to_string(n) + ") outside a buffer of " +
                                           std::to_string(size) + " bytes");
}

void DeviceBuffer::upload(const void* host, size_t n, size_t off) {
  check_range(off, n, bytes_, "DeviceBuffer::upload");
  if (!n) return;
  ContextGuard g(rt_->context());
  KJIT_CU(cuMemcpyHtoD, p_ + off, host, n);
  // From pageable memory the copy may still be in flight on return, and it is not ordered with
  // the caller's non-blocking streams: finish it so a following launch sees the data.
  KJIT_CU(cuCtxSynchronize);
}

void DeviceBuffer::download(void* host, size_t n, size_t off) const {
  check_range(off, n, bytes_, "DeviceBuffer::download");
  if (!n) return;
  ContextGuard g(rt_->context());
  KJIT_CU(cuMemcpyDtoH, host, p_ + off, n);
}

void DeviceBuffer::fill_bytes(unsigned char v) {
  if (!bytes_) return;
  ContextGuard g(rt_->context());
  KJIT_CU(cuMemsetD8, p_, v, bytes_);
  KJIT_CU(cuCtxSynchronize);  // memset is asynchronous and unordered with non-blocking streams
}

Graph::Graph(Runtime& rt, CUstream stream, const std::function<void()>& body) : rt_(rt) {
  ContextGuard g(rt_.context());
  KJIT_CU(cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  try {
    body();
  } catch (...) {
    CUgraph partial = nullptr;
    driver().cuStreamEndCapture_fn(stream, &partial);
    if (partial) driver().cuGraphDestroy_fn(partial);
    throw;
  }
  KJIT_CU(cuStreamEndCapture, stream, &g_);
  CUresult r = driver().cuGraphInstantiateWithFlags_fn(&exec_, g_, 0);
  if (r != CUDA_SUCCESS) {
    driver().cuGraphDestroy_fn(g_);
    detail::check_cu(r, "cuGraphInstantiateWithFlags");
  }
}

Graph::~Graph() {
  ContextGuard g(rt_.context(), std::nothrow);
  if (exec_) driver().cuGraphExecDestroy_fn(exec_);
  if (g_) driver().cuGraphDestroy_fn(g_);
}

void Graph::launch(CUstream stream) const {
  KJIT_CU(cuGraphLaunch, exec_, stream);
}

size_t Graph::nodes() const {
  size_t n = 0;
  KJIT_CU(cuGraphGetNodes, g_, nullptr, &n);
  return n;
}

std::vector<std::string> Graph::kernel_names() const {
  return graph_kernel_names(rt_, g_);
}

std::vector<std::string> graph_kernel_names(Runtime& rt, CUgraph graph) {
  // Looked up here rather than in the driver table: cuFuncGetName is CUDA 12.3+, and kjit runs
  // on 12.0 drivers.
  const auto get_type = KJIT_DRIVER_PROC(cuGraphNodeGetType, 10000);
  const auto get_params = KJIT_DRIVER_PROC(cuGraphKernelNodeGetParams, 12000);
  // Typed here: cudaTypedefs.h of toolkits before 12.3 has no PFN_cuFuncGetName_v12030.
  using GetNameFn = CUresult (*)(const char**, CUfunction);
  const auto get_name = reinterpret_cast<GetNameFn>(detail::driver_proc("cuFuncGetName", 12030));
  ContextGuard g(rt.context());
  size_t n = 0;
  KJIT_CU(cuGraphGetNodes, graph, nullptr, &n);
  std::vector<CUgraphNode> nodes(n);
  KJIT_CU(cuGraphGetNodes, graph, nodes.data(), &n);
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i) {
    CUgraphNodeType type;
    detail::check_cu(get_type(nodes[i], &type), "cuGraphNodeGetType");
    if (type != CU_GRAPH_NODE_TYPE_KERNEL) continue;
    CUDA_KERNEL_NODE_PARAMS params{};
    detail::check_cu(get_params(nodes[i], &params), "cuGraphKernelNodeGetParams");
    // A node made from a CUkernel (cuLibrary) has its CUfunction filled in by the driver too
    // (driver 580: captured or added with cuGraphAddKernelNode; tests/gpu/launch_test.cpp).
    const char* name = nullptr;
    detail::check_cu(get_name(&name, params.func), "cuFuncGetName");
    names.emplace_back(name ? name : "");
  }
  return names;
}

void synchronize(Runtime& rt) {
  ContextGuard g(rt.context());
  KJIT_CU(cuCtxSynchronize);
}

void* driver_proc(const char* name) {
  return detail::driver_proc(name, CUDA_VERSION);
}

void* driver_proc(const char* name, int cuda_version) {
  return detail::driver_proc(name, cuda_version);
}

void check_driver(CUresult r, const char* what) {
  detail::check_cu(r, what);
}

}  // namespace kjit
