// KJIT_AUTOTUNE=1 turns autotuning on for every op (read once per process).
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

}  // namespace kjit::ops::detail
