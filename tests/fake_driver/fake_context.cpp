// The fake driver's device, primary context and error names.
#include <cstdlib>
#include <cstring>

#include "fake_entries.hpp"
#include "fake_state.hpp"

namespace kjit_fake {
namespace {

// Trivially destructible, like everything thread_local here: kjit's static destructors still
// push and pop contexts after the main thread's thread_local objects are gone.
constexpr int kMaxContextDepth = 64;
thread_local CUcontext t_ctx_stack[kMaxContextDepth];
thread_local int t_ctx_depth = 0;

const char* error_name(CUresult r) {
  switch (r) {
    case CUDA_SUCCESS:
      return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE:
      return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY:
      return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_INVALID_DEVICE:
      return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_INVALID_IMAGE:
      return "CUDA_ERROR_INVALID_IMAGE";
    case CUDA_ERROR_INVALID_CONTEXT:
      return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_INVALID_HANDLE:
      return "CUDA_ERROR_INVALID_HANDLE";
    case CUDA_ERROR_NOT_FOUND:
      return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_NOT_READY:
      return "CUDA_ERROR_NOT_READY";
    case CUDA_ERROR_ILLEGAL_ADDRESS:
      return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case CUDA_ERROR_ILLEGAL_STATE:
      return "CUDA_ERROR_ILLEGAL_STATE";
    case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
      return "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE";
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
      return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
      return "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
      return "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
    case CUDA_ERROR_INVALID_CLUSTER_SIZE:
      return "CUDA_ERROR_INVALID_CLUSTER_SIZE";
    default:
      return nullptr;
  }
}

}  // namespace

int driver_version() {
  static const int v = [] {
    const char* e = std::getenv("KJIT_FAKE_DRIVER_VERSION");
    return e && *e ? std::atoi(e) : 13000;
  }();
  return v;
}

State& state() {
  static State* s = [] {  // never destroyed: kjit may call in from static destructors
    auto* st = new State;
    st->legacy.legacy = true;
    return st;
  }();
  return *s;
}

bool injected(FaultPoint p, CUresult* r) {
  Fault& f = state().faults[p];
  if (f.left.load() <= 0 || f.left.fetch_sub(1) <= 0) return false;
  *r = f.with.load();
  return true;
}

CUcontext primary() {
  return reinterpret_cast<CUcontext>(&state().context_object);
}

CUcontext current() {
  return t_ctx_depth == 0 ? nullptr : t_ctx_stack[t_ctx_depth - 1];
}

CUresult cuInit(unsigned) {
  return CUDA_SUCCESS;
}
CUresult cuDriverGetVersion(int* v) {
  *v = driver_version();
  return CUDA_SUCCESS;
}
CUresult cuGetErrorName(CUresult r, const char** s) {
  *s = error_name(r);
  return *s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult cuGetErrorString(CUresult r, const char** s) {
  *s = error_name(r) ? "an error of the kjit fake driver" : nullptr;
  return *s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult cuDeviceGetCount(int* n) {
  *n = 1;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *d = 0;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
  if (d != 0 || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::strncpy(name, "NVIDIA H200 (kjit fake driver)", static_cast<size_t>(len) - 1);
  name[len - 1] = '\0';
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *v = 9;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *v = kSms;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *v = kMaxThreads;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      *v = kSmemOptin;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
      *v = kSmemPerSm;
      break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
      *v = 50 * 1024 * 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH:
      *v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
      *v = 1;
      break;
    default:
      *v = 0;
      break;
  }
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) {
  if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
  ++state().primary_refs;
  *c = primary();
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease(CUdevice d) {
  if (d != 0 || state().primary_refs.fetch_sub(1) <= 0) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_SUCCESS;
}
CUresult cuCtxGetCurrent(CUcontext* c) {
  *c = current();
  return CUDA_SUCCESS;
}
CUresult cuCtxSetCurrent(CUcontext c) {
  if (c && c != primary()) return CUDA_ERROR_INVALID_CONTEXT;
  if (!c) {
    if (t_ctx_depth > 0) --t_ctx_depth;
  } else if (t_ctx_depth == 0) {
    t_ctx_stack[t_ctx_depth++] = c;
  } else {
    t_ctx_stack[t_ctx_depth - 1] = c;
  }
  return CUDA_SUCCESS;
}
CUresult cuCtxPushCurrent(CUcontext c) {
  if (c != primary()) return CUDA_ERROR_INVALID_CONTEXT;
  if (t_ctx_depth == kMaxContextDepth) return CUDA_ERROR_OUT_OF_MEMORY;
  t_ctx_stack[t_ctx_depth++] = c;
  return CUDA_SUCCESS;
}
CUresult cuCtxPopCurrent(CUcontext* c) {
  if (t_ctx_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
  --t_ctx_depth;
  if (c) *c = t_ctx_stack[t_ctx_depth];
  return CUDA_SUCCESS;
}
CUresult cuCtxSynchronize() {
  if (current() != primary()) return CUDA_ERROR_INVALID_CONTEXT;
  return capture_forbids() ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}
CUresult cuCtxGetExecAffinity(CUexecAffinityParam* p, CUexecAffinityType t) {
  if (t != CU_EXEC_AFFINITY_TYPE_SM_COUNT) return CUDA_ERROR_INVALID_VALUE;
  p->type = t;
  p->param.smCount.val = kSms;
  return CUDA_SUCCESS;
}

}  // namespace kjit_fake
