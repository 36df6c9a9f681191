// The remote tier's suite. Its "redis: " cases need Debian's redis-server (CI installs it); without
// one they are skipped with a message, and the cases that need no server still run.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "redis_server.hpp"

int main(int argc, char** argv) {
  doctest::Context context;
  if (kjit_test::redis_server_binary().empty()) {
    std::printf(
        "redis-server is not installed (apt-get install redis-server): the 'redis: ' "
        "cases are skipped\n");
    context.addFilter("test-case-exclude", "redis: *");
  }
  context.applyCommandLine(argc, argv);
  return context.run();
}
