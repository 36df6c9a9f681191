// kjit::Runtime: one device, its primary context, the compiler with its disk cache, and the
// in-memory table of loaded kernels. Share one Runtime between threads freely.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kjit/compiler.hpp"
#include "kjit/kernel.hpp"
#include "kjit/spec.hpp"

namespace kjit {

class Runtime;

namespace detail {
// A process-wide number per extension type (Runtime::extension), handed out on first use.
size_t new_extension_id();
template <class T>
size_t extension_id() {
  static const size_t id = new_extension_id();
  return id;
}
}  // namespace detail

struct DeviceProps {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  // SMs kjit's context may use: fewer than sm_count under an MPS execution-affinity limit
  // (cuCtxGetExecAffinity), which bounds a cooperative grid; else sm_count.
  int context_sm_count = 0;
  int max_threads_per_block = 0;
  int max_smem_per_block_optin = 0;  // bytes a block may use after opting in
  int max_smem_per_sm = 0;
  int l2_bytes = 0;
  bool cluster_launch = false;
  int driver_version = 0;  // e.g. 13000
  int cc() const { return cc_major * 10 + cc_minor; }
};

struct RuntimeOptions {
  int device = -1;  // -1: KJIT_DEVICE if set, else 0
  // The disk cache and, in cache.remote, the remote tier behind it (KJIT_REMOTE_CACHE: a URL
  // without a usable fleet key makes the constructor throw Error::invalid("remote_cache", ...)).
  cache::Options cache = cache::Options::from_env();
  // A recording of every specialization this runtime compiles or loads (kjit/record.hpp), for
  // kjit-precompile; "" records nothing. Starts from KJIT_RECORD. A path that cannot be recorded
  // to makes the constructor throw Error(Io) naming it and the reason.
  std::string record = record_from_env();
  static std::string record_from_env();  // KJIT_RECORD, or ""
};

struct RuntimeStats {
  uint64_t kernels_loaded = 0;  // modules loaded into this runtime's context
  CompilerStats compiler;       // NVRTC compiles and disk cache counters
};

class Runtime {
 public:
  // Throws Error(NoDriver / NoDevice) when there is no usable GPU.
  explicit Runtime(RuntimeOptions opts = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const DeviceProps& props() const;
  const std::string& arch() const;  // the NVRTC target for this device, e.g. "sm_90"
  CUcontext context() const;
  Compiler& compiler();
  TemplateSet& templates() { return compiler().templates(); }

  // Memory table -> disk cache -> NVRTC; then the module is loaded once per runtime.
  // When `capture_stream` is being captured into a graph and the kernel is not loaded yet,
  // throws Errc::CaptureCompile: prepare the kernel before capturing.
  Kernel kernel(const Spec& spec, CUstream capture_stream = nullptr);

  RuntimeStats stats() const;

  // Op support: this runtime's state of type T (an op's plan table, library handles, per-stream
  // workspaces; a built-in op's or a host app's own), made on first use as T(Runtime&) and
  // destroyed with the runtime, newest first, with its context current and its queued work
  // finished (a destructor may use extensions made before it; asking for a newer one then
  // throws). After the first call it is one atomic load for the first 256 extension types a
  // process uses (later ones take a lock): fine on an op's hot path.
  template <class T>
  T& extension() {
    const size_t id = detail::extension_id<T>();
    if (void* p = find_extension(id)) return *static_cast<T*>(p);
    return *static_cast<T*>(make_extension(
        id, [](Runtime& rt) -> std::shared_ptr<void> { return std::make_shared<T>(rt); }));
  }

 private:
  void* find_extension(size_t id) const noexcept;
  void* make_extension(size_t id, std::shared_ptr<void> (*make)(Runtime&));

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// True when a driver and at least one device are usable; otherwise false and *why says why.
bool gpu_available(std::string* why = nullptr);

}  // namespace kjit
