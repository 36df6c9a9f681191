// The tools against a real redis-server: kjit-precompile --remote fills the fleet's cache,
// kjit-cache pull brings it to an empty disk, push sends a disk cache up, stats shows the server.
// Built only with the tools (KJIT_BUILD_TOOLS, which defines KJIT_TOOLS_DIR for this suite).
#ifdef KJIT_TOOLS_DIR
#include <doctest/doctest.h>

#include <string>

#include "cache/test_util.hpp"
#include "redis_server.hpp"
#include "tools/tool_runner.hpp"

namespace {

const std::string kFleetKey = "fleet-key-of-the-tools-test-0123456789abcdef";
const std::string kProblem = "-p 'group_norm f32 nchw 2x64x16x16 g=8 silu'";

// The tools read the tier from the environment, as a deployment sets it.
std::string env_for(const kjit_test::RedisServer& server) {
  return "KJIT_REMOTE_CACHE=" + server.url() + " KJIT_REMOTE_CACHE_KEY=" + kFleetKey + " ";
}

kjit_test::ToolResult tool(const std::string& env, const std::string& name, const std::string& args,
                           const std::string& scratch) {
  return kjit_test::run_tool(name, args, scratch, env);
}

}  // namespace

TEST_CASE("redis: kjit-precompile --remote, then kjit-cache pull, push and stats") {
  kjit_test::RedisServer server;
  kjit_test::TempDir scratch, a, b, c;
  const std::string env = env_for(server);

  const auto no_tier =
      tool("", "kjit-precompile", kProblem + " -a sm_90 --remote --cache-dir " + a.path(),
           scratch.path());
  CHECK(no_tier.rc == 2);
  CHECK(no_tier.err.find("no remote tier") != std::string::npos);

  const auto pre =
      tool(env, "kjit-precompile", kProblem + " -a sm_90 --remote --json --cache-dir " + a.path(),
           scratch.path());
  REQUIRE_MESSAGE(pre.rc == 0, pre.err);
  const auto j = pre.json();
  CHECK(j["compiled"] == 1);
  CHECK(j["failed"] == 0);
  CHECK(j["remote"] == "redis://127.0.0.1:" + std::to_string(server.port()) + "/0");

  const auto pull = tool(env, "kjit-cache", "pull --cache-dir " + b.path(), scratch.path());
  REQUIRE_MESSAGE(pull.rc == 0, pull.err);
  CHECK(pull.out.find("pulled 1 entries") != std::string::npos);
  // b now has it: precompiling the same problem there compiles nothing, with no server at all.
  const auto again = tool("", "kjit-precompile",
                          kProblem + " -a sm_90 --json --cache-dir " + b.path(), scratch.path());
  REQUIRE(again.rc == 0);
  CHECK(again.json()["compiled"] == 0);
  CHECK(again.json()["cached"] == 1);

  server.command({"FLUSHALL"});
  const auto push = tool(env, "kjit-cache", "push --cache-dir " + b.path(), scratch.path());
  REQUIRE_MESSAGE(push.rc == 0, push.err);
  CHECK(push.out.find("pushed 1 entries") != std::string::npos);
  const auto pull2 = tool(env, "kjit-cache", "pull --cache-dir " + c.path(), scratch.path());
  REQUIRE(pull2.rc == 0);
  CHECK(pull2.out.find("pulled 1 entries") != std::string::npos);

  // A value nobody signed, under a kjit key: pull refuses it (exit 1), writes nothing of it.
  kjit_test::TempDir d;
  server.set("kjit:v1:" + std::string(64, 'a'), "unsigned bytes of someone's choosing");
  const auto hostile = tool(env, "kjit-cache", "pull --cache-dir " + d.path(), scratch.path());
  CHECK(hostile.rc == 1);
  CHECK(hostile.out.find("pulled 1 entries") != std::string::npos);
  CHECK(hostile.out.find("1 refused") != std::string::npos);
  CHECK_FALSE(kjit_test::exists(d / ("v1/aa/" + std::string(64, 'a') + ".kjit")));

  const auto stats =
      tool(env, "kjit-cache", "stats --json --cache-dir " + c.path(), scratch.path());
  REQUIRE_MESSAGE(stats.rc == 0, stats.err);
  const auto s = stats.json();
  CHECK(s["remote"]["reachable"] == true);
  // Added by each tool when it ended (FLUSHALL erased the first pull's): the last two pulls'
  // hits, the hostile value, the push.
  CHECK(s["remote"]["fleet"]["hits"] == 2);
  CHECK(s["remote"]["fleet"]["refused"] == 1);
  CHECK(s["remote"]["fleet"]["published"] == 1);  // push
  CHECK(s["remote"]["url"].get<std::string>().find(kFleetKey) == std::string::npos);

  const auto bad_key = tool("KJIT_REMOTE_CACHE=" + server.url() + " KJIT_REMOTE_CACHE_KEY=short ",
                            "kjit-cache", "pull --cache-dir " + c.path(), scratch.path());
  CHECK(bad_key.rc != 0);
  CHECK(bad_key.err.find("at least 32") != std::string::npos);

  server.kill();
  const auto down = tool(env, "kjit-cache", "stats --cache-dir " + c.path(), scratch.path());
  CHECK(down.rc == 0);
  CHECK(down.out.find("UNREACHABLE") != std::string::npos);
}

TEST_CASE("redis: the tools never print the server's password, whatever the URL's mistake") {
  const std::string password = "pw-that-must-not-show-1234";
  kjit_test::RedisServer server(password);
  kjit_test::TempDir scratch, a;
  const std::string key = " KJIT_REMOTE_CACHE_KEY=" + kFleetKey + " ";
  const std::string dir = " --cache-dir " + a.path();
  const struct {
    std::string url, args;
    int rc;
  } runs[] = {
      {server.url(), "stats --json", 0},
      {server.url(), "stats", 0},
      {server.url(), "pull", 0},
      {server.url("wrong-" + password), "stats", 0},  // shown UNREACHABLE, with the reason
      {server.url("wrong-" + password), "pull", 1},
      // Mistyped URLs that put the password where the port or the database is read.
      {"redis://default:" + password, "stats", 1},
      {"redis://127.0.0.1:" + std::to_string(server.port()) + "/0?password=" + password, "stats",
       1},
  };
  for (const auto& r : runs) {
    const auto res =
        tool("KJIT_REMOTE_CACHE='" + r.url + "'" + key, "kjit-cache", r.args + dir, scratch.path());
    CAPTURE(r.args);
    CHECK_MESSAGE(res.rc == r.rc, res.err);
    CHECK(res.out.find(password) == std::string::npos);
    CHECK(res.err.find(password) == std::string::npos);
    CHECK(res.out.find(kFleetKey) == std::string::npos);
    CHECK(res.err.find(kFleetKey) == std::string::npos);
  }
}

#endif  // KJIT_TOOLS_DIR
