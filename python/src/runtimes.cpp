#include "runtimes.hpp"

#include <nanobind/stl/string.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "kjit/error.hpp"
#include "kjit/version.hpp"

namespace kjit::py {

namespace {

// Objects of the package that hold device memory of a runtime (packed weights): counted, so that
// the runtimes outlive them even when one is freed after the exit-time teardown below.
std::atomic<long> g_runtime_users{0};

struct Registry {
  std::mutex mu;  // held only while a runtime is made
  std::unique_ptr<Runtime> owned[kMaxDevices];
  std::atomic<Runtime*> ready[kMaxDevices] = {};
  std::unique_ptr<Compiler> compiler;
  ~Registry() {
    if (g_runtime_users.load() == 0) return;
    for (auto& o : owned) (void)o.release();  // left to the process's end: a user still frees
  }
};

// Destroyed at exit like the C ABI's runtime: each Runtime waits for its queued work, then frees
// its workspaces and unloads its kernels (unless a RuntimeUser still lives).
Registry& registry() {
  static Registry r;
  return r;
}

nb::dict disk_stats(const cache::Stats& s) {
  nb::dict d;
  d["hits"] = s.hits;
  d["misses"] = s.misses;
  d["compiles"] = s.compiles;
  d["corrupt"] = s.corrupt;
  d["read_errors"] = s.read_errors;
  d["write_errors"] = s.write_errors;
  d["evictions"] = s.evictions;
  d["oversized"] = s.oversized;
  d["untrusted"] = s.untrusted;
  d["bytes_read"] = s.bytes_read;
  d["bytes_written"] = s.bytes_written;
  return d;
}

nb::dict compiler_stats(const CompilerStats& s) {
  nb::dict d;
  d["nvrtc_compiles"] = s.nvrtc_compiles;
  d["nvrtc_ms"] = s.nvrtc_ms;
  d["disk"] = disk_stats(s.disk);
  return d;
}

// Every runtime made so far, by device ("cuda:0": {...}), and the host compiler's ("host").
nb::dict cache_stats() {
  Registry& r = registry();
  nb::dict out;
  for (int i = 0; i < kMaxDevices; ++i)
    if (Runtime* rt = r.ready[i].load(std::memory_order_acquire)) {
      const RuntimeStats s = rt->stats();
      nb::dict d = compiler_stats(s.compiler);
      d["kernels_loaded"] = s.kernels_loaded;
      out[("cuda:" + std::to_string(i)).c_str()] = d;
    }
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.compiler) out["host"] = compiler_stats(r.compiler->stats());
  return out;
}

nb::tuple gpu_status() {
  std::string why;
  const bool ok = gpu_available(&why);
  return nb::make_tuple(ok, why);
}

}  // namespace

Runtime& runtime_for(int device) {
  if (device < 0 || device >= kMaxDevices)
    throw Error(Errc::NoDevice, "kjit: CUDA device " + std::to_string(device) +
                                    " is out of range (kjit serves devices 0.." +
                                    std::to_string(kMaxDevices - 1) + ")");
  Registry& r = registry();
  if (Runtime* rt = r.ready[device].load(std::memory_order_acquire)) return *rt;
  // The first call on a device makes its runtime (driver and context set-up): without the GIL,
  // so that other Python threads run meanwhile.
  nb::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.owned[device]) {
    RuntimeOptions opts;
    opts.device = device;
    r.owned[device] = std::make_unique<Runtime>(opts);
    r.ready[device].store(r.owned[device].get(), std::memory_order_release);
  }
  return *r.owned[device];
}

RuntimeUser::RuntimeUser() {
  g_runtime_users.fetch_add(1);
}
RuntimeUser::~RuntimeUser() {
  g_runtime_users.fetch_sub(1);
}

Compiler& host_compiler() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.compiler) r.compiler = std::make_unique<Compiler>();
  return *r.compiler;
}

void bind_runtimes(nb::module_& m) {
  m.def("version", [] { return std::string(KJIT_VERSION_STRING); });
  m.def("gpu_status", &gpu_status,
        "(available, why): whether a CUDA driver and a device are usable, and why not");
  m.def("cache_stats", &cache_stats);
  m.def("nvrtc_version", [] { return Compiler::nvrtc_version(); });
}

}  // namespace kjit::py
