#pragma once

#include <cuda.h>

#include <nlohmann/json.hpp>

#include "kjit/cuda.hpp"
#include "kjit/runtime.hpp"

namespace kjit_bench {

nlohmann::json run_jit(kjit::Runtime& rt, CUstream stream);

// A bare cuLaunchKernel of a small kernel (4 CTAs over 1024 floats): what the driver alone costs
// the host per launch on this machine, the yardstick for every op's host time in the same run.
struct BareLaunch {
  static constexpr int kN = 1024;
  kjit::Runtime& rt;
  kjit::Kernel kernel;
  kjit::DeviceBuffer x, y;
  CUdeviceptr xp, yp;
  int n = kN;
  void* params[3] = {&xp, &yp, &n};
  explicit BareLaunch(kjit::Runtime& r);
  BareLaunch(const BareLaunch&) = delete;
  BareLaunch& operator=(const BareLaunch&) = delete;
  double host_us(CUstream stream);  // median of 41 batches of 256 launches
};

}  // namespace kjit_bench
