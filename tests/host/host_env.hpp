// The host suite's fake driver (loaded by main before kjit starts), its runtime (one, as an app
// holds one), and made-up device addresses: the fake runs no kernel, so an op's operands need no
// memory behind them.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "fake_cuda.h"
#include "kjit/kjit.hpp"

namespace kjit_host {

// The fake's window (fake_cuda.h), looked up in the library main loaded.
struct FakeDriver {
  decltype(&kjit_fake_launches) launches = nullptr;
  decltype(&kjit_fake_last_launch) last_launch = nullptr;
  decltype(&kjit_fake_module_loads) module_loads = nullptr;
  decltype(&kjit_fake_live_allocations) live_allocations = nullptr;
  decltype(&kjit_fake_graph_launches) graph_launches = nullptr;
  decltype(&kjit_fake_live_modules) live_modules = nullptr;
  decltype(&kjit_fake_fail) fail = nullptr;
};

// Loads the fake driver at `path` for the process (kjit's dlopen of libcuda.so.1 then finds it
// by its soname) and checks that kjit's runtime runs on it; false with *why otherwise.
bool load_fake_driver(const char* path, std::string* why);
const FakeDriver& fake();

kjit::Runtime& runtime();

// Operand i's address: 16-byte aligned, 2^36 bytes from the next (no tensor here overlaps).
inline void* operand(int i) {
  return reinterpret_cast<void*>((uintptr_t{1} << 44) + (uintptr_t(i) << 36));
}

inline uint64_t bits_of(const void* p) {
  return reinterpret_cast<uintptr_t>(p);
}

// The calling thread's last launch on the fake driver (one must have been made).
inline kjit_fake_launch last_launch() {
  kjit_fake_launch l{};
  if (!fake().last_launch(&l)) throw std::runtime_error("no launch was made on this thread");
  return l;
}

}  // namespace kjit_host
