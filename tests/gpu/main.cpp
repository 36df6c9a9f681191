// GPU suite: without a driver or device, report the suite skipped (exit 77, which ctest shows as
// "Skipped") instead of failing or silently passing.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kjit/error.hpp"
#include "kjit/runtime.hpp"

int main(int argc, char** argv) {
  std::string why;
  if (!kjit::gpu_available(&why)) {
    std::printf("SKIPPED: GPU tests need a CUDA device: %s\n", why.c_str());
    return 77;
  }
  // ctest's gpu_host_logic runs this suite's host-logic cases on the fake driver
  // (tests/fake_driver/), found first through LD_LIBRARY_PATH: if another driver loaded, fail.
  const char* fake = std::getenv("KJIT_TEST_EXPECT_FAKE_DRIVER");
  if (fake && std::strcmp(fake, "1") == 0) {
    std::string name;
    try {
      name = kjit::Runtime().props().name;
    } catch (const kjit::Error& e) {
      name = std::string("none that starts (") + e.what() + ")";
    }
    if (name.find("kjit fake driver") == std::string::npos) {
      std::printf("FAILED: KJIT_TEST_EXPECT_FAKE_DRIVER=1, but the device is %s\n", name.c_str());
      return 1;
    }
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
