// What a call raised, for tests that check a kjit::Error's message as well as its code.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "kjit/error.hpp"

namespace kjit_test {

// The message of the kjit::Error fn raises, checked to carry `code`; "" when fn raised none.
template <class Fn>
std::string error_text(Fn fn, kjit::Errc code) {
  try {
    fn();
  } catch (const kjit::Error& e) {
    CHECK(e.code() == code);
    return e.what();
  }
  return "";
}

}  // namespace kjit_test
