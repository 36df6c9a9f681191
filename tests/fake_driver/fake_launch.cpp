// The fake driver's modules, functions and launches: a launch is checked as the driver checks it
// (context, shape, shared memory, clusters, cooperative grids, arguments), recorded for the
// calling thread, counted, and run nowhere.
#include <algorithm>
#include <cstring>
#include <optional>

#include "fake_entries.hpp"
#include "fake_state.hpp"

namespace kjit_fake {
namespace {

constexpr size_t kMaxImageBytes = size_t{1} << 30;

thread_local kjit_fake_launch t_last{};
thread_local bool t_launched = false;

// A kernel's cost per launch: 2-10 us, from its name, so that events time candidates apart.
uint64_t cost_of(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return 2000 + h % 8000;
}

// Registers one warp of f holds: its count per thread, allocated 8 at a time.
int regs_per_warp(const Function& f) {
  return (f.info->regs + 7) / 8 * 8 * 32;
}

// Warps of f one SM's registers hold. The register file is four banks of 16K, one per
// sub-partition, and a block's warps are spread over the four: each bank holds whole warps.
// (Measured on an H200 with a 104-register kernel: at most 512 threads per block, 16 one-warp
// blocks per SM, 5 of three warps; the CUDA toolkit's cuda_occupancy.h has the same rule.)
int warps_by_registers(const Function& f) {
  const int per_warp = regs_per_warp(f);
  return per_warp == 0 ? 64 : kRegsPerSm / 4 / per_warp * 4;
}

// The most threads one block of f may have: its __launch_bounds__, and what its registers allow.
int max_threads_of(const Function& f) {
  int n = std::min(kMaxThreads, warps_by_registers(f) * 32);
  if (f.info->max_threads) n = std::min(n, f.info->max_threads);
  return n;
}

// Blocks of `threads` threads and `smem` bytes of shared memory one SM holds at once. As the
// driver's occupancy query does, this ignores __launch_bounds__ (an H200 counts 8 blocks of 256
// threads per SM for a kernel bounded at 128); the launch is refused all the same.
int blocks_per_sm(const Function& f, int threads, size_t smem) {
  if (threads <= 0 || threads > kMaxThreads) return 0;
  const size_t total = smem + f.info->static_smem;
  if (total > kSmemOptin) return 0;
  const int warps = (threads + 31) / 32;
  const int n = std::min({kMaxBlocksPerSm, 64 / warps, warps_by_registers(f) / warps});
  return std::min<int>(n, static_cast<int>(kSmemPerSm / (total + kReservedSmemPerBlock)));
}

// A block's size against f: over its __launch_bounds__ is an invalid value, over what its
// registers allow is out of resources, as the driver answers them (both seen on an H200).
CUresult check_block(const Function& f, uint64_t threads) {
  if (f.info->max_threads && threads > uint64_t(f.info->max_threads))
    return CUDA_ERROR_INVALID_VALUE;
  if (threads > uint64_t(max_threads_of(f))) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  return CUDA_SUCCESS;
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

CUresult check_dims(const CUlaunchConfig& c) {
  if (!c.gridDimX || !c.gridDimY || !c.gridDimZ || !c.blockDimX || !c.blockDimY || !c.blockDimZ)
    return CUDA_ERROR_INVALID_VALUE;
  if (c.gridDimX > 0x7fffffffu || c.gridDimY > 65535 || c.gridDimZ > 65535)
    return CUDA_ERROR_INVALID_VALUE;
  if (c.blockDimX > 1024 || c.blockDimY > 1024 || c.blockDimZ > 64) return CUDA_ERROR_INVALID_VALUE;
  if (uint64_t{c.blockDimX} * c.blockDimY * c.blockDimZ > kMaxThreads)
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult check_launch(const CUlaunchConfig& c, const Function& f, const Shape& s) {
  if (current() != primary()) return CUDA_ERROR_INVALID_CONTEXT;
  if (const CUresult r = check_dims(c); r != CUDA_SUCCESS) return r;
  const uint64_t threads = uint64_t{c.blockDimX} * c.blockDimY * c.blockDimZ;
  if (const CUresult r = check_block(f, threads); r != CUDA_SUCCESS) return r;
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
  for (size_t i = 0; i < sizes.size(); ++i) {
    // Every byte of every argument, as the driver copies them: ASan sees a dangling one.
    unsigned char bytes[256];
    for (size_t at = 0; at < sizes[i]; at += sizeof(bytes))
      std::memcpy(bytes, static_cast<const unsigned char*>(params[i]) + at,
                  std::min(sizeof(bytes), sizes[i] - at));
    if (i >= KJIT_FAKE_MAX_PARAMS) continue;
    l.param_size[i] = sizes[i];
    l.param_bits[i] = 0;
    std::memcpy(&l.param_bits[i], params[i], std::min<size_t>(8, sizes[i]));
  }
  t_launched = true;
}

CUresult launch(const CUlaunchConfig* c, CUfunction fn, void** params, void** extra) {
  if (CUresult r; injected(kLaunch, &r)) return r;
  if (!c || !fn) return CUDA_ERROR_INVALID_VALUE;
  const Function& f = *fn_of(fn);
  const Shape s = shape_of(*c);
  if (const CUresult r = check_launch(*c, f, s); r != CUDA_SUCCESS) return r;
  if (extra || (!f.info->param_sizes.empty() && !params)) return CUDA_ERROR_INVALID_VALUE;
  Stream* stream = stream_of(c->hStream);
  if (!stream) return CUDA_ERROR_INVALID_HANDLE;
  record_launch(*c, f, s, params);
  capture_node(*stream, Node{CU_GRAPH_NODE_TYPE_KERNEL, fn, f.cost_ns});
  state().launches.fetch_add(1, std::memory_order_relaxed);
  return CUDA_SUCCESS;
}

}  // namespace

kjit_fake_launch& last_launch() {
  return t_last;
}
bool& launched() {
  return t_launched;
}

CUresult cuModuleLoadData(CUmodule* m, const void* image) {
  if (current() != primary()) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult r; injected(kModuleLoad, &r)) return r;
  std::string why;
  std::optional<CubinInfo> info = read_cubin(image, &why);
  if (!info || info->image_bytes > kMaxImageBytes) return CUDA_ERROR_INVALID_IMAGE;
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
  fn->cost_ns = cost_of(fn->name);
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
      *v = f.info->regs;
      break;
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *v = max_threads_of(f);
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
CUresult cuFuncGetParamInfo(CUfunction fn, size_t i, size_t* offset, size_t* size) {
  const KernelInfo& k = *fn_of(fn)->info;
  if (i >= k.param_sizes.size()) return CUDA_ERROR_INVALID_VALUE;
  *offset = k.param_offsets[i];
  *size = k.param_sizes[i];
  return CUDA_SUCCESS;
}
CUresult cuFuncGetParamCount(CUfunction fn, size_t* n) {
  *n = fn_of(fn)->info->param_sizes.size();
  return CUDA_SUCCESS;
}
CUresult cuFuncGetName(const char** name, CUfunction fn) {
  *name = fn_of(fn)->name.c_str();
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

}  // namespace kjit_fake
