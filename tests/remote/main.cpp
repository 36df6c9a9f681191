// The remote tier's suite. Its "redis: " cases need Debian's redis-server (CI installs it); without
// one they are skipped with a message, the cases that need no server still run, and the suite
// exits 77, which ctest reports as skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "redis_server.hpp"

int main(int argc, char** argv) {
  doctest::Context context;
  const bool no_server = kjit_test::redis_server_binary().empty();
  if (no_server) {
    std::printf(
        "redis-server is not installed (apt-get install redis-server): the 'redis: ' "
        "cases are skipped\n");
    context.addFilter("test-case-exclude", "redis: *");
  }
  context.applyCommandLine(argc, argv);
  const int rc = context.run();
  // ctest shows exit code 77 as skipped (SKIP_RETURN_CODE): a run without the server's cases must
  // not pass as a full one. Failures of the cases that ran still fail it.
  if (no_server && rc == 0 && !context.shouldExit()) return 77;
  return rc;
}
