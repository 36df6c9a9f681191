// kjit-cache, run as a process: list/stats/verify JSON, corruption detection, export/import
// round trip, prune and clear.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <tuple>

#include "kjit/cache/disk_cache.hpp"
#include "test_util.hpp"
#include "tool_runner.hpp"

using kjit_test::run_tool;
using kjit_test::TempDir;
using nlohmann::json;

namespace {

// A cache filled by kjit-precompile (real kernels): the default manifest plus a small problem,
// for sm_80 and sm_90.
std::string precompiled_cache(const TempDir& dir) {
  const std::string cache = dir.path + "/cache";
  auto r = run_tool("kjit-precompile",
                    "-p 'group_norm f32 nchw 8x256x24x24 g=32 silu' "
                    "-p 'group_norm bf16 nchw 2x64x5x5 g=8' -a sm_80,sm_90 -j2 -q --cache-dir " +
                        cache,
                    dir.path);
  INFO(r.err);
  REQUIRE(r.rc == 0);
  return cache;
}

// Synthetic entries (kind "tune", no compile needed) of `bytes` payload each.
std::vector<kjit::cache::Key> put_entries(const std::string& cache, int n, size_t bytes) {
  kjit::cache::Options o;
  o.dir = cache;
  o.max_bytes = 0;
  kjit::cache::DiskCache c(o);
  std::vector<kjit::cache::Key> keys;
  for (int i = 0; i < n; ++i) {
    kjit::cache::KeyBuilder kb;
    kb.add("test-entry", static_cast<int64_t>(i));
    keys.push_back(kb.finish());
    kjit::cache::Entry e;
    e.label = "tune record " + std::to_string(i);
    e.metadata = {{"kind", "tune"}};
    e.payload = std::string(bytes, static_cast<char>('a' + i % 26));
    REQUIRE(c.put(keys.back(), e));
  }
  return keys;
}

std::string entry_path(const std::string& cache, const std::string& key_hex) {
  return cache + "/v1/" + key_hex.substr(0, 2) + "/" + key_hex + ".kjit";
}

void set_mtime(const std::string& path, time_t t) {
  struct timeval tv[2] = {{t, 0}, {t, 0}};
  REQUIRE(::utimes(path.c_str(), tv) == 0);
}

}  // namespace

TEST_CASE("kjit-cache list, stats and verify --json describe a precompiled cache") {
  TempDir dir;
  const std::string cache = precompiled_cache(dir);

  auto list = run_tool("kjit-cache", "list --json --cache-dir " + cache, dir.path);
  REQUIRE(list.rc == 0);
  const json l = list.json();
  REQUIRE(l.is_array());
  REQUIRE(l.size() >= 4);  // 2 problems x 2 archs
  std::set<std::string> archs;
  for (const json& e : l) {
    CHECK(e["key"].get<std::string>().size() == 64);
    CHECK(e["kind"] == "kernel");
    CHECK(e["valid"] == true);
    CHECK(e["size"].get<uint64_t>() > 0);
    CHECK(e["age_s"].get<int64_t>() >= 0);
    CHECK(e["instantiation"].get<std::string>().rfind("kjit::gn_fwd<", 0) == 0);
    CHECK(e["header"] == "kjit/group_norm.cuh");
    CHECK(e["label"].get<std::string>().find(e["instantiation"].get<std::string>()) == 0);
    archs.insert(e["arch"].get<std::string>());
  }
  CHECK(archs == std::set<std::string>{"sm_80", "sm_90"});

  auto stats = run_tool("kjit-cache", "stats --json --cache-dir " + cache, dir.path);
  REQUIRE(stats.rc == 0);
  const json s = stats.json();
  CHECK(s["entries"] == l.size());
  CHECK(s["kinds"]["kernel"] == l.size());
  CHECK(s["invalid"] == 0);
  CHECK(s["exists"] == true);
  uint64_t bytes = 0;
  for (const json& e : l) bytes += e["size"].get<uint64_t>();
  CHECK(s["bytes"] == bytes);

  // Plain forms, and --cache-dir after the subcommand as well as before it.
  auto plain = run_tool("kjit-cache", "--cache-dir " + cache + " list", dir.path);
  REQUIRE(plain.rc == 0);
  CHECK(plain.out.find("KEY") != std::string::npos);
  CHECK(plain.out.find(l[0]["key"].get<std::string>().substr(0, 16)) != std::string::npos);
  CHECK(plain.out.find(std::to_string(l.size()) + " entries") != std::string::npos);
  auto pstats = run_tool("kjit-cache", "stats --cache-dir " + cache, dir.path);
  CHECK(pstats.rc == 0);
  CHECK(pstats.out.find("sm_90") != std::string::npos);

  // Read-only commands leave the LRU clock alone.
  const std::string some = entry_path(cache, l[0]["key"].get<std::string>());
  set_mtime(some, std::time(nullptr) - 3 * 86400);
  run_tool("kjit-cache", "list --cache-dir " + cache, dir.path);
  run_tool("kjit-cache", "verify --cache-dir " + cache, dir.path);
  struct stat st;
  REQUIRE(::stat(some.c_str(), &st) == 0);
  CHECK(st.st_mtime <= std::time(nullptr) - 3 * 86400 + 1);
}

TEST_CASE("kjit-cache verify passes, then names the entry whose bytes were overwritten") {
  TempDir dir;
  const std::string cache = precompiled_cache(dir);
  auto ok = run_tool("kjit-cache", "verify --json --cache-dir " + cache, dir.path);
  REQUIRE(ok.rc == 0);
  const json v = ok.json();
  CHECK(v["bad"].empty());
  CHECK(v["ok"] == v["entries"]);
  const size_t n = v["entries"].get<size_t>();
  REQUIRE(n >= 2);

  auto list = run_tool("kjit-cache", "list --json --cache-dir " + cache, dir.path);
  const std::string victim = list.json()[1]["key"].get<std::string>();
  const std::string path = entry_path(cache, victim);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(f);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(path) / 2));
    f.write("\x01\x02\x03", 3);
  }
  auto bad = run_tool("kjit-cache", "verify --cache-dir " + cache, dir.path);
  CHECK(bad.rc != 0);
  CHECK(bad.out.find(victim) != std::string::npos);
  CHECK(bad.out.find("1 bad") != std::string::npos);
  auto bad_json = run_tool("kjit-cache", "verify --json --cache-dir " + cache, dir.path);
  CHECK(bad_json.rc != 0);
  const json b = bad_json.json();
  REQUIRE(b["bad"].size() == 1);
  CHECK(b["bad"][0]["key"] == victim);
  CHECK(b["ok"] == n - 1);

  // Precompile notices and recompiles exactly that one; verify passes again.
  auto re = run_tool("kjit-precompile",
                     "-p 'group_norm f32 nchw 8x256x24x24 g=32 silu' "
                     "-p 'group_norm bf16 nchw 2x64x5x5 g=8' -a sm_80,sm_90 --json --cache-dir " +
                         cache,
                     dir.path);
  REQUIRE(re.rc == 0);
  CHECK(re.json()["compiled"] == 1);
  CHECK(run_tool("kjit-cache", "verify --cache-dir " + cache, dir.path).rc == 0);
}

TEST_CASE("kjit-cache export / import round trip into a fresh folder") {
  TempDir dir;
  const std::string cache = precompiled_cache(dir);
  const std::string archive = dir.path + "/warm.kjitar";
  auto ex = run_tool("kjit-cache", "export " + archive + " --cache-dir " + cache, dir.path);
  INFO(ex.err);
  REQUIRE(ex.rc == 0);
  const std::string fresh = dir.path + "/fresh";
  auto im = run_tool("kjit-cache", "--cache-dir " + fresh + " import " + archive, dir.path);
  INFO(im.err);
  REQUIRE(im.rc == 0);

  auto keys = [&](const std::string& c) {
    json l = run_tool("kjit-cache", "list --json --cache-dir " + c, dir.path).json();
    std::vector<std::tuple<std::string, std::string, std::string, uint64_t>> out;
    for (const json& e : l)
      out.emplace_back(e["key"], e["label"], e["arch"], e["size"].get<uint64_t>());
    return out;
  };
  const auto a = keys(cache), b = keys(fresh);
  CHECK(a.size() >= 4);
  CHECK(a == b);
  CHECK(run_tool("kjit-cache", "verify --cache-dir " + fresh, dir.path).rc == 0);

  // A damaged archive imports nothing and says why.
  std::string bytes = kjit_test::read_text(archive);
  bytes[bytes.size() / 2] ^= 0x5a;
  kjit_test::write_text(archive, bytes);
  const std::string other = dir.path + "/other";
  auto bad = run_tool("kjit-cache", "import " + archive + " --cache-dir " + other, dir.path);
  CHECK(bad.rc != 0);
  CHECK(bad.err.find("kjit-cache") != std::string::npos);
  CHECK(run_tool("kjit-cache", "stats --json --cache-dir " + other, dir.path).json()["entries"] ==
        0);
  auto none =
      run_tool("kjit-cache", "import " + dir.path + "/missing --cache-dir " + other, dir.path);
  CHECK(none.rc != 0);
  CHECK(none.err.find("missing") != std::string::npos);
}

TEST_CASE("kjit-cache prune --max-size and --older-than, then clear") {
  TempDir dir;
  const std::string cache = dir.path + "/cache";
  const auto keys = put_entries(cache, 10, 10000);
  // Entries 0..4 were last used 40, 39, 38, 20 and 19 days ago; 5..9 just now.
  const int days[] = {40, 39, 38, 20, 19};
  for (int i = 0; i < 5; ++i)
    set_mtime(entry_path(cache, keys[static_cast<size_t>(i)].hex()),
              std::time(nullptr) - days[i] * 86400);
  auto stats = [&] {
    return run_tool("kjit-cache", "stats --json --cache-dir " + cache, dir.path).json();
  };
  const json before = stats();
  CHECK(before["entries"] == 10);
  CHECK(before["kinds"]["tune"] == 10);

  auto older = run_tool("kjit-cache", "prune --older-than 30d --cache-dir " + cache, dir.path);
  INFO(older.err);
  REQUIRE(older.rc == 0);
  const json mid = stats();
  CHECK(mid["entries"] == 7);  // 40, 39 and 38 days old; 20 and 19 stay

  auto size = run_tool("kjit-cache", "prune --max-size 50K --cache-dir " + cache, dir.path);
  REQUIRE(size.rc == 0);
  const json after = stats();
  CHECK(after["bytes"].get<uint64_t>() <= 50 * 1024);
  CHECK(after["bytes"].get<uint64_t>() < mid["bytes"].get<uint64_t>());
  CHECK(after["entries"].get<int>() >= 4);
  // The least recently used went first: the two old ones that remained are gone.
  for (int i = 3; i < 5; ++i)
    CHECK_FALSE(std::filesystem::exists(entry_path(cache, keys[static_cast<size_t>(i)].hex())));
  CHECK(std::filesystem::exists(entry_path(cache, keys[9].hex())));

  // Bad values and a missing limit are usage errors that touch nothing.
  CHECK(run_tool("kjit-cache", "prune --max-size 12Q --cache-dir " + cache, dir.path).rc == 2);
  CHECK(run_tool("kjit-cache", "prune --older-than soon --cache-dir " + cache, dir.path).rc == 2);
  CHECK(run_tool("kjit-cache", "prune --cache-dir " + cache, dir.path).rc == 2);
  CHECK(stats()["entries"] == after["entries"]);

  auto clear = run_tool("kjit-cache", "clear --cache-dir " + cache, dir.path);
  REQUIRE(clear.rc == 0);
  CHECK(stats()["entries"] == 0);
  CHECK(run_tool("kjit-cache", "list --json --cache-dir " + cache, dir.path).json().empty());
}

TEST_CASE("kjit-cache usage errors") {
  TempDir dir;
  CHECK(run_tool("kjit-cache", "", dir.path).rc != 0);
  CHECK(run_tool("kjit-cache", "frobnicate", dir.path).rc != 0);
  CHECK(run_tool("kjit-cache", "export", dir.path).rc != 0);  // FILE is required
  auto ex =
      run_tool("kjit-cache", "export " + dir.path + "/no/such/dir/a.kjitar --cache-dir " + dir.path,
               dir.path);
  CHECK(ex.rc == 1);
  CHECK_FALSE(ex.err.empty());
  CHECK(run_tool("kjit-cache", "stats --cache-dir ''", dir.path).rc == 2);  // not the default
  // A file at the cache folder's name, or above it, is not an empty cache, for any command.
  const std::string file = dir.path + "/a-file";
  { std::ofstream(file) << "x"; }
  for (const std::string& at : {file, file + "/below"}) {
    for (const char* cmd : {"stats", "list", "verify", "export ", "clear"}) {
      const std::string args =
          std::string(cmd) + (std::string(cmd) == "export " ? dir.path + "/e.kjitar" : "");
      auto r = run_tool("kjit-cache", args + " --cache-dir " + at, dir.path);
      CAPTURE(cmd);
      CAPTURE(at);
      CHECK(r.rc == 1);
      CHECK(r.err ==
            "kjit-cache: cache folder " + at + " cannot be used: " + file + ": not a directory\n");
    }
  }
  CHECK_FALSE(std::filesystem::exists(dir.path + "/e.kjitar"));
  // export writes beside FILE and renames: a pipe there would become a plain file.
  const std::string fifo = dir.path + "/pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto to_fifo = run_tool("kjit-cache", "export " + fifo + " --cache-dir " + dir.path, dir.path);
  CHECK(to_fifo.rc == 2);
  CHECK(to_fifo.err.find("not a regular file") != std::string::npos);
  struct stat st;
  REQUIRE(::lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  if (std::filesystem::exists("/dev/full")) {
    auto full =
        run_tool("kjit-cache", "stats --json --cache-dir " + dir.path + " >/dev/full", dir.path);
    CHECK(full.rc == 1);
    CHECK(full.err.find("cannot write the output") != std::string::npos);
  }
  auto help = run_tool("kjit-cache", "--help", dir.path);
  CHECK(help.rc == 0);
  CHECK(help.out.find("verify") != std::string::npos);
}

TEST_CASE("kjit-cache --json output survives a folder name that is not UTF-8") {
  TempDir dir;
  const std::string cache = dir.path + "/caf\xe9";
  for (const char* cmd : {"stats", "list", "verify"}) {
    CAPTURE(cmd);
    auto r =
        run_tool("kjit-cache", std::string(cmd) + " --json --cache-dir '" + cache + "'", dir.path);
    CHECK(r.rc == 0);
    CHECK_NOTHROW(r.json());
  }
}

// The tools never work on a folder whose code the runtime would refuse to run: another user could
// have planted entries there (docs/API.md, "Trust").
TEST_CASE("kjit-cache and kjit-precompile refuse a cache folder that others can write") {
  TempDir dir;
  const std::string cache = dir.path + "/open";
  REQUIRE(::mkdir(cache.c_str(), 0777) == 0);
  REQUIRE(::chmod(cache.c_str(), 0777) == 0);
  put_entries(dir.path + "/mine", 1, 64);  // a trusted folder next to it still works
  for (const std::string& cmd :
       std::vector<std::string>{"stats", "list", "verify", "clear", "export " + dir.path + "/a"}) {
    CAPTURE(cmd);
    auto r = run_tool("kjit-cache", cmd + " --cache-dir " + cache, dir.path);
    CHECK(r.rc == 1);
    CHECK(r.err.find(cache + " is writable by every user (mode 0777)") != std::string::npos);
    CHECK(run_tool("kjit-cache", cmd + " --cache-dir " + dir.path + "/mine", dir.path).rc == 0);
  }
  auto p =
      run_tool("kjit-precompile",
               "-p 'group_norm f32 nchw 2x64x8x8 g=8' -a sm_90 --cache-dir " + cache, dir.path);
  CHECK(p.rc == 1);
  CHECK(p.err.find("kjit-precompile: cache folder " + cache + " is not used") != std::string::npos);
  CHECK(std::filesystem::is_empty(cache));  // nothing written into it
}
