// GPU suite: without a driver or device, report the suite skipped (exit 77, which ctest shows as
// "Skipped") instead of failing or silently passing.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "kjit/runtime.hpp"

int main(int argc, char** argv) {
  std::string why;
  if (!kjit::gpu_available(&why)) {
    std::printf("SKIPPED: GPU tests need a CUDA device: %s\n", why.c_str());
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
