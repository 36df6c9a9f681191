// Switches from the environment. Read once per process: KJIT_AUTOTUNE=1 turns autotuning on for
// every op; KJIT_PDL=0 turns programmatic dependent launch off (on by default on sm_90+; for
// measuring what it gains). Read when a plan is built: KJIT_GN_PIPE_GRID and KJIT_GN_PIPE_LAG
// set a pipelined GroupNorm plan's grid and lag (tests and experiments).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kjit/error.hpp"

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

// A positive integer from the environment, or 0 when `name` is unset; anything else is an
// InvalidArgument naming the variable. Read on every call (plan builds only, not the hot path).
inline int64_t env_positive(const char* name) {
  const char* e = std::getenv(name);
  if (!e || !*e) return 0;
  char* end = nullptr;
  const long long v = std::strtoll(e, &end, 10);
  if (*end != '\0' || v <= 0)
    throw Error(Errc::InvalidArgument,
                std::string(name) + "='" + e + "' must be a positive integer");
  return v;
}

// Programmatic launch for kernels compiled for `arch` ("sm_90", "compute_90", ...): only when the
// code was built for sm_90+, where kjit/pdl.cuh's wait is compiled in (below, it is empty).
inline bool use_pdl(const std::string& arch) {
  const size_t u = arch.find('_');
  return env_pdl() && u != std::string::npos && std::atoi(arch.c_str() + u + 1) >= 90;
}

}  // namespace kjit::ops::detail
