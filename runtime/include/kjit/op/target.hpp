// Op support: what an op's kernels are configured and compiled for. An op's configs and the
// specializations they compile to are a function of (problem, Target, options) alone, so
// kjit-precompile on a machine without a GPU derives exactly what the op loads on the device
// the Target describes.
#pragma once

#include <cstdint>
#include <string>

namespace kjit {

class Runtime;

struct Target {
  // What a Target assumes when nothing says otherwise: an H100/H200 SXM (sm_90, 132 SMs).
  static constexpr int kDefaultSmCount = 132;

  std::string arch = "sm_90";  // the NVRTC target
  int cc = 90;                 // compute capability: 90 for sm_90, sm_90a and compute_90
  int sm_count = kDefaultSmCount;
  int64_t max_smem_per_block = 0;  // bytes a block may use after opting in; 0: the arch's limit

  // The runtime's device.
  static Target of(const Runtime& rt);
  // An arch as NVRTC names it ("sm_90", "sm_90a", "compute_86"); InvalidArgument otherwise.
  static Target for_arch(const std::string& arch, int sm_count = kDefaultSmCount);
  // A compute capability (e.g. 90): arch "sm_<cc>", not checked against NVRTC (configs are
  // computable for any cc; compiling for it is another matter).
  static Target for_cc(int cc, int sm_count = kDefaultSmCount);
};

}  // namespace kjit
