// A folder the process cannot write, and explicit read-only mode: hits served, misses compiled
// in memory, nothing written, one warning.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/test_util.hpp"

using namespace kjit::cache;
using namespace kjit_test;

namespace {

constexpr uid_t kNobody = 65534;

// What every read-only scenario must do. Returns 0 or the number of the failed step.
int exercise_read_only(const Options& o, const Key& present, const Key& absent) {
  DiskCache cache(o);
  if (cache.mode() != Mode::ReadOnly) return 1;
  auto hit = cache.get(present);
  if (!hit || hit->payload != "present") return 2;
  bool made = false;
  Entry e = cache.get_or_make(
      absent, [] { return entry_of("compiled in memory"); }, &made);
  if (!made || e.payload != "compiled in memory") return 3;
  if (cache.put(absent, e)) return 4;
  if (cache.get(absent)) return 5;
  if (cache.prune(0, std::nullopt) != 0 || cache.clear() != 0) return 6;
  Stats s = cache.stats();
  if (s.hits != 1 || s.compiles != 1 || s.write_errors != 0 || s.corrupt != 0) return 7;
  return 0;
}

// A populated cache whose entry is old enough that a writable cache would touch it on a hit.
void populate(const std::string& dir, const Key& present) {
  DiskCache cache(options_for(dir));
  REQUIRE(cache.put(present, entry_of("present")));
  age_file(entry_path(dir, present), 3600);
}

void chmod_tree(const std::string& root, mode_t dirs, mode_t files) {
  for (const auto& kv : snapshot(root))
    ::chmod(kv.first.c_str(), S_ISDIR(std::get<2>(kv.second)) ? dirs : files);
}

// In a child: stderr into `log`, and as root, become nobody (root ignores permission bits, which
// these cases are about). 0, or the code of the step that failed.
int log_stderr_as_nobody(const std::string& log) {
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || ::dup2(fd, STDERR_FILENO) < 0) return 20;
  if (::geteuid() == 0 &&
      (::setgroups(0, nullptr) != 0 || ::setgid(kNobody) != 0 || ::setuid(kNobody) != 0))
    return 21;
  return 0;
}

}  // namespace

TEST_CASE("a folder that is not writable falls back to read-only with one warning") {
  TempDir tmp, side;
  const Key present = key_of("present"), absent = key_of("absent");
  const std::string dir = tmp / "cache";
  populate(dir, present);
  // Root ignores permission bits, so as root the check runs as nobody; 0555/0444 then stop
  // writes for everyone, and the folders stay traversable and readable for the child.
  ::chmod(tmp.path().c_str(), 0755);
  chmod_tree(dir, 0555, 0444);
  const Tree before = snapshot(tmp.path());
  const std::string log = side / "stderr";
  int rc = in_child([&] {
    if (int err = log_stderr_as_nobody(log)) return err;
    if (::access(dir.c_str(), W_OK) == 0) return 22;  // the scenario would be meaningless
    int r = exercise_read_only(options_for(dir), present, absent);
    if (r) return r;
    // A second cache on the same folder in the same process does not warn again.
    return exercise_read_only(options_for(dir), present, absent) ? 30 : 0;
  });
  CHECK(rc == 0);
  CHECK(snapshot(tmp.path()) == before);
  const std::string warning = read_file(log);
  CHECK(warning.find("kjit: cache dir " + dir + " is not writable (") == 0);
  CHECK(warning.find("); using it read-only\n") != std::string::npos);
  CHECK(std::count(warning.begin(), warning.end(), '\n') == 1);
}

TEST_CASE("a folder that cannot exist: under /proc, or below a regular file") {
  TempDir tmp;
  write_file(tmp / "file", "not a folder");
  for (const std::string& dir : {std::string("/proc/kjit-cache-test/cache"), tmp / "file/cache"}) {
    CAPTURE(dir);
    DiskCache cache(options_for(dir));
    CHECK(cache.mode() == Mode::ReadOnly);
    CHECK_FALSE(cache.get(key_of("k")));
    bool made = false;
    CHECK(cache
              .get_or_make(
                  key_of("k"), [] { return entry_of("m"); }, &made)
              .payload == "m");
    CHECK(made);
    CHECK_FALSE(cache.put(key_of("k"), entry_of("m")));
    CHECK(cache.stats().write_errors == 0);
    CHECK(cache.stats().read_errors == 0);
    CHECK_FALSE(exists(dir));
  }
  CHECK(read_file(tmp / "file") == "not a folder");
}

TEST_CASE("KJIT_CACHE=ro serves hits, compiles misses in memory, writes nothing") {
  TempDir tmp;
  const Key present = key_of("present"), absent = key_of("absent");
  populate(tmp.path(), present);
  const Tree before = snapshot(tmp.path());
  ScopedEnv dir("KJIT_CACHE_DIR", tmp.path().c_str());
  ScopedEnv mode("KJIT_CACHE", "ro");
  Options o = Options::from_env();
  CHECK(o.dir == tmp.path());
  CHECK(o.mode == Mode::ReadOnly);
  CHECK(exercise_read_only(o, present, absent) == 0);
  CHECK(snapshot(tmp.path()) == before);  // not even the hit's mtime changed
}

TEST_CASE("Mode::ReadOnly on a writable folder writes nothing") {
  TempDir tmp;
  const Key present = key_of("present"), absent = key_of("absent");
  populate(tmp.path(), present);
  const Tree before = snapshot(tmp.path());
  CHECK(exercise_read_only(options_for(tmp.path(), Mode::ReadOnly), present, absent) == 0);
  CHECK(snapshot(tmp.path()) == before);
}

// Found by review: a cache that warned "using no cache" because its path could not be resolved
// still looked entries up, through the unresolved path (relative: against whatever the working
// folder was by then) and without the checks of the folders above it that it never ran.
TEST_CASE("a cache that cannot be used never reads its path again") {
  TempDir tmp;
  const std::string real = tmp / "real";
  populate(real, key_of("k"));
  // A working folder deleted under the process: "./<real>" resolves against nothing.
  char old[4096];
  REQUIRE(::getcwd(old, sizeof old));
  REQUIRE(::mkdir((tmp / "gone").c_str(), 0700) == 0);
  REQUIRE(::chdir((tmp / "gone").c_str()) == 0);
  REQUIRE(::rmdir((tmp / "gone").c_str()) == 0);
  DiskCache relative(options_for("." + real, Mode::ReadOnly));
  REQUIRE(::chdir(old) == 0);
  // A symlink loop: resolving fails with ELOOP.
  REQUIRE(::symlink((tmp / "loop").c_str(), (tmp / "loop").c_str()) == 0);
  DiskCache loop(options_for(tmp / "loop", Mode::ReadOnly));
  DiskCache loop_rw(options_for(tmp / "loop"));
  for (DiskCache* c : {&relative, &loop, &loop_rw}) {
    CAPTURE(c->dir());
    CHECK(c->mode() == Mode::ReadOnly);
    CHECK_FALSE(c->read_only_reason().empty());
    CHECK_FALSE(c->get(key_of("k")));  // relative: the populated folder, had it been opened
    CHECK(c->list().empty());
    const Stats s = c->stats();
    CHECK(s.hits + s.untrusted + s.read_errors == 0);
  }
}

// Found by review: folders above the cache that did not exist when it was opened were never
// checked, so one made (or loosened) afterwards, by anyone, was trusted. Every lookup now checks
// each folder it walks through, by the descriptor it opened.
TEST_CASE("a folder above the cache made writable by others after opening turns lookups away") {
  TempDir tmp;
  const std::string above = tmp / "above", dir = above + "/cache";
  DiskCache ro(options_for(dir, Mode::ReadOnly));  // nothing there yet: an empty cache
  REQUIRE(ro.read_only_reason().empty());
  populate(tmp / "made", key_of("k"));
  REQUIRE(::mkdir(above.c_str(), 0700) == 0);
  REQUIRE(::rename((tmp / "made").c_str(), dir.c_str()) == 0);
  REQUIRE(ro.get(key_of("k")));                // trusted so far: ours, 0700
  REQUIRE(::chmod(above.c_str(), 0777) == 0);  // now anyone could swap `cache` for their own
  CHECK_FALSE(ro.get(key_of("k")));
  CHECK(ro.stats().untrusted == 1);
  // The same for a writable cache, which made `above` itself at open.
  const std::string above2 = tmp / "above2";
  DiskCache rw(options_for(above2 + "/cache"));
  REQUIRE(rw.mode() == Mode::ReadWrite);
  REQUIRE(rw.put(key_of("k"), entry_of("ours")));
  REQUIRE(::chmod(above2.c_str(), 0777) == 0);
  CHECK_FALSE(rw.get(key_of("k")));
  CHECK(rw.stats().untrusted == 1);
  // A sticky folder (as /tmp) stays fine above a cache.
  REQUIRE(::chmod(above2.c_str(), 01777) == 0);
  CHECK(rw.get(key_of("k")));
}

// Found by review: a version folder that the process may open but not search (mode 0644 for it)
// was silent in ro mode, every lookup a read error. As root the check runs as nobody.
TEST_CASE("a cache folder that cannot be searched says so, in either mode") {
  TempDir tmp, side;
  const std::string dir = tmp / "cache";
  populate(dir, key_of("k"));
  ::chmod(tmp.path().c_str(), 0755);
  chmod_tree(dir, 0755, 0644);
  REQUIRE(::chmod((dir + "/v1").c_str(), 0644) == 0);
  const std::string top_only = tmp / "top-only";
  populate(top_only, key_of("k"));
  chmod_tree(top_only, 0755, 0644);
  REQUIRE(::chmod(top_only.c_str(), 0644) == 0);
  const std::string above = tmp / "above";  // not searchable: the path cannot even be resolved
  REQUIRE(::mkdir(above.c_str(), 0700) == 0);
  populate(above + "/cache", key_of("k"));
  REQUIRE(::chmod(above.c_str(), 0600) == 0);
  const std::string log = side / "stderr";
  int rc = in_child([&] {
    if (int err = log_stderr_as_nobody(log)) return err;
    struct Case {
      std::string dir, blocked;
    };
    for (const Case& c :
         {Case{dir, dir + "/v1"}, Case{top_only, top_only}, Case{above + "/cache", above}}) {
      for (const Mode mode : {Mode::ReadOnly, Mode::ReadWrite}) {
        DiskCache cache(options_for(c.dir, mode));
        if (cache.mode() != Mode::ReadOnly) return 1;
        if (cache.read_only_reason() != c.blocked + ": cannot search it: Permission denied")
          return 2;
        if (cache.get(key_of("k"))) return 3;
        if (cache.stats().read_errors != 0) return 4;
      }
    }
    return 0;
  });
  CHECK(rc == 0);
  const std::string warning = read_file(log);
  CAPTURE(warning);
  CHECK(std::count(warning.begin(), warning.end(), '\n') == 3);  // one per folder
  CHECK(warning.find("kjit: cache dir " + dir + " cannot be used (" + dir +
                     "/v1: cannot search it: Permission denied); using no cache\n") !=
        std::string::npos);
}

// Found by review: each folder above the cache was opened for reading, so a root-owned 0711
// folder on the way (a home base other users may pass through but not list) made the cache
// unusable, though the trust policy allows it. Walking needs search permission only.
TEST_CASE("a folder above the cache that may be searched but not read is passed through") {
  if (::geteuid() != 0) return;  // the case needs a folder that is root's and the cache nobody's
  TempDir tmp, side;
  ::chmod(tmp.path().c_str(), 0755);
  const std::string base = tmp / "x711", dir = base + "/cache";
  REQUIRE(::mkdir(base.c_str(), 0711) == 0);
  populate(dir, key_of("k"));
  for (const auto& kv : snapshot(dir)) REQUIRE(::lchown(kv.first.c_str(), kNobody, kNobody) == 0);
  REQUIRE(::chmod(base.c_str(), 0711) == 0);
  const int rc = in_child([&] {
    if (int err = log_stderr_as_nobody(side / "stderr")) return err;
    for (const Mode mode : {Mode::ReadOnly, Mode::ReadWrite}) {
      DiskCache cache(options_for(dir, mode));
      if (cache.mode() != mode || !cache.read_only_reason().empty()) return 1;
      if (!cache.get(key_of("k"))) return 2;
    }
    return 0;
  });
  CHECK(rc == 0);
  CAPTURE(read_file(side / "stderr"));
}
