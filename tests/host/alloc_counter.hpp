// Counts the calling thread's heap allocations (every form of operator new) while one is alive:
// how the host suite shows that a planned call allocates nothing. Under AddressSanitizer, whose
// runtime owns operator new, nothing is replaced and counting() is false.
#pragma once

#include <cstdint>

namespace kjit_host {

class CountAllocations {
 public:
  CountAllocations();
  ~CountAllocations();
  CountAllocations(const CountAllocations&) = delete;
  CountAllocations& operator=(const CountAllocations&) = delete;
  uint64_t count() const;
  static bool counting();  // false where operator new is not replaced (ASan)
};

}  // namespace kjit_host
