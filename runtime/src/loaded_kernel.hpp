// A module loaded into one runtime's context, and the function in it.
#pragma once

#include <cuda.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

namespace kjit::detail {

struct LoadedKernel {
  CUcontext ctx = nullptr;
  int sm_count = 0;  // SMs the context may use (DeviceProps::context_sm_count): bounds coop grids
  CUmodule module = nullptr;
  CUfunction fn = nullptr;
  std::string instantiation, lowered_name;
  int num_regs = 0, max_threads = 0;
  int static_smem = 0;
  // The byte size of each kernel parameter (read_param_sizes, once at load), which the typed
  // Kernel::operator() compares with its arguments. params_known is false on a driver older
  // than 12.4, which cannot say: the check is skipped there.
  std::vector<size_t> param_sizes;
  bool params_known = false;
  // Raised lazily by launch(). Launches read them lock-free (acquire); a raise takes limit_mu, so
  // two first launches with different sizes cannot leave the smaller limit set after the larger.
  mutable std::atomic<unsigned> smem_limit{0};  // read from the driver at load
  mutable std::atomic<bool> nonportable_cluster{false};
  mutable std::mutex limit_mu;
};

}  // namespace kjit::detail
