// A fake CUDA driver (libcuda.so.1) for the host suite (tests/host/): one sm_90 device with an
// H200's limits, whose launches check what the real driver checks (context, shape, shared memory,
// clusters, cooperative grids, the kernel's parameters) and then run nothing. It lets CI, which
// has no GPU, run kjit's whole host path: compiling with NVRTC, loading the cubins, plans, graph
// captures and launches. Memory is host memory, so copies and memsets really happen.
//
// This header is the tests' window into it: what was launched, and counters.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

extern "C" {

enum { KJIT_FAKE_MAX_PARAMS = 32 };

struct kjit_fake_launch {
  char kernel[256];  // the function's name as cuModuleGetFunction was given it
  unsigned grid[3], block[3], cluster[3];
  unsigned shared_bytes;
  int programmatic, cooperative;
  CUstream stream;
  size_t params;                              // the kernel's parameter count
  size_t param_size[KJIT_FAKE_MAX_PARAMS];    // bytes of each (the first KJIT_FAKE_MAX_PARAMS)
  uint64_t param_bits[KJIT_FAKE_MAX_PARAMS];  // the first 8 bytes of each argument's value
};

// Launches that reached a stream (graph launches not counted; captured ones are), process-wide.
uint64_t kjit_fake_launches(void);
// The calling thread's last launch; 0 when it has made none.
int kjit_fake_last_launch(struct kjit_fake_launch* out);
// Calls to cuModuleLoadData, modules loaded and not unloaded, cuMemAlloc blocks alive now, and
// graph launches.
uint64_t kjit_fake_module_loads(void);
int64_t kjit_fake_live_modules(void);
int64_t kjit_fake_live_allocations(void);
uint64_t kjit_fake_graph_launches(void);
// The next `n` calls of `entry` fail with `r` (n = 0 clears it); entry is one of
// cuLaunchKernelEx (cuLaunchKernel too), cuModuleLoadData, cuFuncGetAttribute and cuMemAlloc.
// Returns 0 for any other name.
int kjit_fake_fail(const char* entry, int n, CUresult r);
}
