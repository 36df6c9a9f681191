#include <doctest/doctest.h>

#include <unistd.h>

#include "../../cache/src/cache_dir.hpp"  // private: private_dir
#include "cache/test_util.hpp"

using namespace kjit::cache;
using kjit_test::ScopedEnv;

namespace {

// Clears every variable the cache reads, so each case starts from the same environment.
struct CleanEnv {
  ScopedEnv dir{"KJIT_CACHE_DIR", nullptr}, mode{"KJIT_CACHE", nullptr},
      size{"KJIT_CACHE_MAX_SIZE", nullptr}, xdg{"XDG_CACHE_HOME", nullptr};
};

}  // namespace

TEST_CASE("cache folder resolution order") {
  CleanEnv clean;
  ScopedEnv home("HOME", "/home/someone");
  CHECK(Options::from_env().dir == "/home/someone/.cache/kjit");
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    CHECK(Options::from_env().dir == "/xdg/kjit");
    ScopedEnv relative("XDG_CACHE_HOME", "relative/path");  // invalid per the XDG spec
    CHECK(Options::from_env().dir == "/home/someone/.cache/kjit");
    ScopedEnv dir("KJIT_CACHE_DIR", "/explicit");
    CHECK(Options::from_env().dir == "/explicit");
  }
  CHECK(Options::default_dir() == "/home/someone/.cache/kjit");
}

TEST_CASE("cache folder resolution works with HOME unset") {
  CleanEnv clean;
  ScopedEnv home("HOME", nullptr);
  std::string dir = Options::from_env().dir;
  CHECK_FALSE(dir.empty());
  CHECK(dir[0] == '/');
  // The passwd entry's home if there is one, else a per-user folder under /tmp.
  const std::string suffix = "/.cache/kjit";
  bool from_passwd = dir.size() > suffix.size() && dir.substr(dir.size() - suffix.size()) == suffix;
  const std::string tmp = "/tmp/kjit-cache-" + std::to_string(getuid());
  CHECK((from_passwd || dir == tmp || dir.rfind(tmp + "-", 0) == 0));
  ScopedEnv empty_home("HOME", "");
  CHECK(Options::from_env().dir == dir);
}

TEST_CASE("KJIT_CACHE selects the mode") {
  CleanEnv clean;
  CHECK(Options::from_env().mode == Mode::ReadWrite);
  {
    ScopedEnv m("KJIT_CACHE", "off");
    CHECK(Options::from_env().mode == Mode::Off);
  }
  {
    ScopedEnv m("KJIT_CACHE", "ro");
    CHECK(Options::from_env().mode == Mode::ReadOnly);
  }
  {
    ScopedEnv m("KJIT_CACHE", "rw");
    CHECK(Options::from_env().mode == Mode::ReadWrite);
  }
  {
    ScopedEnv m("KJIT_CACHE", "sometimes");  // warns, keeps the default
    CHECK(Options::from_env().mode == Mode::ReadWrite);
  }
}

TEST_CASE("KJIT_CACHE_MAX_SIZE accepts bytes and K/M/G/T suffixes") {
  CleanEnv clean;
  const uint64_t def = Options().max_bytes;
  CHECK(Options::from_env().max_bytes == def);
  struct Case {
    const char* text;
    uint64_t bytes;
  };
  for (Case c : {Case{"12345", 12345}, Case{"64K", 64ull << 10}, Case{"64k", 64ull << 10},
                 Case{"512M", 512ull << 20}, Case{"2G", 2ull << 30}, Case{"2GB", 2ull << 30},
                 Case{"2GiB", 2ull << 30}, Case{"1T", 1ull << 40}, Case{"0", 0}}) {
    ScopedEnv s("KJIT_CACHE_MAX_SIZE", c.text);
    CHECK_MESSAGE(Options::from_env().max_bytes == c.bytes, c.text);
  }
  for (const char* bad :
       {"", "abc", "-5", "12Q", "1.5G", "G", "99999999999999999999", "17179869184G", "5 M"}) {
    ScopedEnv s("KJIT_CACHE_MAX_SIZE", bad);
    CHECK_MESSAGE(Options::from_env().max_bytes == def, bad);
  }
}
