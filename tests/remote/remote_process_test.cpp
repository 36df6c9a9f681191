// Across processes (kjit_remote_child, each with a disk cache of its own, one redis-server):
// what one process compiled, another loads without NVRTC; eight processes racing on the same
// kernels each compile a kernel at most once and all end with identical binaries.
#include <doctest/doctest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cache/test_util.hpp"
#include "redis_server.hpp"

extern char** environ;

namespace {

constexpr int kKernels = 3;
const char* const kArch = "sm_90";
const std::string kFleetKey = "fleet-key-of-the-remote-suite-0123456789";

struct ChildResult {
  int rc = -1;
  std::map<std::string, uint64_t> counters;  // nvrtc, remote_hits, remote_enabled
  std::vector<std::string> digests;          // one per kernel, in order
};

// Starts kjit_remote_child with the cache folder and remote tier in its environment; its stdout
// goes to a pipe the caller reads with finish().
struct Child {
  pid_t pid = -1;
  int out = -1;
};

// `lease_ms`: the fleet's compile lease; long enough that a loaded CI machine compiles within it.
Child start(const std::string& cache_dir, const std::string& url,
            const std::string& lease_ms = "60000") {
  std::vector<std::string> env_text = {"KJIT_CACHE_DIR=" + cache_dir, "KJIT_REMOTE_CACHE=" + url,
                                       "KJIT_REMOTE_CACHE_KEY=" + kFleetKey,
                                       "KJIT_REMOTE_CACHE_LEASE_MS=" + lease_ms};
  for (char** e = environ; *e; ++e) {
    const std::string v = *e;
    if (v.rfind("KJIT_CACHE_DIR=", 0) != 0 && v.rfind("KJIT_REMOTE_CACHE", 0) != 0)
      env_text.push_back(v);
  }
  std::vector<char*> envp;
  for (auto& v : env_text) envp.push_back(v.data());
  envp.push_back(nullptr);
  std::string bin = KJIT_REMOTE_CHILD, n = std::to_string(kKernels), arch = kArch;
  char* argv[] = {bin.data(), n.data(), arch.data(), nullptr};
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  Child c;
  const int rc = posix_spawn(&c.pid, bin.c_str(), &fa, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  REQUIRE(rc == 0);
  c.out = fds[0];
  return c;
}

ChildResult finish(Child c) {
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(c.out, buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<size_t>(n));
  ::close(c.out);
  int status = 0;
  ::waitpid(c.pid, &status, 0);
  ChildResult r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    if (word == "kernel") {
      int i = 0;
      std::string digest;
      in >> i >> digest;
      r.digests.push_back(digest);
    } else {
      in >> r.counters[word];
    }
  }
  return r;
}

}  // namespace

TEST_CASE("redis: process A compiles, process B with an empty disk cache compiles nothing") {
  kjit_test::RedisServer server;
  kjit_test::TempDir a, b;
  const ChildResult first = finish(start(a.path(), server.url()));
  REQUIRE(first.rc == 0);
  CHECK(first.counters.at("remote_enabled") == 1);
  CHECK(first.counters.at("nvrtc") == kKernels);
  CHECK(first.counters.at("remote_hits") == 0);
  const ChildResult second = finish(start(b.path(), server.url()));
  REQUIRE(second.rc == 0);
  CHECK(second.counters.at("nvrtc") == 0);
  CHECK(second.counters.at("remote_hits") == kKernels);
  CHECK(second.digests == first.digests);
  // B wrote what it fetched to its disk: a third run there needs neither NVRTC nor the server.
  server.kill();
  const ChildResult third = finish(start(b.path(), server.url()));
  REQUIRE(third.rc == 0);
  CHECK(third.counters.at("nvrtc") == 0);
  CHECK(third.counters.at("remote_hits") == 0);
  CHECK(third.digests == first.digests);
}

// With the lease (the default) the fleet compiles each kernel once; without (0) each process may
// compile each kernel, but never one twice.
TEST_CASE(
    "redis: 8 processes compile the same kernels against one server: once in all, or once each") {
  std::string lease;
  SUBCASE("with the fleet's compile lease") {
    lease = "60000";
  }
  SUBCASE("without it (KJIT_REMOTE_CACHE_LEASE_MS=0)") {
    lease = "0";
  }
  kjit_test::RedisServer server;
  std::vector<std::unique_ptr<kjit_test::TempDir>> dirs;
  std::vector<Child> children;
  for (int i = 0; i < 8; ++i) {
    dirs.push_back(std::make_unique<kjit_test::TempDir>());
    children.push_back(start(dirs.back()->path(), server.url(), lease));
  }
  std::vector<ChildResult> results;
  for (Child& c : children) results.push_back(finish(c));
  uint64_t compiled = 0;
  for (const ChildResult& r : results) {
    REQUIRE(r.rc == 0);
    CHECK(r.counters.at("nvrtc") + r.counters.at("remote_hits") == kKernels);
    CHECK(r.counters.at("nvrtc") <= kKernels);
    CHECK(r.digests.size() == kKernels);
    CHECK(r.digests == results.front().digests);
    compiled += r.counters.at("nvrtc");
  }
  MESSAGE(compiled << " compiles in 8 processes for " << kKernels << " kernels, lease " << lease
                   << " ms");
  if (lease != "0") CHECK(compiled == kKernels);
  kjit_test::TempDir late;
  const ChildResult after = finish(start(late.path(), server.url()));
  REQUIRE(after.rc == 0);
  CHECK(after.counters.at("nvrtc") == 0);
  CHECK(after.digests == results.front().digests);
}
