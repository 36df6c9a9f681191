// Host suite: kjit against the fake driver (tests/fake_driver/), loaded here before kjit looks
// for a driver. It never skips: with the real driver loaded instead, kernels would run, so that
// is a failure.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "host_env.hpp"

int main(int argc, char** argv) {
  std::string why;
  if (!kjit_host::load_fake_driver(KJIT_FAKE_DRIVER, &why)) {
    std::printf("FAILED: the host suite needs the fake driver: %s\n", why.c_str());
    return 1;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
