// Process-wide switches from the environment, read once per process:
// KJIT_AUTOTUNE=1 turns autotuning on for every op; KJIT_PDL=0 turns programmatic dependent
// launch off (on by default on sm_90+; for measuring what it gains).
#pragma once

#include <cstdlib>
#include <cstring>
#include <string>

namespace kjit::ops::detail {

inline bool env_autotune() {
  static const bool on = [] {
    const char* e = std::getenv("KJIT_AUTOTUNE");
    return e && std::strcmp(e, "1") == 0;
  }();
  return on;
}

inline bool env_pdl() {
  static const bool on = [] {
    const char* e = std::getenv("KJIT_PDL");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

// Programmatic launch for kernels compiled for `arch` ("sm_90", "compute_90", ...): only when the
// code was built for sm_90+, where kjit/pdl.cuh's wait is compiled in (below, it is empty).
inline bool use_pdl(const std::string& arch) {
  const size_t u = arch.find('_');
  return env_pdl() && u != std::string::npos && std::atoi(arch.c_str() + u + 1) >= 90;
}

}  // namespace kjit::ops::detail
