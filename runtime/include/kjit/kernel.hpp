// A loaded, specialized kernel and how to launch it (cuLaunchKernelEx on the caller's stream).
#pragma once

#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace kjit {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

struct LaunchConfig {
  Dim3 grid, block;
  // Dynamic shared memory; above the driver's default (48 KB less the kernel's static shared
  // memory) the function's limit is raised for you.
  unsigned shared_bytes = 0;
  Dim3 cluster;  // thread-block cluster (sm_90+); {1,1,1} = none
  // Programmatic dependent launch (sm_90+): the kernel may begin while the stream's previous
  // kernel finishes. Only for kernels that execute griddepcontrol.wait (kjit/pdl.cuh) before
  // touching memory earlier work uses.
  bool programmatic = false;
  // Cooperative launch: every CTA of the grid is resident at once, so CTAs may wait for each
  // other (kjit/group_barrier.cuh). The driver refuses a grid the device cannot hold; no clusters.
  bool cooperative = false;
};

namespace detail {
struct LoadedKernel;
}

class Kernel {
 public:
  Kernel() = default;
  explicit Kernel(const detail::LoadedKernel* k) : k_(k) {}

  // params: one pointer per kernel parameter, as for cuLaunchKernel (unchecked: prefer the typed
  // operator() below). Throws Error(Cuda) naming
  // the kernel and the configuration when the driver refuses the launch, InvalidArgument for a
  // zero dimension, a grid that is not a whole number of clusters, or a cooperative cluster;
  // Error(Unsupported) for a cooperative grid larger than the context may hold at once (fits()
  // counts the device's SMs; under MPS limits the driver may allow fewer), or a cooperative
  // launch on a device without them. Capturable in graphs.
  void launch(CUstream stream, const LaunchConfig& cfg, void** params) const;

  // Whether the device can run at least one CTA (with clusters: one cluster) of cfg at a time;
  // for a cooperative cfg, the whole grid at once. A block over max_threads_per_block() (the
  // kernel's __launch_bounds__, or what its registers allow) never fits.
  // Raises the function's limits cfg needs, as launch() would; false when the driver refuses
  // them (e.g. more shared memory than a block may have) or calls the shape invalid. Other
  // driver errors throw Error(Cuda); bad dimensions throw InvalidArgument, as for launch().
  bool fits(const LaunchConfig& cfg) const;
  // CTAs of cfg (no cluster) the SMs this context may use hold at once: what a persistent grid
  // launches. 0 when the device cannot run cfg at all. Raises limits and throws as fits() does.
  int64_t resident_ctas(const LaunchConfig& cfg) const;

  // The typed launch: one argument per kernel parameter, each of the parameter's byte size (a
  // pointer for a pointer, int for int, a struct of the same layout). Checked against the
  // kernel's parameters (read from the driver once, when the kernel was loaded; drivers older
  // than 12.4 cannot say, and then nothing is checked): a wrong count or size is an
  // InvalidArgument naming the kernel, the parameter and both sizes, before anything is
  // launched. Otherwise as launch(). Comparing a few sizes is all it adds to a launch.
  template <class... Args>
  void operator()(CUstream stream, const LaunchConfig& cfg, const Args&... args) const {
    static constexpr size_t kSizes[sizeof...(Args) + 1] = {sizeof(Args)..., 0};
    check_args(kSizes, sizeof...(Args));
    std::array<void*, sizeof...(Args)> p{{const_cast<void*>(static_cast<const void*>(&args))...}};
    launch(stream, cfg, p.data());
  }
  // The check operator() makes: `count` arguments of sizes[0..count).
  void check_args(const size_t* sizes, size_t count) const;
  // The kernel's parameter count, or -1 when the driver cannot say (older than 12.4).
  int num_params() const;

  bool valid() const { return k_ != nullptr; }
  CUfunction function() const;
  const std::string& instantiation() const;
  const std::string& lowered_name() const;
  int num_registers() const;
  int max_threads_per_block() const;

 private:
  const detail::LoadedKernel* k_ = nullptr;
};

}  // namespace kjit
