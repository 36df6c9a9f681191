// Writers that die or run out of space must leave no visible partial entry behind.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "cache/test_util.hpp"

using namespace kjit::cache;
using namespace kjit_test;

namespace {

// Starts a child whose put() stalls after writing half of a 1 MB entry, waits until the half is
// on disk, and SIGKILLs it there. Returns the temp file's path.
std::string kill_writer_mid_put(const std::string& dir, const Key& k) {
  pid_t pid = spawn_child([&] {
    ::setenv("KJIT_CACHE_TEST_STALL_WRITE_MS", "20000", 1);
    DiskCache cache(options_for(dir));
    cache.put(k, entry_of(std::string(1 << 20, 'w')));
    return 1;  // not reached unless the stall hook is broken
  });
  const std::string shard = dir + "/v1/" + k.hex().substr(0, 2);
  std::string temp;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (temp.empty() && std::chrono::steady_clock::now() < deadline) {
    for (const auto& kv : snapshot(shard))
      if (kv.first.find(".tmp.") != std::string::npos && std::get<0>(kv.second) >= (1 << 19))
        temp = kv.first;
    if (temp.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, SIGKILL);
  CHECK(wait_child(pid) == 100 + SIGKILL);
  return temp;
}

}  // namespace

TEST_CASE("a writer killed mid-write leaves no visible entry; its temp file is cleaned later") {
  TempDir tmp;
  const Key fresh = key_of("fresh"), existing = key_of("existing"), other = key_of("other");
  {
    DiskCache cache(options_for(tmp.path()));
    REQUIRE(cache.put(existing, entry_of("old but valid")));
    REQUIRE(cache.put(other, entry_of("bystander")));
  }
  const std::string temp_fresh = kill_writer_mid_put(tmp.path(), fresh);
  const std::string temp_existing = kill_writer_mid_put(tmp.path(), existing);
  REQUIRE_FALSE(temp_fresh.empty());
  REQUIRE_FALSE(temp_existing.empty());
  CHECK(exists(temp_fresh));
  CHECK(exists(temp_existing));

  DiskCache cache(options_for(tmp.path()));
  CHECK_FALSE(cache.get(fresh));  // a clean miss: no entry file at all
  CHECK_FALSE(exists(entry_path(tmp.path(), fresh)));
  auto old = cache.get(existing);  // the previous version survives the interrupted overwrite
  REQUIRE(old);
  CHECK(old->payload == "old but valid");
  CHECK(cache.stats().corrupt == 0);
  CHECK(cache.stats().read_errors == 0);

  // Past the grace that covers a live writer's create-then-lock moment (eviction.hpp): what
  // marks them abandoned is that no one holds their lock any more.
  age_file(temp_fresh, 20);
  age_file(temp_existing, 20);
  SUBCASE("removed by prune (the writer's lock is gone)") {
    CHECK(cache.prune(std::nullopt, std::nullopt) == 0);
  }
  SUBCASE("removed by the trim that a put over the cap triggers") {
    // A cap the trigger entry fits (at most half of it) but the folder's total is over: its
    // put stores it and trims.
    TempDir probe;
    DiskCache sizing(options_for(probe.path()));
    REQUIRE(sizing.put(key_of("trigger"), entry_of("t")));
    Options o = options_for(tmp.path());
    o.max_bytes = 2 * sizing.list().at(0).size + 1;
    DiskCache small(o);
    REQUIRE(small.put(key_of("trigger"), entry_of("t")));
    CHECK(small.stats().evictions >= 1);
  }
  CHECK_FALSE(exists(temp_fresh));
  CHECK_FALSE(exists(temp_existing));
  CHECK(count_files(tmp.path(), ".tmp.") == 0);
  // get_or_make then works normally for the key that was being written.
  bool made = false;
  CHECK(cache
            .get_or_make(
                fresh, [] { return entry_of("made"); }, &made)
            .payload == "made");
  CHECK(made);
}

// Liveness is the writer's flock on its temp file, not its pid: a pid names nothing across PID
// namespaces (two containers sharing one cache) or hosts, and the old pid test deleted such live
// writers' files.
TEST_CASE("temp files of live writers are kept, in any PID namespace; abandoned ones go") {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  const Key k = key_of("temps");
  REQUIRE(cache.put(k, entry_of("x")));
  const std::string base = entry_path(tmp.path(), k);
  // A pid that exists nowhere here: what a writer in another PID namespace looks like.
  const pid_t dead_pid = spawn_child([] { return 0; });
  wait_child(dead_pid);
  const std::string elsewhere = base + ".tmp." + std::to_string(dead_pid) + ".00ff";
  const std::string abandoned = base + ".tmp." + std::to_string(getpid()) + ".0aaa";
  const std::string fresh = base + ".tmp." + std::to_string(dead_pid) + ".0bbb";
  for (const auto& p : {elsewhere, abandoned, fresh}) write_file(p, "partial");
  // The live writer holds its lock (from a child: a flock is per open file, so holding it in
  // this process would prove nothing about another one).
  int ready[2], done[2];
  REQUIRE(::pipe(ready) == 0);
  REQUIRE(::pipe(done) == 0);
  const pid_t writer = spawn_child([&] {
    int fd = ::open(elsewhere.c_str(), O_RDWR);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0) return 1;
    char c = 1;
    if (::write(ready[1], &c, 1) != 1) return 2;
    return ::read(done[0], &c, 1) == 1 ? 0 : 3;
  });
  char c;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  age_file(elsewhere, 2 * 3600);  // even a writer stalled for hours is alive while it holds it
  age_file(abandoned, 2 * 3600);
  cache.prune(std::nullopt, std::nullopt);
  CHECK(exists(elsewhere));
  CHECK_FALSE(exists(abandoned));
  CHECK(exists(fresh));  // unlocked, but within the grace of a writer's create-then-lock moment
  CHECK(cache.get(k));
  REQUIRE(::write(done[1], &c, 1) == 1);
  CHECK(wait_child(writer) == 0);
  cache.prune(std::nullopt, std::nullopt);  // its writer gone: abandoned now
  CHECK_FALSE(exists(elsewhere));
  for (int fd : {ready[0], ready[1], done[0], done[1]}) ::close(fd);
}

TEST_CASE("disk full during a write: put fails cleanly, the op still gets its entry") {
  TempDir tmp;
  const Key before = key_of("before"), big = key_of("big"), made_key = key_of("made"),
            small = key_of("small");
  REQUIRE(DiskCache(options_for(tmp.path())).put(before, entry_of("valid")));
  const std::string payload(64 * 1024, 'f');
  int rc = in_child([&] {
    rlimit lim{16 * 1024, 16 * 1024};  // files may not grow past 16 KB in this process
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return 10;
    ::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG instead of killing us
    DiskCache cache(options_for(tmp.path()));
    if (cache.mode() != Mode::ReadWrite) return 11;
    if (cache.put(big, entry_of(payload))) return 12;
    if (cache.stats().write_errors != 1) return 13;
    bool made = false;
    Entry e = cache.get_or_make(
        made_key, [&] { return entry_of(payload); }, &made);
    if (!made || e.payload != payload) return 14;
    if (cache.stats().write_errors != 2 || cache.stats().compiles != 1) return 15;
    // Entries that fit are still written: the cache keeps working.
    if (!cache.put(small, entry_of("small"))) return 16;
    auto hit = cache.get(before);
    if (!hit || hit->payload != "valid") return 17;
    return 0;
  });
  CHECK(rc == 0);
  CHECK_FALSE(exists(entry_path(tmp.path(), big)));
  CHECK_FALSE(exists(entry_path(tmp.path(), made_key)));
  CHECK(count_files(tmp.path(), ".tmp.") == 0);
  DiskCache cache(options_for(tmp.path()));
  CHECK(cache.get(before)->payload == "valid");
  CHECK(cache.get(small)->payload == "small");
  for (const auto& info : cache.list(true)) CHECK(info.valid);
}

// The same with a writer in a real second PID namespace (two containers sharing one cache): its
// temp file's pid means nothing here. Needs unshare(1) and the right to make a PID namespace.
TEST_CASE("a writer in another PID namespace keeps its temp file") {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  const Key k = key_of("ns");
  REQUIRE(cache.put(k, entry_of("x")));
  const pid_t gone = spawn_child([] { return 0; });
  wait_child(gone);
  const std::string temp = entry_path(tmp.path(), k) + ".tmp." + std::to_string(gone) + ".0ccc";
  write_file(temp, "partial");
  age_file(temp, 2 * 3600);
  if (in_child([] {
        const int null = ::open("/dev/null", O_WRONLY);
        ::dup2(null, STDOUT_FILENO);
        ::dup2(null, STDERR_FILENO);
        ::execlp("unshare", "unshare", "--pid", "--fork", "true", static_cast<char*>(nullptr));
        return 127;
      }) != 0) {
    MESSAGE("skipped: cannot make a PID namespace here (unshare --pid failed)");
    return;
  }
  // flock(1) inside the new namespace holds the writer's lock on the temp file.
  const pid_t writer = ::fork();
  if (writer == 0) {
    ::execlp("unshare", "unshare", "--pid", "--fork", "--kill-child", "flock", "-x", temp.c_str(),
             "sleep", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  bool held = false;
  for (int i = 0; i < 500 && !held; ++i) {
    const int fd = ::open(temp.c_str(), O_RDWR);
    held = fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    if (fd >= 0) ::close(fd);
    if (!held) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(held);
  cache.prune(std::nullopt, std::nullopt);
  CHECK(exists(temp));      // alive in its own namespace, whatever its name's pid says here
  ::kill(writer, SIGKILL);  // --kill-child: the namespace's init, and flock with it, die too
  wait_child(writer);
  for (int i = 0; i < 500 && exists(temp); ++i) {
    cache.prune(std::nullopt, std::nullopt);
    if (exists(temp)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK_FALSE(exists(temp));
}
