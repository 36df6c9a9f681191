// Process-wide switches from the environment, read once per process:
// KJIT_AUTOTUNE=1 turns autotuning on for every op; KJIT_PDL=0 turns programmatic dependent
// launch off (on by default on sm_90+; for measuring what it gains).
#pragma once

#include <cstdlib>
#include <cstring>

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

}  // namespace kjit::ops::detail
