#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/file.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include "cache/test_util.hpp"

using namespace kjit::cache;
using namespace kjit_test;

TEST_CASE("put then get returns the same entry, laid out as documented") {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  CHECK(cache.mode() == Mode::ReadWrite);
  CHECK(cache.dir() == tmp.path());
  Key k = key_of("a");
  CHECK_FALSE(cache.get(k));
  Entry e = entry_of("cubin bytes");
  REQUIRE(cache.put(k, e));
  CHECK(exists(entry_path(tmp.path(), k)));
  auto got = cache.get(k);
  REQUIRE(got);
  CHECK(same_entry(*got, e));
  // A second instance (another process, in effect) sees it too.
  DiskCache other(options_for(tmp.path()));
  REQUIRE(other.get(k));
  CHECK(same_entry(*other.get(k), e));
  // Overwrite wins.
  REQUIRE(cache.put(k, entry_of("newer")));
  CHECK(cache.get(k)->payload == "newer");
  CHECK(count_files(tmp.path(), ".tmp.") == 0);
}

TEST_CASE("stats count hits, misses, compiles and bytes") {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  Key k = key_of("stats");
  Entry e = entry_of(std::string(100, 'x'));
  bool made = false;
  cache.get_or_make(
      k, [&] { return e; }, &made);
  CHECK(made);
  cache.get_or_make(
      k, [&] { return e; }, &made);
  CHECK_FALSE(made);
  cache.get(k);
  cache.get(key_of("absent"));
  cache.count_compile();
  Stats s = cache.stats();
  CHECK(s.hits == 2);
  CHECK(s.misses == 2);
  CHECK(s.compiles == 2);
  CHECK(s.corrupt == 0);
  CHECK(s.read_errors == 0);
  CHECK(s.write_errors == 0);
  const uint64_t size = read_file(entry_path(tmp.path(), k)).size();
  CHECK(s.bytes_written == size);
  CHECK(s.bytes_read == 2 * size);
}

TEST_CASE("get_or_make propagates make's exception and caches nothing") {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  Key k = key_of("throws");
  CHECK_THROWS_AS(cache.get_or_make(k, []() -> Entry { throw std::runtime_error("nvrtc"); }),
                  std::runtime_error);
  CHECK_FALSE(cache.get(k));
  CHECK(count_files(tmp.path(), ".lock") == 0);  // the lock was released and removed
  bool made = false;
  CHECK(cache
            .get_or_make(
                k, [] { return entry_of("ok"); }, &made)
            .payload == "ok");
  CHECK(made);
}

TEST_CASE("mode off touches nothing") {
  TempDir tmp;
  std::string dir = tmp / "never";
  DiskCache cache(options_for(dir, Mode::Off));
  CHECK(cache.mode() == Mode::Off);
  Key k = key_of("off");
  CHECK_FALSE(cache.put(k, entry_of("x")));
  CHECK_FALSE(cache.get(k));
  bool made = false;
  CHECK(cache
            .get_or_make(
                k, [] { return entry_of("made"); }, &made)
            .payload == "made");
  CHECK(made);
  CHECK_FALSE(exists(dir));
  CHECK(cache.stats().write_errors == 0);
}

TEST_CASE("mode off ignores an existing populated folder") {
  TempDir tmp;
  Key k = key_of("there");
  REQUIRE(DiskCache(options_for(tmp.path())).put(k, entry_of("x")));
  DiskCache off(options_for(tmp.path(), Mode::Off));
  CHECK_FALSE(off.get(k));
}

TEST_CASE("read-only mode serves hits and writes nothing") {
  TempDir tmp;
  Key k = key_of("ro");
  REQUIRE(DiskCache(options_for(tmp.path())).put(k, entry_of("x")));
  age_file(entry_path(tmp.path(), k), 3600);  // old enough that a read-write hit would touch it
  const Tree before = snapshot(tmp.path());
  DiskCache ro(options_for(tmp.path(), Mode::ReadOnly));
  CHECK(ro.mode() == Mode::ReadOnly);
  REQUIRE(ro.get(k));
  CHECK_FALSE(ro.put(key_of("new"), entry_of("y")));
  bool made = false;
  CHECK(ro.get_or_make(
              key_of("new"), [] { return entry_of("y"); }, &made)
            .payload == "y");
  CHECK(made);
  CHECK(ro.prune(0, std::nullopt) == 0);
  CHECK(ro.clear() == 0);
  CHECK(snapshot(tmp.path()) == before);
  CHECK(ro.stats().write_errors == 0);
}

TEST_CASE("'..' in the cache path steps up a folder, and stops at the root") {
  TempDir tmp;
  std::filesystem::create_directories(tmp / "a/b");
  // tmp/a/b/../../c is tmp/c; "/.." is "/", so a path that climbs past the root lands in tmp/d.
  DiskCache c(options_for(tmp / "a/b/../../c"));
  DiskCache d(options_for("/../.." + tmp.path() + "/d"));
  const Key k = key_of("k");
  REQUIRE(c.put(k, entry_of("c")));
  REQUIRE(d.put(k, entry_of("d")));
  CHECK(exists(entry_path(tmp / "c", k)));
  CHECK(exists(entry_path(tmp / "d", k)));
  CHECK_FALSE(exists(tmp / "a/b/c"));
}

TEST_CASE("read-only mode on a missing folder creates nothing") {
  TempDir tmp;
  DiskCache ro(options_for(tmp / "missing", Mode::ReadOnly));
  CHECK_FALSE(ro.get(key_of("k")));
  CHECK(ro.list().empty());
  CHECK_FALSE(exists(tmp / "missing"));
}

TEST_CASE("read-only mode on a file, or over a file where its version folder goes, says why") {
  TempDir tmp;
  const std::string file = tmp / "file";
  write_file(file, "not a cache");
  REQUIRE(::mkdir((tmp / "top").c_str(), 0700) == 0);
  write_file(tmp / "top/v1", "not a folder");
  // A file above the folder too (found by review: ro said nothing there, rw named the file), and
  // either mode says the same: a folder that cannot be read is no cache, whatever was asked.
  struct Case {
    std::string dir, blocked;
  };
  for (const Case& c : {Case{file, file}, Case{tmp / "top", tmp / "top/v1"},
                        Case{file + "/cache", file}, Case{file + "/a/b", file}}) {
    for (const Mode mode : {Mode::ReadOnly, Mode::ReadWrite}) {
      CAPTURE(c.dir);
      CAPTURE(static_cast<int>(mode));
      DiskCache cache(options_for(c.dir, mode));
      CHECK(cache.mode() == Mode::ReadOnly);
      CHECK(cache.read_only_reason() == c.blocked + ": not a directory");
      CHECK_FALSE(cache.get(key_of("k")));
      CHECK_FALSE(cache.put(key_of("k"), entry_of("m")));
      const Stats s = cache.stats();
      CHECK(s.read_errors + s.write_errors + s.untrusted == 0);
    }
  }
  CHECK(read_file(file) == "not a cache");
  DiskCache missing(options_for(tmp / "missing", Mode::ReadOnly));
  CHECK(missing.read_only_reason().empty());  // a folder not made yet is an empty cache
}

TEST_CASE("a hit refreshes an old entry's mtime, a recent one is left alone") {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  Key k = key_of("touch");
  REQUIRE(cache.put(k, entry_of("x")));
  const std::string p = entry_path(tmp.path(), k);
  age_file(p, 7200);
  auto mtime = [&] { return std::get<1>(snapshot(tmp.path())[p]); };
  const long long old_mtime = mtime();
  REQUIRE(cache.get(k));
  const long long touched = mtime();
  CHECK(touched > old_mtime + 7000ll * 1000000000ll);
  REQUIRE(cache.get(k));
  CHECK(mtime() == touched);
}

TEST_CASE("list, total_bytes and verify") {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  std::vector<Key> keys;
  for (int i = 0; i < 5; ++i) {
    keys.push_back(key_of("list" + std::to_string(i)));
    REQUIRE(cache.put(keys.back(),
                      entry_of("payload" + std::to_string(i), "k<" + std::to_string(i) + ">")));
  }
  auto infos = cache.list(true);
  REQUIRE(infos.size() == 5);
  uint64_t total = 0;
  for (const auto& info : infos) {
    CHECK(info.valid);
    CHECK(info.label.substr(0, 2) == "k<");
    CHECK(info.size == read_file(info.path).size());
    CHECK(info.mtime > 0);
    total += info.size;
  }
  CHECK(cache.total_bytes() == total);

  SUBCASE("verify detects a flipped byte") {
    const std::string p = entry_path(tmp.path(), keys[2]);
    std::string data = read_file(p);
    data[data.size() / 2] ^= 0x01;
    write_file(p, data);
    int bad = 0;
    for (const auto& info : cache.list(true)) {
      if (!info.valid) {
        ++bad;
        CHECK(info.key_hex == keys[2].hex());
        CHECK(info.error == "checksum mismatch");
      }
    }
    CHECK(bad == 1);
    CHECK_FALSE(cache.get(keys[2]));
    CHECK(cache.stats().corrupt == 1);
  }
}

TEST_CASE("prune by age and by size, clear") {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  std::vector<Key> keys;
  for (int i = 0; i < 10; ++i) {
    keys.push_back(key_of("prune" + std::to_string(i)));
    REQUIRE(cache.put(keys.back(), entry_of(std::string(1000, 'a'))));
    age_file(entry_path(tmp.path(), keys.back()), 100000 - i * 1000);  // key 0 is the oldest
  }
  // Older than ~1 day: keys 0..3 (100000..97000 s old); 4..9 are younger.
  CHECK(cache.prune(std::nullopt, std::chrono::seconds(96500)) == 4);
  for (int i = 0; i < 10; ++i) CHECK(bool(cache.get(keys[i])) == (i >= 4));
  const uint64_t one = read_file(entry_path(tmp.path(), keys[9])).size();
  // Distinct ages again: the hits above all refreshed within one clock tick.
  for (int i = 4; i < 10; ++i) age_file(entry_path(tmp.path(), keys[i]), 100 - i);
  CHECK(cache.prune(3 * one, std::nullopt) == 3);
  for (int i = 4; i < 10; ++i) CHECK(exists(entry_path(tmp.path(), keys[i])) == (i >= 7));
  CHECK(cache.clear() == 3);
  CHECK(cache.list().empty());
  CHECK(cache.total_bytes() == 0);
}

TEST_CASE("files the cache does not own are never deleted") {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  Key k = key_of("own");
  REQUIRE(cache.put(k, entry_of("x")));
  const std::string shard = tmp.path() + "/v1/" + k.hex().substr(0, 2);
  const std::string other_shard = k.hex().substr(0, 2) == "00" ? "01" : "00";
  std::vector<std::string> foreign = {
      tmp / "notes.txt",
      tmp / "v1/README",
      shard + "/README",
      shard + "/" + k.hex() + ".kjit.bak",
      shard + "/" + k.hex() + ".kjit.tmp.notapid.zz",
      shard + "/" + k.hex().substr(0, 63) + ".kjit",
      // An entry-shaped name in the wrong shard is not something the cache wrote.
      tmp.path() + "/v1/" + other_shard + "/" + k.hex() + ".kjit",
      tmp / "v1/zz/ffff.kjit",
      tmp / "v1/locks/not-a-lock",
  };
  ::mkdir((tmp.path() + "/v1/" + other_shard).c_str(), 0755);
  ::mkdir((tmp / "v1/zz").c_str(), 0755);
  ::mkdir((tmp / "v1/locks").c_str(), 0755);
  for (const auto& f : foreign) write_file(f, "keep me");
  CHECK(cache.clear() == 1);
  CHECK(cache.prune(0, std::chrono::seconds(0)) == 0);
  for (const auto& f : foreign) CHECK_MESSAGE(exists(f), f);
  CHECK_FALSE(exists(entry_path(tmp.path(), k)));
}

TEST_CASE("export and import round trip") {
  TempDir src_dir, dst_dir, out;
  DiskCache src(options_for(src_dir.path()));
  std::vector<Key> keys;
  for (int i = 0; i < 20; ++i) {
    keys.push_back(key_of("export" + std::to_string(i)));
    REQUIRE(src.put(keys.back(), entry_of(std::string(i * 100, char('a' + i)), std::to_string(i))));
  }
  // A corrupt entry is not exported.
  ::mkdir((src_dir.path() + "/v1/" + key_of("junk").hex().substr(0, 2)).c_str(), 0755);
  write_file(entry_path(src_dir.path(), key_of("junk")), "garbage");
  const std::string archive = out / "cache.kjitar";
  CHECK(src.export_to(archive) == 20);
  CHECK(count_files(out.path(), ".tmp.") == 0);

  DiskCache dst(options_for(dst_dir.path()));
  CHECK(dst.import_from(archive) == 20);
  for (int i = 0; i < 20; ++i) {
    auto e = dst.get(keys[i]);
    REQUIRE(e);
    CHECK(same_entry(*e, *src.get(keys[i])));
  }
  CHECK(dst.list(true).size() == 20);
  // Importing again overwrites with identical entries.
  CHECK(dst.import_from(archive) == 20);
  CHECK(dst.list(true).size() == 20);

  SUBCASE("empty cache exports an empty archive") {
    TempDir empty;
    DiskCache e(options_for(empty.path()));
    CHECK(e.export_to(out / "empty.kjitar") == 0);
    CHECK(dst.import_from(out / "empty.kjitar") == 0);
  }
}

// A file at an entry's name larger than any entry (1 GiB) is never read into memory: list()
// reports it invalid, export skips it, and get() misses.
TEST_CASE("list and export never read an oversized file") {
  TempDir tmp, out;
  DiskCache cache(options_for(tmp.path()));
  const Key good = key_of("good"), huge = key_of("huge");
  REQUIRE(cache.put(good, entry_of("payload")));
  ::mkdir((tmp.path() + "/v1/" + huge.hex().substr(0, 2)).c_str(), 0700);
  const std::string path = entry_path(tmp.path(), huge);
  write_file(path, "x");
  REQUIRE(::chmod(path.c_str(), 0600) == 0);  // trusted whatever the umask: only its size is off
  REQUIRE(::truncate(path.c_str(), (off_t{1} << 30) + 1) == 0);  // sparse: no disk used
  bool seen = false;
  for (const EntryInfo& info : cache.list(true)) {
    if (info.key_hex != huge.hex()) continue;
    seen = true;
    CHECK_FALSE(info.valid);
    CHECK(info.error.find("larger than any entry") != std::string::npos);
  }
  CHECK(seen);
  CHECK(cache.export_to(out / "a.kjitar") == 1);
  CHECK_FALSE(cache.get(huge));
}

// An archive whose record claims more than any entry holds (a sparse file of 2 GiB) is refused
// at that record, before anything is read or allocated for it.
TEST_CASE("an archive entry claiming more than 1 GiB is refused unread") {
  TempDir tmp, out;
  const std::string path = out / "huge.kjitar";
  std::string head("KJITARC\0", 8);
  head += std::string("\x01\0\0\0", 4);          // version 1
  head += '\x01';                                // a record
  head += std::string(32, '\x5a');               // its key
  head += std::string("\0\0\0\x80\0\0\0\0", 8);  // 2^31 bytes, little-endian
  write_file(path, head);
  REQUIRE(::truncate(path.c_str(), (off_t{1} << 31) + 4096) == 0);
  DiskCache cache(options_for(tmp.path()));
  CHECK_THROWS_WITH_AS(cache.import_from(path), doctest::Contains("over the 1 GiB limit"),
                       std::runtime_error);
  CHECK(cache.list().empty());
}

// An archive entry over half the importing cache's cap is skipped with a warning; the rest of
// the archive is imported.
TEST_CASE("import skips an entry too large for the cap and imports the rest") {
  TempDir src_dir, dst_dir, out;
  DiskCache src(options_for(src_dir.path()));
  for (int i = 0; i < 5; ++i)
    REQUIRE(src.put(key_of("small" + std::to_string(i)), entry_of(std::string(1000, 'a'))));
  REQUIRE(src.put(key_of("big"), entry_of(std::string(100000, 'b'))));
  CHECK(src.export_to(out / "a.kjitar") == 6);
  Options o = options_for(dst_dir.path());
  o.max_bytes = 150000;
  DiskCache dst(o);
  CHECK(dst.import_from(out / "a.kjitar") == 5);
  CHECK_FALSE(dst.get(key_of("big")));
  for (int i = 0; i < 5; ++i) CHECK(dst.get(key_of("small" + std::to_string(i))));
}

TEST_CASE("a bad archive throws and imports nothing") {
  TempDir src_dir, dst_dir, out;
  DiskCache src(options_for(src_dir.path()));
  for (int i = 0; i < 5; ++i)
    REQUIRE(src.put(key_of("arc" + std::to_string(i)), entry_of(std::string(500, 'z'))));
  const std::string archive = out / "a.kjitar";
  REQUIRE(src.export_to(archive) == 5);
  const std::string good = read_file(archive);
  DiskCache dst(options_for(dst_dir.path()));

  auto expect_rejected = [&](const std::string& bytes, const char* what) {
    write_file(out / "bad.kjitar", bytes);
    CHECK_THROWS_AS_MESSAGE(dst.import_from(out / "bad.kjitar"), std::runtime_error, what);
    CHECK_MESSAGE(dst.list().empty(), what);
  };
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x40;  // inside the third entry
  expect_rejected(flipped, "flipped byte");
  expect_rejected(good.substr(0, good.size() - 1), "truncated by one byte");
  expect_rejected(good.substr(0, good.size() / 2), "truncated by half");
  expect_rejected("", "empty file");
  expect_rejected("KJITARC" + good.substr(7, 100), "short");
  std::string magic = good;
  magic[0] = 'X';
  expect_rejected(magic, "bad magic");
  CHECK_THROWS_AS(dst.import_from(out / "does-not-exist"), std::runtime_error);
  try {
    dst.import_from(out / "bad.kjitar");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("bad.kjitar") != std::string::npos);
  }
  DiskCache ro(options_for(dst_dir.path(), Mode::ReadOnly));
  CHECK_THROWS_AS(ro.import_from(archive), std::runtime_error);
}

TEST_CASE("one cache shared by many threads") {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        Key k = key_of("shared" + std::to_string(i % 10));
        Entry e = cache.get_or_make(k, [&] { return entry_of("v" + std::to_string(i % 10)); });
        if (e.payload != "v" + std::to_string(i % 10)) ++wrong;
        if (t % 2) cache.put(key_of("t" + std::to_string(t) + "_" + std::to_string(i)), e);
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(wrong == 0);
  Stats s = cache.stats();
  CHECK(s.hits + s.misses == 400);
  CHECK(s.compiles == s.misses);
  CHECK(s.compiles == 10);  // the per-key lock also serializes threads of one process
  CHECK(s.corrupt == 0);
  CHECK(s.write_errors == 0);
  CHECK(cache.list(true).size() == 10 + 4 * 50);
}

// A waiter that finds a key's lock file and then sees it vanish (its holder released it, which
// unlinks it) creates it again instead of compiling without the lock: with 8 threads racing over
// each of 300 fresh keys, every key compiles once (found by CI, ~1 run in 25: 11 compiles of 10).
TEST_CASE("racing get_or_make compiles each key once, however the lock files come and go") {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  constexpr int kKeys = 300, kThreads = 8;
  std::atomic<int> made{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kKeys; ++i)
        cache.get_or_make(key_of("race" + std::to_string(i)), [&] {
          ++made;
          return entry_of("v" + std::to_string(i));
        });
    });
  for (auto& th : threads) th.join();
  CHECK(made.load() == kKeys);
  CHECK(cache.stats().compiles == kKeys);
}

TEST_CASE("a compile lock held elsewhere delays get_or_make at most lock_timeout") {
  TempDir tmp;
  Options o = options_for(tmp.path());
  o.lock_timeout = std::chrono::milliseconds(150);
  DiskCache cache(o);
  const Key k = key_of("held");
  ::mkdir((tmp / "v1/locks").c_str(), 0755);
  const std::string lock = tmp / ("v1/locks/" + k.hex() + ".lock");
  int fd = ::open(lock.c_str(), O_RDWR | O_CREAT, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX) == 0);  // a process that hangs while holding the lock
  const auto t0 = std::chrono::steady_clock::now();
  bool made = false;
  CHECK(cache
            .get_or_make(
                k, [] { return entry_of("anyway"); }, &made)
            .payload == "anyway");
  const auto waited = std::chrono::steady_clock::now() - t0;
  CHECK(made);
  CHECK(waited >= std::chrono::milliseconds(150));
  CHECK(waited < std::chrono::seconds(5));
  CHECK(cache.get(k));  // published without the lock
  CHECK(exists(lock));  // someone else's lock file is not ours to remove
  ::close(fd);
}

TEST_CASE("max_bytes = 0 means no cap") {
  TempDir tmp;
  Options o = options_for(tmp.path());
  o.max_bytes = 0;
  DiskCache cache(o);
  for (int i = 0; i < 20; ++i) REQUIRE(cache.put(key_of(std::to_string(i)), entry_of("x")));
  CHECK(cache.list().size() == 20);
  CHECK(cache.stats().evictions == 0);
}

TEST_CASE("an entry over half the cap is not stored and evicts nothing") {
  TempDir tmp;
  Options o = options_for(tmp.path());
  o.max_bytes = 64 * 1024;
  DiskCache cache(o);
  for (int i = 0; i < 20; ++i)
    REQUIRE(cache.put(key_of(std::to_string(i)), entry_of(std::string(1000, 'a'))));
  CHECK_FALSE(cache.put(key_of("big"), entry_of(std::string(40 * 1024, 'b'))));
  CHECK(cache.stats().oversized == 1);
  CHECK(cache.stats().evictions == 0);
  CHECK(cache.stats().write_errors == 0);
  CHECK_FALSE(cache.get(key_of("big")));
  CHECK(cache.list().size() == 20);
}

TEST_CASE("a cache folder deleted under a running process is created again by the next put") {
  TempDir tmp;
  const std::string dir = tmp / "cache";
  DiskCache cache(options_for(dir));
  REQUIRE(cache.put(key_of("before"), entry_of("x")));
  REQUIRE(std::filesystem::remove_all(dir) > 0);
  CHECK(cache.put(key_of("after"), entry_of("y")));
  CHECK(cache.get(key_of("after"))->payload == "y");
  bool made = false;
  CHECK(cache
            .get_or_make(
                key_of("made"), [] { return entry_of("z"); }, &made)
            .payload == "z");
  CHECK(made);
  CHECK(cache.get(key_of("made")));  // published, not just returned
  CHECK(cache.stats().write_errors == 0);
}

// Not a regular file: never read, counted with what the trust policy refuses.
TEST_CASE("a FIFO at an entry's path is an untrusted entry, not a hang") {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  const Key k = key_of("fifo");
  REQUIRE(cache.put(k, entry_of("x")));
  const std::string path = entry_path(tmp.path(), k);
  REQUIRE(::unlink(path.c_str()) == 0);
  REQUIRE(::mkfifo(path.c_str(), 0666) == 0);
  CHECK_FALSE(cache.get(k));  // returns at once: no writer will ever open the FIFO
  CHECK(cache.stats().untrusted == 1);
  CHECK(cache.stats().corrupt == 0);
}
