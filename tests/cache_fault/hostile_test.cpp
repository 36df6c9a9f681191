// A cache folder is where GPU code comes from: what another user, a planted symlink or a special
// file can do to it. .ci/run also runs this suite as uid 65534, where root's privileges cannot
// make a case pass for the wrong reason.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>

#include "../../cache/src/archive.hpp"
#include "cache/test_util.hpp"

using namespace kjit::cache;
using namespace kjit_test;

namespace {

mode_t mode_of(const std::string& p) {
  struct stat st;
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode;
}

// A valid entry (right key, metadata and checksum) written by "someone else": serialized by a
// cache in another folder and copied in, as an attacker would.
std::string planted_bytes(const Key& k, const std::string& payload) {
  TempDir other;
  REQUIRE(DiskCache(options_for(other.path())).put(k, entry_of(payload)));
  return read_file(entry_path(other.path(), k));
}

void plant(const std::string& dir, const Key& k, const std::string& payload) {
  ::mkdir((dir + "/v1").c_str(), 0700);
  ::mkdir((dir + "/v1/" + k.hex().substr(0, 2)).c_str(), 0700);
  write_file(entry_path(dir, k), planted_bytes(k, payload));
}

// Runs fn in a child that is killed after `seconds`: a hang fails the test instead of hanging it.
int bounded(int seconds, const std::function<int()>& fn) {
  return in_child([&] {
    ::alarm(static_cast<unsigned>(seconds));
    return fn();
  });
}

class Umask {
 public:
  explicit Umask(mode_t m) : old_(::umask(m)) {}
  ~Umask() { ::umask(old_); }

 private:
  mode_t old_;
};

}  // namespace

TEST_CASE("a cache folder that others can write is refused, planted entries are never served") {
  TempDir tmp;
  const Key k = key_of("planted");
  const std::string dir = tmp / "open";
  REQUIRE(::mkdir(dir.c_str(), 0777) == 0);
  REQUIRE(::chmod(dir.c_str(), 0777) == 0);
  plant(dir, k, "attacker's cubin");
  for (Mode mode : {Mode::ReadWrite, Mode::ReadOnly}) {
    DiskCache cache(options_for(dir, mode));
    CHECK(cache.mode() == Mode::Off);
    CHECK(cache.refused_reason().find(dir + " is writable by every user (mode 0777)") !=
          std::string::npos);
    CHECK_FALSE(cache.get(k));
    CHECK(cache.list().empty());
  }
  SUBCASE("a folder above it, not sticky, writable by others: it could swap the whole cache") {
    const std::string inner = dir + "/inner";
    REQUIRE(::mkdir(inner.c_str(), 0700) == 0);
    DiskCache cache(options_for(inner));
    CHECK(cache.mode() == Mode::Off);
    CHECK(cache.refused_reason().find(dir + " is writable by every user") != std::string::npos);
  }
  SUBCASE("a sticky folder above it (/tmp) is fine") {
    REQUIRE(::chmod(dir.c_str(), 01777) == 0);
    const std::string inner = dir + "/inner";
    DiskCache cache(options_for(inner));
    CHECK(cache.mode() == Mode::ReadWrite);
    CHECK(cache.put(k, entry_of("mine")));
    CHECK(cache.get(k)->payload == "mine");
  }
}

TEST_CASE("an entry that others can write, or another user's, is a miss and is replaced") {
  TempDir tmp;
  const Key k = key_of("loose");
  {
    DiskCache cache(options_for(tmp.path()));
    REQUIRE(cache.put(k, entry_of("mine")));
  }
  write_file(entry_path(tmp.path(), k), planted_bytes(k, "planted"));
  REQUIRE(::chmod(entry_path(tmp.path(), k).c_str(), 0646) == 0);
  DiskCache cache(options_for(tmp.path()));
  CHECK(cache.mode() == Mode::ReadWrite);
  CHECK_FALSE(cache.get(k));
  CHECK(cache.stats().untrusted == 1);
  const auto listed = cache.list(true);
  REQUIRE(listed.size() == 1);
  CHECK_FALSE(listed[0].valid);
  CHECK(listed[0].error == "is writable by every user (mode 0646)");
  bool made = false;
  CHECK(cache
            .get_or_make(
                k, [] { return entry_of("remade"); }, &made)
            .payload == "remade");
  CHECK(made);
  CHECK((mode_of(entry_path(tmp.path(), k)) & 07777) == 0600);
  CHECK(cache.get(k)->payload == "remade");
  if (::geteuid() == 0) {  // another user's file, private mode
    REQUIRE(::chown(entry_path(tmp.path(), k).c_str(), 65534, 65534) == 0);
    DiskCache again(options_for(tmp.path()));
    CHECK_FALSE(again.get(k));
    CHECK(again.stats().untrusted == 1);
  }
}

TEST_CASE("under umask 000 kjit still makes its folders 0700 and its files 0600") {
  TempDir tmp;
  Umask open_umask(0);
  const std::string dir = tmp / "a/b/cache";
  DiskCache cache(options_for(dir));
  REQUIRE(cache.mode() == Mode::ReadWrite);
  const Key k = key_of("modes");
  bool made = false;
  cache.get_or_make(
      k, [] { return entry_of("x"); }, &made);
  REQUIRE(made);
  for (const std::string& p : {tmp / "a", tmp / "a/b", dir, dir + "/v1", dir + "/v1/locks",
                               dir + "/v1/" + k.hex().substr(0, 2)}) {
    CAPTURE(p);
    CHECK((mode_of(p) & 07777) == 0700);
  }
  CHECK((mode_of(entry_path(dir, k)) & 07777) == 0600);
}

TEST_CASE("no symlink inside the cache is followed") {
  TempDir tmp;
  const std::string dir = tmp / "cache", victim = tmp / "victim";
  REQUIRE(::mkdir(victim.c_str(), 0700) == 0);
  const Key k = key_of("linked");
  const std::string shard = k.hex().substr(0, 2);
  {
    DiskCache cache(options_for(dir));
    REQUIRE(cache.put(key_of("bystander"), entry_of("b")));
  }
  SUBCASE("a shard folder that is a symlink: no lookup, no write, no delete through it") {
    const std::string victim_entry = victim + "/" + k.hex() + ".kjit";
    write_file(victim_entry, planted_bytes(k, "planted"));
    ::rmdir((dir + "/v1/" + shard).c_str());
    REQUIRE(::symlink(victim.c_str(), (dir + "/v1/" + shard).c_str()) == 0);
    const Tree before = snapshot(victim);
    DiskCache cache(options_for(dir));
    CHECK_FALSE(cache.get(k));
    CHECK(cache.stats().untrusted == 1);
    CHECK_FALSE(cache.put(k, entry_of("x")));
    CHECK(cache.last_error().find("is a symbolic link") != std::string::npos);
    CHECK(cache.clear() >= 1);  // the bystander; and the link itself
    CHECK(snapshot(victim) == before);
  }
  SUBCASE("v1 itself a symlink: the cache is refused") {
    const std::string v1 = dir + "/v1";
    REQUIRE(::rename(v1.c_str(), (victim + "/v1").c_str()) == 0);
    REQUIRE(::symlink((victim + "/v1").c_str(), v1.c_str()) == 0);
    const Tree before = snapshot(victim);
    DiskCache cache(options_for(dir));
    CHECK(cache.mode() == Mode::Off);
    CHECK(cache.refused_reason().find("is a symbolic link") != std::string::npos);
    CHECK(cache.clear() == 0);
    CHECK(snapshot(victim) == before);
  }
  SUBCASE(
      "an entry that is a symlink is not served, is listed as one, and clear removes the link") {
    const std::string target = victim + "/entry";
    write_file(target, planted_bytes(k, "planted"));
    age_file(target, 3600);
    const Tree before = snapshot(victim);
    ::mkdir((dir + "/v1/" + shard).c_str(), 0700);
    REQUIRE(::symlink(target.c_str(), entry_path(dir, k).c_str()) == 0);
    DiskCache cache(options_for(dir));
    CHECK_FALSE(cache.get(k));
    bool found = false;
    for (const EntryInfo& e : cache.list(true))
      if (e.key_hex == k.hex()) {
        found = true;
        CHECK_FALSE(e.valid);
        CHECK(e.error.find("symbolic link") != std::string::npos);
      }
    CHECK(found);
    cache.clear();
    CHECK_FALSE(exists(entry_path(dir, k)));
    CHECK(snapshot(victim) == before);  // target kept, mtime untouched
  }
  SUBCASE("lock files that are symlinks create nothing at their target") {
    const std::string locks = dir + "/v1/locks";
    ::mkdir(locks.c_str(), 0700);
    REQUIRE(::symlink((victim + "/made-by-lock").c_str(),
                      (locks + "/" + k.hex() + ".lock").c_str()) == 0);
    REQUIRE(::symlink((victim + "/made-by-evict").c_str(), (dir + "/v1/evict.lock").c_str()) == 0);
    DiskCache cache(options_for(dir));
    bool made = false;
    CHECK(cache
              .get_or_make(
                  k, [] { return entry_of("m"); }, &made)
              .payload == "m");
    CHECK(made);
    cache.prune(uint64_t{0}, std::nullopt);
    CHECK_FALSE(exists(victim + "/made-by-lock"));
    CHECK_FALSE(exists(victim + "/made-by-evict"));
  }
}

TEST_CASE("the cache folder given by the user may itself be a symlink") {
  TempDir tmp;
  const std::string real = tmp / "real", link = tmp / "link";
  REQUIRE(::mkdir(real.c_str(), 0700) == 0);
  REQUIRE(::symlink(real.c_str(), link.c_str()) == 0);
  DiskCache cache(options_for(link));
  CHECK(cache.mode() == Mode::ReadWrite);
  REQUIRE(cache.put(key_of("k"), entry_of("v")));
  CHECK(exists(entry_path(real, key_of("k"))));
}

TEST_CASE("special files never block: a FIFO at an entry's name, a FIFO as an archive") {
  TempDir tmp;
  const Key k = key_of("fifo");
  {
    DiskCache cache(options_for(tmp.path()));
    REQUIRE(cache.put(k, entry_of("v")));
  }
  ::unlink(entry_path(tmp.path(), k).c_str());
  REQUIRE(::mkfifo(entry_path(tmp.path(), k).c_str(), 0600) == 0);
  REQUIRE(::mkfifo((tmp / "archive").c_str(), 0600) == 0);
  CHECK(bounded(20, [&] {
          DiskCache cache(options_for(tmp.path()));
          if (cache.get(k)) return 1;
          auto all = cache.list(true);
          if (all.size() != 1 || all[0].valid) return 2;
          if (all[0].error.find("FIFO") == std::string::npos) return 3;
          if (cache.export_to(tmp / "out.kjitar") != 0) return 4;
          try {
            cache.import_from(tmp / "archive");
            return 5;
          } catch (const std::runtime_error& e) {
            if (std::string(e.what()).find("not a regular file") == std::string::npos) return 6;
          }
          cache.clear();
          return exists(entry_path(tmp.path(), k)) ? 7 : 0;
        }) == 0);
}

TEST_CASE("a huge file at an entry's name is refused by its header, not read whole") {
  TempDir tmp;
  const Key k = key_of("huge");
  {
    DiskCache cache(options_for(tmp.path()));
    REQUIRE(cache.put(k, entry_of("v")));
  }
  // 1 GiB, sparse: no disk used. The old reader allocated and read all of it before the magic.
  const int fd = ::open(entry_path(tmp.path(), k).c_str(), O_WRONLY | O_TRUNC);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, off_t{1} << 30) == 0);
  ::close(fd);
  CHECK(bounded(60, [&] {
          // Growth of this child's peak memory: a forked child starts with its parent's (which a
          // sanitizer build's quarantine makes large), and the old reader added the whole GiB.
          rusage before, after;
          ::getrusage(RUSAGE_SELF, &before);
          DiskCache cache(options_for(tmp.path()));
          if (cache.get(k)) return 1;
          if (cache.stats().corrupt != 1) return 2;
          auto all = cache.list(true);
          if (all.size() != 1 || all[0].valid) return 3;
          ::getrusage(RUSAGE_SELF, &after);
          return after.ru_maxrss - before.ru_maxrss < 128 * 1024 ? 0 : 4;  // KiB
        }) == 0);
}

TEST_CASE("a folder at an entry's name: verify reports it, clear removes it, writes say why") {
  TempDir tmp;
  const Key k = key_of("dir");
  DiskCache cache(options_for(tmp.path()));
  REQUIRE(cache.put(key_of("other"), entry_of("o")));
  ::mkdir((tmp.path() + "/v1/" + k.hex().substr(0, 2)).c_str(), 0700);
  REQUIRE(::mkdir(entry_path(tmp.path(), k).c_str(), 0700) == 0);
  write_file(entry_path(tmp.path(), k) + "/inside", "x");
  CHECK_FALSE(cache.put(k, entry_of("v")));
  CHECK(cache.last_error().find(entry_path(tmp.path(), k)) != std::string::npos);
  CHECK(cache.last_error().find("Is a directory") != std::string::npos);
  auto bad = [&] {
    int n = 0;
    for (const EntryInfo& e : cache.list(true)) n += !e.valid;
    return n;
  };
  CHECK(bad() == 1);
  cache.clear();  // not empty: left, and still reported
  CHECK(bad() == 1);
  ::unlink((entry_path(tmp.path(), k) + "/inside").c_str());
  cache.clear();
  CHECK(bad() == 0);
  CHECK(cache.put(k, entry_of("v")));
}

TEST_CASE("read-only use creates nothing") {
  TempDir tmp;
  const std::string dir = tmp / "not/yet";
  DiskCache cache(options_for(dir, Mode::ReadOnly));
  CHECK(cache.mode() == Mode::ReadOnly);
  CHECK_FALSE(cache.get(key_of("k")));
  CHECK(cache.list(true).empty());
  CHECK(cache.total_bytes() == 0);
  CHECK_FALSE(exists(tmp / "not"));
  ScopedEnv no_dir("KJIT_CACHE_DIR", nullptr), no_xdg("XDG_CACHE_HOME", nullptr),
      home("HOME", (tmp / "home").c_str());
  CHECK(Options::from_env().dir == tmp / "home/.cache/kjit");
  CHECK_FALSE(exists(tmp / "home"));
}

TEST_CASE("import: one descriptor for both passes, duplicate keys refused") {
  TempDir tmp;
  const Key a = key_of("a"), b = key_of("b");
  const std::string good = tmp / "good.kjitar", evil = tmp / "evil.kjitar";
  {
    TempDir src;
    DiskCache c(options_for(src.path()));
    REQUIRE(c.put(a, entry_of("good a")));
    REQUIRE(c.export_to(good) == 1);
    REQUIRE(c.put(a, entry_of("evil a")));
    REQUIRE(c.put(b, entry_of("evil b")));
    REQUIRE(c.export_to(evil) == 2);
  }
  SUBCASE("the archive replaced between the passes: only what pass 1 checked is published") {
    static std::string s_good, s_evil;
    s_good = good;
    s_evil = evil;
    detail::import_between_passes_hook = [] { ::rename(s_evil.c_str(), s_good.c_str()); };
    DiskCache cache(options_for(tmp / "cache"));
    uint64_t n = 0;
    CHECK_NOTHROW(n = cache.import_from(good));
    detail::import_between_passes_hook = nullptr;
    CHECK(n == 1);
    CHECK(cache.get(a)->payload == "good a");
    CHECK_FALSE(cache.get(b));
  }
  SUBCASE("an entry changed in place between the passes is refused") {
    static std::string s_good, s_bytes;
    s_good = good;
    s_bytes = planted_bytes(a, "evil a");  // same length as "good a": same offsets
    detail::import_between_passes_hook = [] {
      const std::string file = read_file(s_good);
      const size_t at = file.find("good a");
      REQUIRE(at != std::string::npos);
      // The entry record starts 8 bytes (its length) before its magic.
      const size_t start = file.find("KJITCAC");
      const int fd = ::open(s_good.c_str(), O_WRONLY);
      REQUIRE(::pwrite(fd, s_bytes.data(), s_bytes.size(), static_cast<off_t>(start)) ==
              static_cast<ssize_t>(s_bytes.size()));
      ::close(fd);
    };
    DiskCache cache(options_for(tmp / "cache"));
    CHECK_THROWS_WITH_AS(cache.import_from(good), doctest::Contains("changed while importing"),
                         std::runtime_error);
    detail::import_between_passes_hook = nullptr;
    CHECK_FALSE(cache.get(a));
  }
  SUBCASE("the same key twice in one archive") {
    {
      detail::ArchiveWriter w(tmp / "dup.kjitar");
      const std::string bytes = planted_bytes(a, "one");
      w.add(a, bytes);
      w.add(a, planted_bytes(a, "two"));
      w.commit();
    }
    DiskCache cache(options_for(tmp / "cache"));
    CHECK_THROWS_WITH_AS(cache.import_from(tmp / "dup.kjitar"), doctest::Contains("appears twice"),
                         std::runtime_error);
    CHECK_FALSE(cache.get(a));
  }
}

TEST_CASE("export onto a full disk leaves no temp file, and says why") {
  TempDir tmp;
  {
    DiskCache c(options_for(tmp / "cache"));
    REQUIRE(c.put(key_of("k"), entry_of(std::string(4096, 'p'))));
  }
  for (rlim_t limit : {rlim_t{0}, rlim_t{100}}) {  // the header's write fails; a later one does
    CAPTURE(limit);
    CHECK(in_child([&] {
            rlimit lim{limit, limit};
            if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return 10;
            ::signal(SIGXFSZ, SIG_IGN);  // write() fails with EFBIG, as on a full disk
            DiskCache cache(options_for(tmp / "cache", Mode::ReadOnly));
            try {
              cache.export_to(tmp / "out.kjitar");
              return 1;
            } catch (const std::runtime_error& e) {
              return std::string(e.what()).find("File too large") != std::string::npos ? 0 : 2;
            }
          }) == 0);
    CHECK(count_files(tmp.path(), "out.kjitar") == 0);
  }
}

TEST_CASE("a failed write names the path and the OS's reason") {
  TempDir tmp;
  CHECK(in_child([&] {
          rlimit lim{100, 100};
          if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return 10;
          ::signal(SIGXFSZ, SIG_IGN);
          DiskCache cache(options_for(tmp.path()));
          if (cache.put(key_of("k"), entry_of(std::string(4096, 'p')))) return 1;
          const std::string why = cache.last_error();
          if (why.find(tmp.path() + "/v1/") == std::string::npos) return 2;
          return why.find("File too large") != std::string::npos ? 0 : 3;
        }) == 0);
}

TEST_CASE("a team's shared folder is an explicit opt-in by group") {
  TempDir tmp;
  Options o = options_for(tmp / "team");
  o.shared_group = "kjit-no-such-group-xyz";
  DiskCache none(o);
  CHECK(none.mode() == Mode::Off);
  CHECK(none.refused_reason().find("no such group") != std::string::npos);
  struct group* g = ::getgrgid(::getegid());
  REQUIRE(g);
  o.shared_group = g->gr_name;
  DiskCache team(o);
  REQUIRE(team.mode() == Mode::ReadWrite);
  REQUIRE(team.put(key_of("k"), entry_of("v")));
  CHECK((mode_of(tmp / "team") & 07777) == 02770);
  CHECK((mode_of(entry_path(tmp / "team", key_of("k"))) & 07777) == 0660);
  CHECK(team.get(key_of("k")));
}

TEST_CASE("the cache's warnings escape control bytes from labels and paths") {
  TempDir tmp;
  const std::string log = tmp / "stderr";
  CHECK(in_child([&] {
          const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
          if (fd < 0 || ::dup2(fd, STDERR_FILENO) < 0) return 20;
          Options o = options_for(tmp / "cache");
          o.max_bytes = 1024;  // the entry is over half of it: warned about by its label
          DiskCache cache(o);
          return cache.put(key_of("k"), entry_of(std::string(4096, 'p'), "\x1b[2J\nFAKE LINE")) ? 1
                                                                                                : 0;
        }) == 0);
  const std::string warning = read_file(log);
  CHECK(warning.find("not caching \\x1b[2J\\x0aFAKE LINE") != std::string::npos);
  CHECK(warning.find('\x1b') == std::string::npos);
  CHECK(std::count(warning.begin(), warning.end(), '\n') == 1);
}

// Found by review: another user's symlink on the way to the cache folder let them choose where a
// root process made (and chmod'ed) its cache; kjit follows only links of its user or root.
TEST_CASE("a symlink on the cache path is followed only when it is the user's or root's") {
  TempDir tmp;
  const std::string target = tmp / "target", link = tmp / "link";
  REQUIRE(::mkdir(target.c_str(), 0755) == 0);
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
  {
    DiskCache mine(options_for(link + "/cache"));
    CHECK(mine.mode() == Mode::ReadWrite);
  }
  CHECK((mode_of(target) & 07777) == 0755);  // a folder kjit did not make keeps its mode
  if (::geteuid() == 0) {
    REQUIRE(::lchown(link.c_str(), 65534, 65534) == 0);
    DiskCache theirs(options_for(link + "/cache2"));
    CHECK(theirs.mode() == Mode::Off);
    CHECK(theirs.refused_reason().find(link + " is a symbolic link that is owned by nobody") !=
          std::string::npos);
    CHECK_FALSE(exists(target + "/cache2"));
  }
}

TEST_CASE("an existing cache folder keeps its mode; only folders kjit makes get 0700") {
  TempDir tmp;
  const std::string dir = tmp / "cache";
  REQUIRE(::mkdir(dir.c_str(), 0750) == 0);
  REQUIRE(::chmod(dir.c_str(), 0750) == 0);
  DiskCache cache(options_for(dir));
  REQUIRE(cache.put(key_of("k"), entry_of("v")));
  CHECK((mode_of(dir) & 07777) == 0750);
  CHECK((mode_of(dir + "/v1") & 07777) == 0700);
}

// Found by review: the age pass moved each kept record onto itself (empty name), so a size target
// given with it deleted nothing.
TEST_CASE("prune with an age and a size enforces both") {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  for (int i = 0; i < 5; ++i) REQUIRE(cache.put(key_of("e" + std::to_string(i)), entry_of("v")));
  CHECK(cache.prune(uint64_t{0}, std::chrono::seconds(3600)) == 5);
  CHECK(cache.list().empty());
}

TEST_CASE("an exported archive is 0644 whatever the umask") {
  TempDir tmp;
  {
    DiskCache c(options_for(tmp / "cache"));
    REQUIRE(c.put(key_of("k"), entry_of("v")));
  }
  Umask open_umask(0);
  DiskCache cache(options_for(tmp / "cache", Mode::ReadOnly));
  REQUIRE(cache.export_to(tmp / "a.kjitar") == 1);
  CHECK((mode_of(tmp / "a.kjitar") & 07777) == 0644);
}

// Found by review: lock files took their mode from the umask, so in a shared cache another
// member could not open evict.lock and never trimmed.
TEST_CASE("a shared cache's lock files are the team's to open, whatever the umask") {
  TempDir tmp;
  Umask strict(077);
  Options o = options_for(tmp / "team");
  struct group* g = ::getgrgid(::getegid());
  REQUIRE(g);
  o.shared_group = g->gr_name;
  DiskCache team(o);
  REQUIRE(team.mode() == Mode::ReadWrite);
  bool made = false;
  team.get_or_make(
      key_of("k"), [] { return entry_of("v"); }, &made);
  team.prune(std::nullopt, std::nullopt);  // takes evict.lock, made now
  CHECK((mode_of(tmp / "team/v1/evict.lock") & 07777) == 0660);
  CHECK((mode_of(tmp / "team/v1/locks") & 07777) == 02770);
}

namespace {

// A fleet key's check, as a shared or remote tier would plug in (a keyed SHA-256 here; a real
// tier uses HMAC-SHA256). The signature covers the key, the label and the payload.
class SignedBy : public EntryCheck {
 public:
  explicit SignedBy(std::string secret) : secret_(std::move(secret)) {}
  std::string problem(const Key& key, const Entry& e) const override {
    const std::string* sig = e.find("signature");
    if (!sig) return "not signed";
    return *sig == sign(key, e) ? "" : "bad signature";
  }
  void seal(const Key& key, Entry* e) const override {
    e->metadata.erase(std::remove_if(e->metadata.begin(), e->metadata.end(),
                                     [](const auto& kv) { return kv.first == "signature"; }),
                      e->metadata.end());
    e->metadata.emplace_back("signature", sign(key, *e));
  }

 private:
  std::string sign(const Key& key, const Entry& e) const {
    const auto d = sha256(secret_ + key.hex() + '\0' + e.label + '\0' + e.payload);
    return std::string(reinterpret_cast<const char*>(d.data()), d.size());
  }
  std::string secret_;
};

}  // namespace

TEST_CASE("an EntryCheck (the signed tier's hook) seals every write and vets every read") {
  TempDir tmp;
  Options signed_opts = options_for(tmp / "cache");
  signed_opts.check = std::make_shared<SignedBy>("fleet key");
  const Key a = key_of("a"), b = key_of("b");
  {
    DiskCache c(signed_opts);
    REQUIRE(c.put(a, entry_of("signed")));
    DiskCache plain(options_for(tmp / "cache"));  // the trust policy alone: no signature written
    REQUIRE(plain.put(b, entry_of("unsigned")));
  }
  DiskCache c(signed_opts);
  CHECK(c.get(a)->payload == "signed");
  CHECK_FALSE(c.get(b));  // an entry the fleet key did not sign is a miss
  CHECK(c.stats().untrusted == 1);
  int bad = 0;
  for (const EntryInfo& e : c.list(true)) bad += !e.valid && e.error == "not signed";
  CHECK(bad == 1);
  CHECK(c.export_to(tmp / "a.kjitar") == 1);  // only what get() would serve
  Options other_key = options_for(tmp / "other");
  other_key.check = std::make_shared<SignedBy>("another fleet");
  DiskCache o(other_key);
  CHECK_THROWS_WITH_AS(o.import_from(tmp / "a.kjitar"), doctest::Contains("bad signature"),
                       std::runtime_error);
  CHECK_FALSE(o.get(a));
  bool made = false;  // a refused entry is recompiled and replaced by a sealed one
  c.get_or_make(
      b, [] { return entry_of("remade"); }, &made);
  CHECK(made);
  CHECK(c.get(b)->payload == "remade");
}
