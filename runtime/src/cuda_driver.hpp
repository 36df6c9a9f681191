// The CUDA driver API, loaded at run time from libcuda.so.1 (dlopen + cuGetProcAddress).
// kjit never links libcuda, so a machine without a driver still runs every CPU-side feature.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <new>
#include <string>

namespace kjit::detail {

// Each entry: a driver function's name and the CUDA version of the ABI kjit calls it with. It is
// asked for at that version and typed PFN_<name>_v<version> (cudaTypedefs.h), so a pointer and its
// type cannot disagree. Not at the header's CUDA_VERSION: cuGetProcAddress then returns the newest
// variant, and a toolkit may give that another signature than the plain declaration in its cuda.h.
// CUDA 13.0 at 13000: cuCtxSynchronize is cuCtxSynchronize_v2(CUcontext) and cuStreamGetCtx is
// cuStreamGetCtx_v2(CUstream, CUcontext*, CUgreenCtx*), while cuda.h declares
// cuCtxSynchronize(void) and the two-argument cuStreamGetCtx; kjit called the first with no
// context, so the driver read a stale register as one (a segfault under compute-sanitizer). Each
// version is at most kMinDriverVersion: the oldest driver kjit runs on has every entry, and every
// driver gives it the same ABI.
// clang-format off
#define KJIT_DRIVER_FUNCTIONS(X) \
  X(cuInit, 2000) \
  X(cuDriverGetVersion, 2020) \
  X(cuGetErrorName, 6000) \
  X(cuGetErrorString, 6000) \
  X(cuDeviceGetCount, 2000) \
  X(cuDeviceGet, 2000) \
  X(cuDeviceGetName, 2000) \
  X(cuDeviceGetAttribute, 2000) \
  X(cuDevicePrimaryCtxRetain, 7000) \
  X(cuDevicePrimaryCtxRelease, 11000) \
  X(cuCtxGetCurrent, 4000) \
  X(cuCtxSetCurrent, 4000) \
  X(cuCtxPushCurrent, 4000) \
  X(cuCtxPopCurrent, 4000) \
  X(cuCtxSynchronize, 2000) \
  X(cuModuleLoadData, 2000) \
  X(cuModuleUnload, 2000) \
  X(cuModuleGetFunction, 2000) \
  X(cuFuncSetAttribute, 9000) \
  X(cuFuncGetAttribute, 2020) \
  X(cuLaunchKernelEx, 11060) \
  X(cuLaunchKernel, 4000) \
  X(cuOccupancyMaxActiveClusters, 11070) \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050) \
  X(cuMemAlloc, 3020) \
  X(cuMemFree, 3020) \
  X(cuMemcpyHtoD, 3020) \
  X(cuMemcpyDtoH, 3020) \
  X(cuMemcpyDtoD, 3020) \
  X(cuMemsetD8, 3020) \
  X(cuMemsetD8Async, 3020) \
  X(cuMemsetD32Async, 3020) \
  X(cuMemcpyHtoDAsync, 3020) \
  X(cuMemcpyDtoHAsync, 3020) \
  X(cuMemcpyDtoDAsync, 3020) \
  X(cuStreamCreate, 2000) \
  X(cuStreamDestroy, 4000) \
  X(cuStreamSynchronize, 2000) \
  X(cuStreamIsCapturing, 10000) \
  X(cuStreamGetCtx, 9020) \
  X(cuStreamBeginCapture, 10010) \
  X(cuStreamEndCapture, 10000) \
  X(cuGraphInstantiateWithFlags, 11040) \
  X(cuGraphLaunch, 10000) \
  X(cuGraphDestroy, 10000) \
  X(cuGraphExecDestroy, 10000) \
  X(cuEventCreate, 2000) \
  X(cuEventRecord, 2000) \
  X(cuEventSynchronize, 2000) \
  X(cuEventElapsedTime, 2000) \
  X(cuEventDestroy, 4000) \
  X(cuGraphGetNodes, 10000)
// clang-format on

// The oldest CUDA driver kjit supports (cuDriverGetVersion's encoding): 12.0.
constexpr int kMinDriverVersion = 12000;

struct Driver {
#define KJIT_DRIVER_MEMBER(name, version) PFN_##name##_v##version name##_fn = nullptr;
  KJIT_DRIVER_FUNCTIONS(KJIT_DRIVER_MEMBER)
#undef KJIT_DRIVER_MEMBER
  int version = 0;  // cuDriverGetVersion, e.g. 13000
};

#define KJIT_DRIVER_CHECK_VERSION(name, version)              \
  static_assert(version <= ::kjit::detail::kMinDriverVersion, \
                #name " is asked for at an ABI newer than the oldest supported driver");
KJIT_DRIVER_FUNCTIONS(KJIT_DRIVER_CHECK_VERSION)
#undef KJIT_DRIVER_CHECK_VERSION

// cuGetProcAddress_v2 (CUDA 12.0+), the one entry point taken with dlsym.
using GetProcAddressFn = PFN_cuGetProcAddress_v12000;

// Fills every entry of *d through `gpa`, each at its pinned version; false with *why when the
// driver lacks one. The loader's own step, exposed so that a test can hand it a fake driver.
bool resolve_driver(GetProcAddressFn gpa, Driver* d, std::string* why);

// The loaded driver; throws Error(NoDriver) with the reason when it is not usable.
const Driver& driver();
// A driver entry point by name, asked for at `cuda_version` (the ABI of its
// PFN_<name>_v<cuda_version> typedef); throws NoDriver / NotFound. Use KJIT_DRIVER_PROC.
void* driver_proc(const char* name, int cuda_version);
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

// An entry point outside the table (newer than 12.0, or rarely used), typed and asked for at one
// ABI version like the table's: KJIT_DRIVER_PROC(cuFuncGetName, 12030).
#define KJIT_DRIVER_PROC(name, version) \
  reinterpret_cast<PFN_##name##_v##version>(::kjit::detail::driver_proc(#name, version))

#define KJIT_CU(call_fn, ...) \
  ::kjit::detail::check_cu(::kjit::detail::driver().call_fn##_fn(__VA_ARGS__), #call_fn)
