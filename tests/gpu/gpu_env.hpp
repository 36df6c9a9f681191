// One runtime for the whole GPU suite, as an app would hold one.
#pragma once

#include "kjit/kjit.hpp"

namespace kjit_test {

inline kjit::Runtime& runtime() {
  static kjit::Runtime rt;
  return rt;
}

}  // namespace kjit_test
