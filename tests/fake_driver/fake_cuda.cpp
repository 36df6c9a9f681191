// The fake CUDA driver (fake_cuda.h): cuGetProcAddress_v2 hands out the functions below, one
// for each entry of kjit's driver table (the table's own X-macro lists them, so a new entry
// that the fake lacks does not compile) plus the few kjit looks up by name.
#include "fake_cuda.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "../../runtime/src/cuda_driver.hpp"
#include "cubin_info.hpp"

namespace kjit_fake {
namespace {

// An H200's numbers, as the real driver reports them.
constexpr int kSms = 132, kMaxThreads = 1024, kSmemOptin = 232448, kSmemPerSm = 233472;
constexpr int kSmemDefault = 48 * 1024, kReservedSmemPerBlock = 1024, kMaxBlocksPerSm = 32;
constexpr int kDriverVersion = 13000;
constexpr uint32_t kMagicStream = 0x5354524d, kMagicEvent = 0x4556544e;

struct Function {
  std::string name;
  const KernelInfo* info = nullptr;
  std::atomic<int> max_dynamic_smem{0};
  std::atomic<bool> nonportable{false};
};

struct Module {
  std::vector<unsigned char> image;
  CubinInfo cubin;
  std::vector<std::unique_ptr<Function>> functions;
  std::mutex mu;
};

struct Node {
  CUfunction fn = nullptr;
};

struct Stream {
  uint32_t magic = kMagicStream;
  std::atomic<bool> capturing{false};
  std::mutex mu;
  std::vector<Node> captured;
};

struct Graph {
  std::vector<std::unique_ptr<Node>> nodes;
};

struct Event {
  uint32_t magic = kMagicEvent;
};

// Entry points a test may make fail (kjit_fake_fail).
enum FaultPoint { kLaunch, kModuleLoad, kFuncGetAttribute, kMemAlloc, kFaultPoints };
constexpr const char* kFaultNames[kFaultPoints] = {"cuLaunchKernelEx", "cuModuleLoadData",
                                                   "cuFuncGetAttribute", "cuMemAlloc"};

struct Fault {
  std::atomic<int> left{0};
  std::atomic<CUresult> with{CUDA_SUCCESS};
};

struct State {
  std::atomic<uint64_t> launches{0}, module_loads{0}, graph_launches{0};
  std::atomic<int64_t> live_modules{0};
  Fault faults[kFaultPoints];
  std::mutex mem_mu;
  std::map<uintptr_t, size_t> allocations;  // base -> bytes
  int context_object = 0;                   // its address is the primary context
  std::atomic<int> primary_refs{0};
};

State& state() {
  static State* s = new State;  // never destroyed: kjit may call in from static destructors
  return *s;
}

// True (and *r the error) while a test asked entry point p to fail.
bool injected(FaultPoint p, CUresult* r) {
  Fault& f = state().faults[p];
  if (f.left.load() <= 0 || f.left.fetch_sub(1) <= 0) return false;
  *r = f.with.load();
  return true;
}

CUcontext primary() {
  return reinterpret_cast<CUcontext>(&state().context_object);
}

// Trivially destructible, like everything thread_local here: kjit's static destructors still
// push and pop contexts after the main thread's thread_local objects are gone.
constexpr int kMaxContextDepth = 64;
thread_local CUcontext t_ctx_stack[kMaxContextDepth];
thread_local int t_ctx_depth = 0;
thread_local kjit_fake_launch t_last{};
thread_local bool t_launched = false;

CUcontext current() {
  return t_ctx_depth == 0 ? nullptr : t_ctx_stack[t_ctx_depth - 1];
}

Function* fn_of(CUfunction f) {
  return reinterpret_cast<Function*>(f);
}

// The stream a handle names: null for the legacy and per-thread streams, which are never
// captured here; `ok` false for a handle that is no stream.
Stream* stream_of(CUstream s, bool* ok) {
  *ok = true;
  if (s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) return nullptr;
  auto* st = reinterpret_cast<Stream*>(s);
  *ok = st->magic == kMagicStream;
  return *ok ? st : nullptr;
}

// [p, p + n) inside one live allocation.
bool device_range(CUdeviceptr p, size_t n) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mem_mu);
  auto it = s.allocations.upper_bound(static_cast<uintptr_t>(p));
  if (it == s.allocations.begin()) return false;
  --it;
  return p - it->first <= it->second && n <= it->second - (p - it->first);
}

// Blocks of `threads` threads and `smem` bytes of shared memory one SM holds at once.
int blocks_per_sm(const Function& f, int threads, size_t smem) {
  if (threads <= 0 || threads > kMaxThreads) return 0;
  const size_t total = smem + f.info->static_smem;
  if (total > kSmemOptin) return 0;
  const int warps = (threads + 31) / 32;
  int n = std::min(kMaxBlocksPerSm, 64 / warps);
  n = std::min<int>(n, static_cast<int>(kSmemPerSm / (total + kReservedSmemPerBlock)));
  return n;
}

struct Shape {
  unsigned cluster[3] = {1, 1, 1};
  bool programmatic = false, cooperative = false;
};

Shape shape_of(const CUlaunchConfig& c) {
  Shape s;
  for (unsigned i = 0; i < c.numAttrs; ++i) {
    const CUlaunchAttribute& a = c.attrs[i];
    if (a.id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      s.cluster[0] = a.value.clusterDim.x;
      s.cluster[1] = a.value.clusterDim.y;
      s.cluster[2] = a.value.clusterDim.z;
    } else if (a.id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION) {
      s.programmatic = a.value.programmaticStreamSerializationAllowed != 0;
    } else if (a.id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) {
      s.cooperative = a.value.cooperative != 0;
    }
  }
  return s;
}

// What the driver refuses in a cluster shape for f: more than 16 CTAs, more than 8 without the
// non-portable opt-in.
CUresult check_cluster(const Function& f, const Shape& s) {
  const unsigned n = s.cluster[0] * s.cluster[1] * s.cluster[2];
  if (n == 0 || n > 16 || (n > 8 && !f.nonportable.load())) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  return CUDA_SUCCESS;
}

CUresult check_launch(const CUlaunchConfig& c, const Function& f, const Shape& s) {
  if (current() != primary()) return CUDA_ERROR_INVALID_CONTEXT;
  if (!c.gridDimX || !c.gridDimY || !c.gridDimZ || !c.blockDimX || !c.blockDimY || !c.blockDimZ)
    return CUDA_ERROR_INVALID_VALUE;
  const uint64_t threads = uint64_t{c.blockDimX} * c.blockDimY * c.blockDimZ;
  if (threads > kMaxThreads) return CUDA_ERROR_INVALID_VALUE;
  if (c.sharedMemBytes > static_cast<unsigned>(f.max_dynamic_smem.load()) ||
      c.sharedMemBytes + f.info->static_smem > kSmemOptin)
    return CUDA_ERROR_INVALID_VALUE;
  if (const CUresult r = check_cluster(f, s); r != CUDA_SUCCESS) return r;
  if (c.gridDimX % s.cluster[0] || c.gridDimY % s.cluster[1] || c.gridDimZ % s.cluster[2])
    return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  if (s.cooperative) {
    const uint64_t grid = uint64_t{c.gridDimX} * c.gridDimY * c.gridDimZ;
    if (grid > uint64_t(blocks_per_sm(f, static_cast<int>(threads), c.sharedMemBytes)) * kSms)
      return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
  }
  return CUDA_SUCCESS;
}

void record_launch(const CUlaunchConfig& c, const Function& f, const Shape& s, void** params) {
  kjit_fake_launch& l = t_last;
  std::strncpy(l.kernel, f.name.c_str(), sizeof(l.kernel) - 1);
  l.kernel[sizeof(l.kernel) - 1] = '\0';
  l.grid[0] = c.gridDimX, l.grid[1] = c.gridDimY, l.grid[2] = c.gridDimZ;
  l.block[0] = c.blockDimX, l.block[1] = c.blockDimY, l.block[2] = c.blockDimZ;
  std::memcpy(l.cluster, s.cluster, sizeof(l.cluster));
  l.shared_bytes = c.sharedMemBytes;
  l.programmatic = s.programmatic;
  l.cooperative = s.cooperative;
  l.stream = c.hStream;
  const std::vector<size_t>& sizes = f.info->param_sizes;
  l.params = sizes.size();
  for (size_t i = 0; i < sizes.size() && i < KJIT_FAKE_MAX_PARAMS; ++i) {
    // Read as the driver does: every argument's bytes, so a dangling pointer shows under ASan.
    l.param_size[i] = sizes[i];
    l.param_bits[i] = 0;
    std::memcpy(&l.param_bits[i], params[i], std::min<size_t>(8, sizes[i]));
  }
  t_launched = true;
}

CUresult launch(const CUlaunchConfig* c, CUfunction fn, void** params, void** extra) {
  State& st = state();
  if (CUresult r; injected(kLaunch, &r)) return r;
  if (!c || !fn) return CUDA_ERROR_INVALID_VALUE;
  const Function& f = *fn_of(fn);
  const Shape s = shape_of(*c);
  if (const CUresult r = check_launch(*c, f, s); r != CUDA_SUCCESS) return r;
  if (extra || (!f.info->param_sizes.empty() && !params)) return CUDA_ERROR_INVALID_VALUE;
  bool ok = false;
  Stream* stream = stream_of(c->hStream, &ok);
  if (!ok) return CUDA_ERROR_INVALID_HANDLE;
  record_launch(*c, f, s, params);
  if (stream && stream->capturing.load()) {
    std::lock_guard<std::mutex> lock(stream->mu);
    stream->captured.push_back(Node{fn});
  }
  st.launches.fetch_add(1, std::memory_order_relaxed);
  return CUDA_SUCCESS;
}

// ---- entry points, in the order of kjit's driver table ----

CUresult cuInit(unsigned) {
  return CUDA_SUCCESS;
}
CUresult cuDriverGetVersion(int* v) {
  *v = kDriverVersion;
  return CUDA_SUCCESS;
}
CUresult error_name(CUresult r, const char** s) {
  switch (r) {
    case CUDA_SUCCESS:
      *s = "CUDA_SUCCESS";
      break;
    case CUDA_ERROR_INVALID_VALUE:
      *s = "CUDA_ERROR_INVALID_VALUE";
      break;
    case CUDA_ERROR_INVALID_CONTEXT:
      *s = "CUDA_ERROR_INVALID_CONTEXT";
      break;
    case CUDA_ERROR_INVALID_HANDLE:
      *s = "CUDA_ERROR_INVALID_HANDLE";
      break;
    case CUDA_ERROR_INVALID_IMAGE:
      *s = "CUDA_ERROR_INVALID_IMAGE";
      break;
    case CUDA_ERROR_NOT_FOUND:
      *s = "CUDA_ERROR_NOT_FOUND";
      break;
    case CUDA_ERROR_OUT_OF_MEMORY:
      *s = "CUDA_ERROR_OUT_OF_MEMORY";
      break;
    case CUDA_ERROR_ILLEGAL_ADDRESS:
      *s = "CUDA_ERROR_ILLEGAL_ADDRESS";
      break;
    case CUDA_ERROR_INVALID_CLUSTER_SIZE:
      *s = "CUDA_ERROR_INVALID_CLUSTER_SIZE";
      break;
    case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
      *s = "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE";
      break;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
      *s = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
      break;
    default:
      *s = nullptr;
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
CUresult cuGetErrorName(CUresult r, const char** s) {
  return error_name(r, s);
}
CUresult cuGetErrorString(CUresult r, const char** s) {
  const CUresult named = error_name(r, s);
  if (named == CUDA_SUCCESS) *s = "an error of the kjit fake driver";
  return named;
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
  return current() == primary() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}
CUresult cuModuleLoadData(CUmodule* m, const void* image) {
  if (current() != primary()) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult r; injected(kModuleLoad, &r)) return r;
  std::string why;
  std::optional<CubinInfo> info = read_cubin(image, &why);
  if (!info) return CUDA_ERROR_INVALID_IMAGE;
  auto mod = std::make_unique<Module>();
  const auto* b = static_cast<const unsigned char*>(image);
  mod->image.assign(b, b + info->image_bytes);
  mod->cubin = std::move(*info);
  state().module_loads.fetch_add(1);
  state().live_modules.fetch_add(1);
  *m = reinterpret_cast<CUmodule>(mod.release());
  return CUDA_SUCCESS;
}
CUresult cuModuleUnload(CUmodule m) {
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  delete reinterpret_cast<Module*>(m);
  state().live_modules.fetch_sub(1);
  return CUDA_SUCCESS;
}
CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  if (!m || !name) return CUDA_ERROR_INVALID_VALUE;
  Module& mod = *reinterpret_cast<Module*>(m);
  auto it = mod.cubin.kernels.find(name);
  if (it == mod.cubin.kernels.end()) return CUDA_ERROR_NOT_FOUND;
  std::lock_guard<std::mutex> lock(mod.mu);
  for (auto& fn : mod.functions)
    if (fn->name == name) {
      *f = reinterpret_cast<CUfunction>(fn.get());
      return CUDA_SUCCESS;
    }
  auto fn = std::make_unique<Function>();
  fn->name = name;
  fn->info = &it->second;
  fn->max_dynamic_smem = kSmemDefault - static_cast<int>(it->second.static_smem);
  *f = reinterpret_cast<CUfunction>(fn.get());
  mod.functions.push_back(std::move(fn));
  return CUDA_SUCCESS;
}
CUresult cuFuncSetAttribute(CUfunction fn, CUfunction_attribute a, int v) {
  Function& f = *fn_of(fn);
  if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    if (v < 0 || v + f.info->static_smem > kSmemOptin) return CUDA_ERROR_INVALID_VALUE;
    f.max_dynamic_smem = v;
  } else if (a == CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED) {
    f.nonportable = v != 0;
  }
  return CUDA_SUCCESS;
}
CUresult cuFuncGetAttribute(int* v, CUfunction_attribute a, CUfunction fn) {
  if (CUresult r; injected(kFuncGetAttribute, &r)) return r;
  const Function& f = *fn_of(fn);
  switch (a) {
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
      *v = 32;
      break;
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *v = kMaxThreads;
      break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
      *v = static_cast<int>(f.info->static_smem);
      break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      *v = f.max_dynamic_smem;
      break;
    default:
      *v = 0;
      break;
  }
  return CUDA_SUCCESS;
}
CUresult cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
  return launch(c, f, params, extra);
}
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned smem, CUstream s, void** params,
                        void** extra) {
  CUlaunchConfig c{};
  c.gridDimX = gx, c.gridDimY = gy, c.gridDimZ = gz;
  c.blockDimX = bx, c.blockDimY = by, c.blockDimZ = bz;
  c.sharedMemBytes = smem;
  c.hStream = s;
  return launch(&c, f, params, extra);
}
CUresult cuOccupancyMaxActiveClusters(int* n, CUfunction fn, const CUlaunchConfig* c) {
  const Function& f = *fn_of(fn);
  const Shape s = shape_of(*c);
  if (const CUresult r = check_cluster(f, s); r != CUDA_SUCCESS) return r;
  const int threads = static_cast<int>(c->blockDimX * c->blockDimY * c->blockDimZ);
  const int size = static_cast<int>(s.cluster[0] * s.cluster[1] * s.cluster[2]);
  *n = blocks_per_sm(f, threads, c->sharedMemBytes) * kSms / size;
  return CUDA_SUCCESS;
}
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* n, CUfunction fn, int threads,
                                                     size_t smem) {
  *n = blocks_per_sm(*fn_of(fn), threads, smem);
  return CUDA_SUCCESS;
}
CUresult cuMemAlloc(CUdeviceptr* p, size_t bytes) {
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
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mem_mu);
  if (s.allocations.erase(static_cast<uintptr_t>(p)) == 0) return CUDA_ERROR_INVALID_VALUE;
  std::free(reinterpret_cast<void*>(p));
  return CUDA_SUCCESS;
}
void* dev(CUdeviceptr p) {
  return reinterpret_cast<void*>(p);
}
CUresult cuMemcpyHtoD(CUdeviceptr d, const void* h, size_t n) {
  if (!device_range(d, n)) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(dev(d), h, n);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoH(void* h, CUdeviceptr d, size_t n) {
  if (!device_range(d, n)) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(h, dev(d), n);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoD(CUdeviceptr d, CUdeviceptr s, size_t n) {
  if (!device_range(d, n) || !device_range(s, n)) return CUDA_ERROR_INVALID_VALUE;
  std::memmove(dev(d), dev(s), n);
  return CUDA_SUCCESS;
}
CUresult cuMemsetD8(CUdeviceptr d, unsigned char v, size_t n) {
  if (!device_range(d, n)) return CUDA_ERROR_INVALID_VALUE;
  std::memset(dev(d), v, n);
  return CUDA_SUCCESS;
}
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream) {
  return cuMemsetD8(d, v, n);
}
CUresult cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, CUstream) {
  if (n > SIZE_MAX / 4 || !device_range(d, n * 4)) return CUDA_ERROR_INVALID_VALUE;
  auto* p = static_cast<unsigned*>(dev(d));
  for (size_t i = 0; i < n; ++i) p[i] = v;
  return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoDAsync(CUdeviceptr d, const void* h, size_t n, CUstream) {
  return cuMemcpyHtoD(d, h, n);
}
CUresult cuMemcpyDtoHAsync(void* h, CUdeviceptr d, size_t n, CUstream) {
  return cuMemcpyDtoH(h, d, n);
}
CUresult cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream) {
  return cuMemcpyDtoD(d, s, n);
}
CUresult cuStreamCreate(CUstream* s, unsigned) {
  *s = reinterpret_cast<CUstream>(new Stream);
  return CUDA_SUCCESS;
}
CUresult cuStreamDestroy(CUstream s) {
  bool ok = false;
  Stream* st = stream_of(s, &ok);
  if (!ok || !st) return CUDA_ERROR_INVALID_HANDLE;
  st->magic = 0;
  delete st;
  return CUDA_SUCCESS;
}
CUresult cuStreamSynchronize(CUstream s) {
  bool ok = false;
  Stream* st = stream_of(s, &ok);
  if (!ok) return CUDA_ERROR_INVALID_HANDLE;
  return st && st->capturing ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}
CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* out) {
  bool ok = false;
  Stream* st = stream_of(s, &ok);
  if (!ok) return CUDA_ERROR_INVALID_HANDLE;
  *out = st && st->capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
CUresult cuStreamGetCtx(CUstream, CUcontext* c) {
  *c = primary();
  return CUDA_SUCCESS;
}
CUresult cuStreamBeginCapture(CUstream s, CUstreamCaptureMode) {
  bool ok = false;
  Stream* st = stream_of(s, &ok);
  if (!ok || !st) return CUDA_ERROR_INVALID_VALUE;  // the legacy stream cannot be captured
  if (st->capturing.exchange(true)) return CUDA_ERROR_ILLEGAL_STATE;
  return CUDA_SUCCESS;
}
CUresult cuStreamEndCapture(CUstream s, CUgraph* g) {
  bool ok = false;
  Stream* st = stream_of(s, &ok);
  if (!ok || !st || !st->capturing.exchange(false)) return CUDA_ERROR_ILLEGAL_STATE;
  auto graph = std::make_unique<Graph>();
  std::lock_guard<std::mutex> lock(st->mu);
  for (const Node& n : st->captured) graph->nodes.push_back(std::make_unique<Node>(n));
  st->captured.clear();
  *g = reinterpret_cast<CUgraph>(graph.release());
  return CUDA_SUCCESS;
}
CUresult cuGraphInstantiateWithFlags(CUgraphExec* e, CUgraph g, unsigned long long) {
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  *e = reinterpret_cast<CUgraphExec>(new int(0));
  return CUDA_SUCCESS;
}
CUresult cuGraphLaunch(CUgraphExec e, CUstream) {
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  state().graph_launches.fetch_add(1);
  return CUDA_SUCCESS;
}
CUresult cuGraphDestroy(CUgraph g) {
  delete reinterpret_cast<Graph*>(g);
  return CUDA_SUCCESS;
}
CUresult cuGraphExecDestroy(CUgraphExec e) {
  delete reinterpret_cast<int*>(e);
  return CUDA_SUCCESS;
}
CUresult cuEventCreate(CUevent* e, unsigned) {
  *e = reinterpret_cast<CUevent>(new Event);
  return CUDA_SUCCESS;
}
bool event_ok(CUevent e) {
  return e && reinterpret_cast<Event*>(e)->magic == kMagicEvent;
}
CUresult cuEventRecord(CUevent e, CUstream) {
  return event_ok(e) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuEventSynchronize(CUevent e) {
  return event_ok(e) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
CUresult cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
  if (!event_ok(a) || !event_ok(b)) return CUDA_ERROR_INVALID_HANDLE;
  *ms = 0.01f;  // nothing ran: every span is as short as any other
  return CUDA_SUCCESS;
}
CUresult cuEventDestroy(CUevent e) {
  if (!event_ok(e)) return CUDA_ERROR_INVALID_HANDLE;
  reinterpret_cast<Event*>(e)->magic = 0;
  delete reinterpret_cast<Event*>(e);
  return CUDA_SUCCESS;
}
CUresult cuGraphGetNodes(CUgraph g, CUgraphNode* nodes, size_t* n) {
  if (!g || !n) return CUDA_ERROR_INVALID_VALUE;
  const Graph& graph = *reinterpret_cast<Graph*>(g);
  if (nodes)
    for (size_t i = 0; i < *n && i < graph.nodes.size(); ++i)
      nodes[i] = reinterpret_cast<CUgraphNode>(graph.nodes[i].get());
  *n = graph.nodes.size();
  return CUDA_SUCCESS;
}

// ---- looked up by name, outside the table ----

CUresult cuCtxGetExecAffinity(CUexecAffinityParam* p, CUexecAffinityType t) {
  if (t != CU_EXEC_AFFINITY_TYPE_SM_COUNT) return CUDA_ERROR_INVALID_VALUE;
  p->type = t;
  p->param.smCount.val = kSms;
  return CUDA_SUCCESS;
}
CUresult cuFuncGetParamInfo(CUfunction fn, size_t i, size_t* offset, size_t* size) {
  const KernelInfo& k = *fn_of(fn)->info;
  if (i >= k.param_sizes.size()) return CUDA_ERROR_INVALID_VALUE;
  *offset = k.param_offsets[i];
  *size = k.param_sizes[i];
  return CUDA_SUCCESS;
}
CUresult cuFuncGetName(const char** name, CUfunction fn) {
  *name = fn_of(fn)->name.c_str();
  return CUDA_SUCCESS;
}
CUresult cuGraphNodeGetType(CUgraphNode, CUgraphNodeType* t) {
  *t = CU_GRAPH_NODE_TYPE_KERNEL;  // a capture here holds kernel launches only
  return CUDA_SUCCESS;
}
CUresult cuGraphKernelNodeGetParams(CUgraphNode n, CUDA_KERNEL_NODE_PARAMS_v2* p) {
  *p = CUDA_KERNEL_NODE_PARAMS_v2{};
  p->func = reinterpret_cast<Node*>(n)->fn;
  return CUDA_SUCCESS;
}

struct Entry {
  void* fn;
  int version;  // the oldest CUDA version that has this ABI
};

const std::unordered_map<std::string, Entry>& entries() {
  static const auto* table = [] {
    auto* t = new std::unordered_map<std::string, Entry>;
    // Each function typed as kjit calls it: a signature that differs does not compile.
#define KJIT_FAKE_ENTRY(name, version) \
  (*t)[#name] = {reinterpret_cast<void*>(static_cast<PFN_##name##_v##version>(&name)), version};
    KJIT_DRIVER_FUNCTIONS(KJIT_FAKE_ENTRY)
    KJIT_FAKE_ENTRY(cuCtxGetExecAffinity, 11040)
    KJIT_FAKE_ENTRY(cuFuncGetParamInfo, 12040)
    KJIT_FAKE_ENTRY(cuGraphNodeGetType, 10000)
    KJIT_FAKE_ENTRY(cuGraphKernelNodeGetParams, 12000)
#undef KJIT_FAKE_ENTRY
    (*t)["cuFuncGetName"] = {reinterpret_cast<void*>(&cuFuncGetName), 12030};
    return t;
  }();
  return *table;
}

}  // namespace
}  // namespace kjit_fake

extern "C" {

// Like the real driver: an unknown name, or one newer than the version asked for, is
// CUDA_SUCCESS with a null pointer and SYMBOL_NOT_FOUND / VERSION_NOT_SUFFICIENT.
__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(
    const char* symbol, void** pfn, int version, cuuint64_t, CUdriverProcAddressQueryResult* st) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  const auto& t = kjit_fake::entries();
  auto it = t.find(symbol);
  *pfn = nullptr;
  CUdriverProcAddressQueryResult r = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (it != t.end())
    r = version >= it->second.version ? CU_GET_PROC_ADDRESS_SUCCESS
                                      : CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
  if (r == CU_GET_PROC_ADDRESS_SUCCESS) *pfn = it->second.fn;
  if (st) *st = r;
  return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) uint64_t kjit_fake_launches(void) {
  return kjit_fake::state().launches.load();
}
__attribute__((visibility("default"))) int kjit_fake_last_launch(kjit_fake_launch* out) {
  if (!kjit_fake::t_launched) return 0;
  *out = kjit_fake::t_last;
  return 1;
}
__attribute__((visibility("default"))) uint64_t kjit_fake_module_loads(void) {
  return kjit_fake::state().module_loads.load();
}
__attribute__((visibility("default"))) int64_t kjit_fake_live_allocations(void) {
  kjit_fake::State& s = kjit_fake::state();
  std::lock_guard<std::mutex> lock(s.mem_mu);
  return static_cast<int64_t>(s.allocations.size());
}
__attribute__((visibility("default"))) uint64_t kjit_fake_graph_launches(void) {
  return kjit_fake::state().graph_launches.load();
}
__attribute__((visibility("default"))) int64_t kjit_fake_live_modules(void) {
  return kjit_fake::state().live_modules.load();
}
__attribute__((visibility("default"))) int kjit_fake_fail(const char* entry, int n, CUresult r) {
  for (int p = 0; p < kjit_fake::kFaultPoints; ++p)
    if (std::strcmp(entry, kjit_fake::kFaultNames[p]) == 0) {
      kjit_fake::state().faults[p].with = r;
      kjit_fake::state().faults[p].left = n;
      return 1;
    }
  return 0;
}
}
