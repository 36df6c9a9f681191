// One runtime for the whole GPU suite (as an app would hold one), plus upload/download helpers.
#pragma once

#include <vector>

#include "kjit/kjit.hpp"

namespace kjit_test {

inline kjit::Runtime& runtime() {
  static kjit::Runtime rt;
  return rt;
}

template <class T>
kjit::DeviceBuffer to_device(const std::vector<T>& h) {
  kjit::DeviceBuffer b(runtime(), h.size() * sizeof(T));
  b.upload(h.data(), h.size() * sizeof(T));
  return b;
}

template <class T>
std::vector<T> to_host(const kjit::DeviceBuffer& b, size_t n) {
  std::vector<T> h(n);
  b.download(h.data(), n * sizeof(T));
  return h;
}

}  // namespace kjit_test
