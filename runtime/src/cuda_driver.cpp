#include "cuda_driver.hpp"

#include <dlfcn.h>

#include <mutex>

#include "kjit/error.hpp"

namespace kjit::detail {
namespace {

struct LoadResult {
  Driver drv;
  bool ok = false;
  Errc code = Errc::NoDriver;
  std::string why;
  GetProcAddressFn gpa = nullptr;
};

LoadResult load() {
  LoadResult r;
  // Never closed: the driver stays for the life of the process, as libcudart does.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    r.why = std::string("no CUDA driver found (dlopen libcuda.so.1 failed: ") + (e ? e : "?") + ")";
    return r;
  }
  auto gpa = reinterpret_cast<GetProcAddressFn>(dlsym(lib, "cuGetProcAddress_v2"));
  if (!gpa) {
    r.why = "the CUDA driver is too old: no cuGetProcAddress_v2 (kjit needs a CUDA 12.0+ driver)";
    return r;
  }
  r.gpa = gpa;
  if (!resolve_driver(gpa, &r.drv, &r.why)) return r;
  CUresult st = r.drv.cuInit_fn(0);
  if (st != CUDA_SUCCESS) {
    const char* name = nullptr;
    r.drv.cuGetErrorName_fn(st, &name);
    r.why = std::string("CUDA driver found but cuInit failed: ") + (name ? name : "?") +
            (st == CUDA_ERROR_NO_DEVICE ? " (no CUDA device)" : "");
    if (st == CUDA_ERROR_NO_DEVICE) r.code = Errc::NoDevice;
    return r;
  }
  st = r.drv.cuDriverGetVersion_fn(&r.drv.version);
  if (st != CUDA_SUCCESS) {
    r.why = "CUDA driver found but cuDriverGetVersion failed (CUresult " + std::to_string(st) + ")";
    return r;
  }
  if (r.drv.version < kMinDriverVersion) {
    r.why = "CUDA driver version " + std::to_string(r.drv.version) + " is older than 12.0";
    return r;
  }
  r.ok = true;
  return r;
}

const LoadResult& loaded() {
  static const LoadResult r = load();
  return r;
}

}  // namespace

bool resolve_driver(GetProcAddressFn gpa, Driver* d, std::string* why) {
#define KJIT_DRIVER_RESOLVE(name, version)                                                 \
  {                                                                                        \
    void* p = nullptr;                                                                     \
    CUdriverProcAddressQueryResult st{};                                                   \
    if (gpa(#name, &p, version, CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS || !p) { \
      *why = std::string("the CUDA driver has no entry point ") + #name + " (CUDA " +      \
             std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10) +  \
             " ABI; kjit needs a CUDA 12.0 or newer driver)";                              \
      return false;                                                                        \
    }                                                                                      \
    d->name##_fn = reinterpret_cast<PFN_##name##_v##version>(p);                           \
  }
  KJIT_DRIVER_FUNCTIONS(KJIT_DRIVER_RESOLVE)
#undef KJIT_DRIVER_RESOLVE
  return true;
}

const Driver& driver() {
  const LoadResult& r = loaded();
  if (!r.ok) throw Error(r.code, r.why);
  return r.drv;
}

void* driver_proc(const char* name, int cuda_version) {
  driver();  // throws when there is no usable driver
  void* p = nullptr;
  CUdriverProcAddressQueryResult st{};
  const CUresult r = loaded().gpa(name, &p, cuda_version, CU_GET_PROC_ADDRESS_DEFAULT, &st);
  if (r != CUDA_SUCCESS || !p)
    throw Error(Errc::NotFound, std::string("the CUDA driver has no entry point ") + name +
                                    " at CUDA version " + std::to_string(cuda_version));
  return p;
}

bool driver_available(std::string* why) {
  const LoadResult& r = loaded();
  if (!r.ok && why) *why = r.why;
  return r.ok;
}

std::string cu_error_text(CUresult r) {
  const Driver& d = driver();
  const char* name = nullptr;
  const char* text = nullptr;
  d.cuGetErrorName_fn(r, &name);
  d.cuGetErrorString_fn(r, &text);
  return std::string(name ? name : "CUDA_ERROR_?") + " (" + (text ? text : "unknown") + ")";
}

void check_cu(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  throw Error(Errc::Cuda, std::string(what) + " failed: " + cu_error_text(r));
}

bool capturing(CUcontext ctx, CUstream stream) {
  if (!stream) return false;
  ContextGuard guard(ctx);
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  check_cu(driver().cuStreamIsCapturing_fn(stream, &st), "cuStreamIsCapturing");
  return st != CU_STREAM_CAPTURE_STATUS_NONE;
}

ContextGuard::ContextGuard(CUcontext ctx) {
  const Driver& d = driver();
  CUcontext cur = nullptr;
  check_cu(d.cuCtxGetCurrent_fn(&cur), "cuCtxGetCurrent");
  if (cur != ctx) {
    check_cu(d.cuCtxPushCurrent_fn(ctx), "cuCtxPushCurrent");
    pushed_ = true;
  }
}

ContextGuard::ContextGuard(CUcontext ctx, std::nothrow_t) noexcept {
  if (!driver_available(nullptr)) return;
  const Driver& d = loaded().drv;
  CUcontext cur = nullptr;
  if (d.cuCtxGetCurrent_fn(&cur) == CUDA_SUCCESS && cur == ctx) return;
  pushed_ = d.cuCtxPushCurrent_fn(ctx) == CUDA_SUCCESS;
}

ContextGuard::~ContextGuard() {
  if (pushed_) {
    CUcontext dummy = nullptr;
    driver().cuCtxPopCurrent_fn(&dummy);
  }
}

}  // namespace kjit::detail
