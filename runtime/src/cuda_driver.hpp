// The CUDA driver API, loaded at run time from libcuda.so.1 (dlopen + cuGetProcAddress).
// kjit never links libcuda, so a machine without a driver still runs every CPU-side feature.
#pragma once

#include <cuda.h>

#include <new>
#include <string>

namespace kjit::detail {

// Each entry: the driver function's name. Types come from cuda.h (decltype), and the entry points
// are asked for at the header's CUDA_VERSION, so type and ABI version always agree.
#define KJIT_DRIVER_FUNCTIONS(X)                                                                   \
  X(cuInit)                                                                                        \
  X(cuDriverGetVersion)                                                                            \
  X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName)      \
      X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)             \
          X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxPushCurrent) X(cuCtxPopCurrent)             \
              X(cuCtxSynchronize) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(  \
                  cuFuncSetAttribute) X(cuFuncGetAttribute) X(cuLaunchKernelEx) X(cuLaunchKernel)  \
                  X(cuOccupancyMaxActiveClusters) X(cuOccupancyMaxActiveBlocksPerMultiprocessor)   \
                      X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoD)   \
                          X(cuMemsetD8) X(cuMemsetD8Async) X(cuMemsetD32Async) X(cuMemcpyHtoDAsync)                 \
                              X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuStreamCreate)          \
                                  X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamIsCapturing) \
                                      X(cuStreamGetCtx) X(cuStreamBeginCapture)                    \
                                          X(cuStreamEndCapture) X(cuGraphInstantiateWithFlags)     \
                                              X(cuGraphLaunch) X(cuGraphDestroy)                   \
                                                  X(cuGraphExecDestroy) X(cuEventCreate)           \
                                                      X(cuEventRecord) X(cuEventSynchronize)       \
                                                          X(cuEventElapsedTime) X(cuEventDestroy) \
                                                              X(cuGraphGetNodes)

struct Driver {
#define KJIT_DRIVER_MEMBER(name) decltype(&::name) name##_fn = nullptr;
  KJIT_DRIVER_FUNCTIONS(KJIT_DRIVER_MEMBER)
#undef KJIT_DRIVER_MEMBER
  int version = 0;  // cuDriverGetVersion, e.g. 13000
};

// The loaded driver; throws Error(NoDriver) with the reason when it is not usable.
const Driver& driver();
// Any driver entry point by name (at the header's CUDA_VERSION); throws NotFound.
void* driver_proc(const char* name);
// Non-throwing probe: true when a driver is loaded and initialized; else false and *why.
bool driver_available(std::string* why = nullptr);

// Throws Error(Cuda) naming the call and the driver's error name/string.
void check_cu(CUresult r, const char* what);
std::string cu_error_text(CUresult r);

// Whether `stream` of context `ctx` is being captured into a graph (false for the null stream):
// work that allocates, synchronizes or compiles must refuse then, with Errc::CaptureCompile.
// `ctx` is made current for the query: CU_STREAM_PER_THREAD and the legacy stream name the
// calling thread's current context's stream, and a fresh thread has none.
bool capturing(CUcontext ctx, CUstream stream);

// Makes `ctx` current for the scope when it is not already (one TLS read when it is).
class ContextGuard {
 public:
  explicit ContextGuard(CUcontext ctx);
  // For destructors: a context that cannot be made current is skipped, never thrown about (a
  // throw from a destructor is std::terminate).
  ContextGuard(CUcontext ctx, std::nothrow_t) noexcept;
  ~ContextGuard();
  ContextGuard(const ContextGuard&) = delete;
  ContextGuard& operator=(const ContextGuard&) = delete;

 private:
  bool pushed_ = false;
};

}  // namespace kjit::detail

#define KJIT_CU(call_fn, ...) \
  ::kjit::detail::check_cu(::kjit::detail::driver().call_fn##_fn(__VA_ARGS__), #call_fn)
