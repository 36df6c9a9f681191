#include "kjit/kernel.hpp"

#include <cstdint>

#include "cuda_driver.hpp"
#include "kjit/error.hpp"
#include "loaded_kernel.hpp"

namespace kjit {
namespace {

std::string describe(const detail::LoadedKernel& k, const LaunchConfig& c) {
  auto d3 = [](const Dim3& d) {
    return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
  };
  return k.instantiation + " grid " + d3(c.grid) + " block " + d3(c.block) + " cluster " +
         d3(c.cluster) + " shared " + std::to_string(c.shared_bytes) + " B" +
         (c.programmatic ? " programmatic" : "") + (c.cooperative ? " cooperative" : "");
}

[[noreturn]] void launch_failed(const detail::LoadedKernel& k, const LaunchConfig& c,
                                const char* what, CUresult r) {
  throw Error(Errc::Cuda, std::string(what) + " failed for " + describe(k, c) + ": " +
                              detail::cu_error_text(r));
}

// A zero dimension would launch nothing (grid, block) or silently no cluster (cluster); a grid
// that is not a whole number of clusters is refused by the driver less clearly.
void check_shape(const detail::LoadedKernel& k, const LaunchConfig& c) {
  auto zero = [](const Dim3& d) { return d.x == 0 || d.y == 0 || d.z == 0; };
  if (zero(c.grid) || zero(c.block) || zero(c.cluster))
    throw Error(Errc::InvalidArgument, "launch of " + describe(k, c) +
                                           ": grid, block and cluster dimensions must be >= 1 "
                                           "(a cluster of (1,1,1) is no cluster)");
  if (c.grid.x % c.cluster.x || c.grid.y % c.cluster.y || c.grid.z % c.cluster.z)
    throw Error(Errc::InvalidArgument,
                "launch of " + describe(k, c) + ": the grid must be a whole number of clusters");
  if (c.cooperative && c.cluster.x * c.cluster.y * c.cluster.z > 1)
    throw Error(Errc::InvalidArgument, "launch of " + describe(k, c) +
                                           ": kjit launches cooperative grids without clusters");
}

// Driver answers that mean "this device cannot run that shape", as opposed to a broken context.
bool refusal(CUresult r) {
  return r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_NOT_SUPPORTED ||
         r == CUDA_ERROR_INVALID_CLUSTER_SIZE;
}

bool needs_nonportable(const LaunchConfig& c) {
  return c.cluster.x * c.cluster.y * c.cluster.z > 8;
}

// Only ever raises, under the kernel's lock; the common case (nothing to raise) takes no lock.
// Returns the driver's refusal, with *what naming the step, or CUDA_SUCCESS.
CUresult try_raise_limits(const detail::LoadedKernel& k, const LaunchConfig& c,
                          const detail::Driver& d, const char** what) {
  const bool smem = c.shared_bytes > k.smem_limit.load(std::memory_order_acquire);
  const bool cluster =
      needs_nonportable(c) && !k.nonportable_cluster.load(std::memory_order_acquire);
  if (!smem && !cluster) return CUDA_SUCCESS;
  std::lock_guard<std::mutex> lock(k.limit_mu);
  if (c.shared_bytes > k.smem_limit.load(std::memory_order_relaxed)) {
    *what = "raising the dynamic shared memory limit";
    CUresult r = d.cuFuncSetAttribute_fn(k.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                         static_cast<int>(c.shared_bytes));
    if (r != CUDA_SUCCESS) return r;
    k.smem_limit.store(c.shared_bytes, std::memory_order_release);
  }
  if (needs_nonportable(c) && !k.nonportable_cluster.load(std::memory_order_relaxed)) {
    *what = "allowing a non-portable cluster size";
    CUresult r =
        d.cuFuncSetAttribute_fn(k.fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
    if (r != CUDA_SUCCESS) return r;
    k.nonportable_cluster.store(true, std::memory_order_release);
  }
  return CUDA_SUCCESS;
}

void raise_limits(const detail::LoadedKernel& k, const LaunchConfig& c, const detail::Driver& d) {
  const char* what = "";
  const CUresult r = try_raise_limits(k, c, d, &what);
  if (r != CUDA_SUCCESS) launch_failed(k, c, what, r);
}

// The driver's form of c on `stream`; attrs (room for 3) holds its attributes.
CUlaunchConfig driver_config(const LaunchConfig& c, CUstream stream, CUlaunchAttribute* attr) {
  CUlaunchConfig cfg{};
  cfg.gridDimX = c.grid.x;
  cfg.gridDimY = c.grid.y;
  cfg.gridDimZ = c.grid.z;
  cfg.blockDimX = c.block.x;
  cfg.blockDimY = c.block.y;
  cfg.blockDimZ = c.block.z;
  cfg.sharedMemBytes = c.shared_bytes;
  cfg.hStream = stream;
  if (c.cluster.x * c.cluster.y * c.cluster.z > 1) {
    attr[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr[0].value.clusterDim.x = c.cluster.x;
    attr[0].value.clusterDim.y = c.cluster.y;
    attr[0].value.clusterDim.z = c.cluster.z;
    cfg.numAttrs = 1;
  }
  if (c.programmatic) {
    attr[cfg.numAttrs].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr[cfg.numAttrs].value.programmaticStreamSerializationAllowed = 1;
    ++cfg.numAttrs;
  }
  if (c.cooperative) {
    attr[cfg.numAttrs].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attr[cfg.numAttrs].value.cooperative = 1;
    ++cfg.numAttrs;
  }
  if (cfg.numAttrs > 0) cfg.attrs = attr;
  return cfg;
}

}  // namespace

void Kernel::launch(CUstream stream, const LaunchConfig& c, void** params) const {
  if (!k_) throw Error(Errc::InvalidArgument, "launch of an empty kjit::Kernel");
  check_shape(*k_, c);
  const detail::Driver& d = detail::driver();
  detail::ContextGuard guard(k_->ctx);
  raise_limits(*k_, c, d);
  CUlaunchAttribute attr[3];
  const CUlaunchConfig cfg = driver_config(c, stream, attr);
  CUresult r = d.cuLaunchKernelEx_fn(&cfg, k_->fn, params, nullptr);
  if (r == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE)
    throw Error(Errc::Unsupported,
                "cuLaunchKernelEx refused " + describe(*k_, c) +
                    ": a cooperative grid must fit the SMs this context may use all at once (kjit "
                    "counted " +
                    std::to_string(k_->sm_count) +
                    "; an MPS limit it cannot see may allow fewer): " + detail::cu_error_text(r));
  if (r == CUDA_ERROR_NOT_SUPPORTED && c.cooperative)  // a device without cooperative launches
    throw Error(Errc::Unsupported, "cuLaunchKernelEx refused the cooperative launch of " +
                                       describe(*k_, c) + ": " + detail::cu_error_text(r));
  if (r != CUDA_SUCCESS) launch_failed(*k_, c, "cuLaunchKernelEx", r);
}

namespace {

// CTAs (with clusters: clusters) of c one SM (the device) holds at once; 0 when the driver
// refuses c's shape or limits.
int active_units(const detail::LoadedKernel& k, const LaunchConfig& c) {
  check_shape(k, c);
  // The driver refuses a block past the kernel's own limit (its __launch_bounds__, or what its
  // registers allow), but its occupancy query ignores launch bounds: an H200 counts 8 blocks of
  // 256 threads per SM for a kernel bounded at 128. The kernel's limit decides first.
  if (uint64_t{c.block.x} * c.block.y * c.block.z > static_cast<uint64_t>(k.max_threads)) return 0;
  const detail::Driver& d = detail::driver();
  detail::ContextGuard guard(k.ctx);
  const char* what = "";
  CUresult r = try_raise_limits(k, c, d, &what);
  // A refusal, e.g. more dynamic shared memory than the device gives one block, is a "no"; any
  // other error (a lost context, a sticky fault from earlier work) is not about this shape.
  if (refusal(r)) return 0;
  if (r != CUDA_SUCCESS) launch_failed(k, c, what, r);
  int n = 0;
  if (c.cluster.x * c.cluster.y * c.cluster.z <= 1) {
    const unsigned threads = c.block.x * c.block.y * c.block.z;
    what = "cuOccupancyMaxActiveBlocksPerMultiprocessor";
    r = d.cuOccupancyMaxActiveBlocksPerMultiprocessor_fn(&n, k.fn, static_cast<int>(threads),
                                                         c.shared_bytes);
  } else {
    LaunchConfig shape = c;
    shape.programmatic = false;  // the occupancy query needs the cluster shape only
    CUlaunchAttribute attr[3];
    const CUlaunchConfig cfg = driver_config(shape, nullptr, attr);
    what = "cuOccupancyMaxActiveClusters";
    r = d.cuOccupancyMaxActiveClusters_fn(&n, k.fn, &cfg);
  }
  if (refusal(r)) return 0;
  if (r != CUDA_SUCCESS) launch_failed(k, c, what, r);
  return n;
}

}  // namespace

bool Kernel::fits(const LaunchConfig& c) const {
  if (!k_) throw Error(Errc::InvalidArgument, "fits() of an empty kjit::Kernel");
  const int n = active_units(*k_, c);
  if (!c.cooperative) return n > 0;
  // The whole grid at once: n CTAs on every SM of the context's device.
  return uint64_t{c.grid.x} * c.grid.y * c.grid.z <=
         static_cast<uint64_t>(n) * static_cast<unsigned>(k_->sm_count);
}

int64_t Kernel::resident_ctas(const LaunchConfig& c) const {
  if (!k_) throw Error(Errc::InvalidArgument, "resident_ctas() of an empty kjit::Kernel");
  if (c.cluster.x * c.cluster.y * c.cluster.z > 1)
    throw Error(Errc::InvalidArgument, "resident_ctas() counts CTAs without clusters");
  return int64_t{active_units(*k_, c)} * k_->sm_count;
}

CUfunction Kernel::function() const {
  return k_ ? k_->fn : nullptr;
}

void Kernel::check_args(const size_t* sizes, size_t count) const {
  if (!k_) throw Error(Errc::InvalidArgument, "launch of an empty kjit::Kernel");
  if (!k_->params_known) return;
  const std::vector<size_t>& want = k_->param_sizes;
  if (count != want.size())
    throw Error::invalid("args", "kernel " + k_->instantiation + " takes " +
                                     std::to_string(want.size()) + " parameters, launched with " +
                                     std::to_string(count) + " arguments");
  for (size_t i = 0; i < count; ++i)
    if (sizes[i] != want[i])
      throw Error::invalid("args", "kernel " + k_->instantiation + ": parameter " +
                                       std::to_string(i) + " is " + std::to_string(want[i]) +
                                       " bytes, argument " + std::to_string(i) + " is " +
                                       std::to_string(sizes[i]) + " bytes");
}

int Kernel::num_params() const {
  return k_ && k_->params_known ? static_cast<int>(k_->param_sizes.size()) : -1;
}

const std::string& Kernel::instantiation() const {
  static const std::string empty;
  return k_ ? k_->instantiation : empty;
}

const std::string& Kernel::lowered_name() const {
  static const std::string empty;
  return k_ ? k_->lowered_name : empty;
}

int Kernel::num_registers() const {
  return k_ ? k_->num_regs : 0;
}
int Kernel::max_threads_per_block() const {
  return k_ ? k_->max_threads : 0;
}

}  // namespace kjit
