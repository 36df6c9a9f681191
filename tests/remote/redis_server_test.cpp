// The suite's own redis-server harness (redis_server.hpp): a suite that dies without running its
// destructors must not leave its server running on the port.
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "cache/test_util.hpp"
#include "redis_server.hpp"

namespace {

// Whether anything accepts a connection on the loopback port.
bool listening(int port) {
  timeval tv{1, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
  const bool up = c && c->err == 0;
  if (c) redisFree(c);
  return up;
}

}  // namespace

TEST_CASE("redis: a suite that dies without its destructors takes its redis-server with it") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const int rc = kjit_test::in_child([&] {
    // Leaked on purpose: the child ends as a crash would, without the server's destructor.
    auto* server = new kjit_test::RedisServer();
    const int port = server->port();
    return ::write(fds[1], &port, sizeof port) == sizeof port ? 0 : 1;
  });
  ::close(fds[1]);
  int port = 0;
  const bool got = ::read(fds[0], &port, sizeof port) == sizeof port;
  ::close(fds[0]);
  REQUIRE(rc == 0);
  REQUIRE(got);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (listening(port) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const bool orphaned = listening(port);
  if (orphaned) kjit_test::RedisServer::shutdown(port);  // this test's leftover, not left behind
  CHECK_FALSE(orphaned);
}
