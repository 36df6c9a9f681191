// NVRTC specialization compiler with the disk cache in front. Needs no GPU and no driver:
// kjit-precompile and CPU-only CI use it directly; Runtime uses it for the device's arch.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kjit/cache/disk_cache.hpp"
#include "kjit/spec.hpp"
#include "kjit/templates.hpp"

namespace kjit {

class Recorder;

struct CompiledKernel {
  std::string instantiation;  // the name expression
  std::string lowered_name;   // the mangled symbol to look up in the module
  std::string arch;           // "sm_90", "sm_90a", or "compute_XX" for PTX
  bool is_ptx = false;        // true only when the device is newer than NVRTC knows
  std::string binary;         // cubin (or PTX text)
  std::string log;            // NVRTC's log (warnings)
  double compile_ms = 0;      // NVRTC time when it was compiled (as stored in the cache)
  bool from_disk = false;     // served by the disk cache in this call
};

struct CompilerStats {
  uint64_t nvrtc_compiles = 0;  // NVRTC runs in this process through this compiler
  double nvrtc_ms = 0;          // their total time
  cache::Stats disk;
  bool remote_enabled = false;  // a remote tier is configured (cache::Options::remote)
  cache::RemoteStats remote;    // its counters (docs/API.md, "Remote cache")
};

class Compiler {
 public:
  // Throws Error::invalid("remote_cache", ...) when cache_options.remote asks for a remote tier
  // that cannot be used as configured (a malformed URL, no fleet key, a bad key file).
  explicit Compiler(cache::Options cache_options = cache::Options::from_env());
  ~Compiler();

  TemplateSet& templates() { return templates_; }

  // Disk cache -> remote tier (when configured) -> NVRTC. `arch`: "sm_80", "sm_90", "sm_90a", ...
  // (throws Unsupported when NVRTC does not know it), or "compute_XX" for PTX. Compile errors throw
  // Errc::Compile with the log.
  CompiledKernel get(const Spec& spec, const std::string& arch);
  // NVRTC only, no cache (tests, benchmarks of compile time).
  CompiledKernel compile(const Spec& spec, const std::string& arch);

  CompilerStats stats() const;
  cache::DiskCache& disk_cache() { return *disk_; }

  // Records every specialization get() returns to `r` (kjit/record.hpp), except those an op's
  // recorded plan build loads (Recorder::in_op_build). Set it before the compiler is shared
  // between threads; a Runtime sets it from RuntimeOptions::record. nullptr: no recording.
  void set_recorder(std::shared_ptr<Recorder> r) { recorder_ = std::move(r); }
  Recorder* recorder() const { return recorder_.get(); }

  // The cache key of a specialization (exposed for tools and tests).
  cache::Key key(const Spec& spec, const std::string& arch);

  // The fixed NVRTC option set (arch option excluded), part of every key.
  static const std::vector<std::string>& options();
  static std::string nvrtc_version();  // "13.0"
  // The loaded NVRTC library's file name and size (e.g. "libnvrtc.so.13 109338064"; "static"
  // when NVRTC is linked into the executable): part of every key, so a patch release of the same
  // major.minor does not reuse the old build's cubins.
  static const std::string& nvrtc_build();
  static std::vector<int> supported_sm();  // e.g. {75, 80, 86, 89, 90, 100, 103, 120, ...}
  // The target for a device of compute capability cc (e.g. 90): "sm_90" if NVRTC knows it, else
  // "compute_<newest>" (PTX, JIT-compiled by the driver).
  static std::string arch_for_cc(int cc);
  // The SM number of an arch name ("sm_90", "sm_90a", "sm_100f", "compute_90", ...): throws
  // InvalidArgument for another form, Unsupported for an arch or variant this NVRTC cannot
  // target (sm_80a: the 'a' variants start at sm_90, the 'f' ones at sm_100).
  static int arch_sm(const std::string& arch);

 private:
  using Closure = std::vector<std::pair<std::string, std::string>>;
  // key() and compile() of one read of the template closure: get() passes the same copy to both,
  // so a template replaced meanwhile cannot land under the old source's key.
  cache::Key key_of(const Spec& spec, const std::string& arch, const Closure& headers) const;
  CompiledKernel compile_with(const Spec& spec, const std::string& arch, const Closure& headers);

  TemplateSet templates_;
  std::unique_ptr<cache::DiskCache> disk_;
  std::shared_ptr<Recorder> recorder_;
  std::atomic<uint64_t> compiles_{0};
  std::atomic<uint64_t> compile_us_{0};
};

}  // namespace kjit
