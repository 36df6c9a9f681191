// The runtimes the Python package uses: one kjit::Runtime per CUDA device, made on first use
// and shared by every call on that device (in its primary context, the one PyTorch uses), and a
// compiler for work that needs no GPU.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>

#include "kjit/compiler.hpp"
#include "kjit/runtime.hpp"

namespace kjit::py {

namespace nb = nanobind;

constexpr int kMaxDevices = 64;

// The runtime of CUDA device `device` (DLPack's device id). After the first call for a device
// it is one atomic load. Throws NoDriver / NoDevice as kjit::Runtime does.
Runtime& runtime_for(int device);
// Held by an object that frees device memory of a runtime when it goes (a packed weight): while
// one lives, the exit-time teardown leaves the runtimes alive (the process's end reclaims them).
class RuntimeUser {
 public:
  RuntimeUser();
  ~RuntimeUser();
  RuntimeUser(const RuntimeUser&) = delete;
  RuntimeUser& operator=(const RuntimeUser&) = delete;
};
// The NVRTC compiler of kjit.compile (no GPU needed), made on first use.
Compiler& host_compiler();
// A stream handle from Python: an int (a cudaStream_t / CUstream address; 0 is the legacy
// default stream).
inline CUstream as_stream(uintptr_t s) {
  return reinterpret_cast<CUstream>(s);
}

// version(), gpu_available(), cache_stats().
void bind_runtimes(nb::module_& m);

}  // namespace kjit::py
