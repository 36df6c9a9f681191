// Helpers shared by the suites: seeded random numbers (KJIT_TEST_SEED), temp folders, and the
// error-code assertion.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include "kjit/cache/disk_cache.hpp"

namespace kjit_test {

inline uint64_t seed() {
  static const uint64_t s = [] {
    const char* e = std::getenv("KJIT_TEST_SEED");
    uint64_t v = e ? std::strtoull(e, nullptr, 0) : std::random_device{}();
    std::printf("KJIT_TEST_SEED=%llu\n", static_cast<unsigned long long>(v));
    return v;
  }();
  return s;
}

inline std::mt19937_64& rng() {
  static std::mt19937_64 g(seed());
  return g;
}

inline int64_t uniform(int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng());
}

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/kjit-test-XXXXXX";
    char* p = mkdtemp(tmpl);
    path = p ? p : "/tmp/kjit-test-fallback";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// Cache options for a folder of the test's own (the rest as the defaults).
inline kjit::cache::Options cache_in(const std::string& dir) {
  kjit::cache::Options o;
  o.dir = dir;
  return o;
}

}  // namespace kjit_test

#define CHECK_KJIT_ERROR(expr, errc)                       \
  do {                                                     \
    bool thrown_ = false;                                  \
    try {                                                  \
      expr;                                                \
    } catch (const kjit::Error& e_) {                      \
      thrown_ = true;                                      \
      CHECK_MESSAGE(e_.code() == (errc), e_.what());       \
    }                                                      \
    CHECK_MESSAGE(thrown_, "expected kjit::Error " #errc); \
  } while (0)
