// What needs no server: URL parsing, the fleet key and its file, signing and verifying values.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "../../cache/src/entry_format.hpp"  // private: values are built and damaged directly
#include "../../cache/src/remote_value.hpp"
#include "cache/test_util.hpp"
#include "kjit/cache/remote_cache.hpp"
#include "kjit/compiler.hpp"
#include "kjit/error.hpp"

using namespace kjit::cache;
using kjit_test::entry_of;
using kjit_test::key_of;
using kjit_test::same_entry;

namespace {

const std::string kKey(40, 'k');

std::string parse_error(const std::string& url) {
  try {
    RemoteUrl::parse(url);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

std::string key_error(const RemoteOptions& o) {
  try {
    detail::fleet_key(o);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("remote URLs: every part parsed, every malformed part named, the password never shown") {
  RemoteUrl u = RemoteUrl::parse("redis://127.0.0.1:6380/3");
  CHECK(u.host == "127.0.0.1");
  CHECK(u.port == 6380);
  CHECK(u.db == 3);
  CHECK(u.password.empty());
  u = RemoteUrl::parse("redis://cache.internal");
  CHECK(u.port == 6379);
  CHECK(u.db == 0);
  u = RemoteUrl::parse("redis://fleet:p%40ss%3Aword@[::1]:7000/");
  CHECK(u.user == "fleet");
  CHECK(u.password == "p@ss:word");
  CHECK(u.host == "::1");
  CHECK(u.port == 7000);
  CHECK(u.redacted() == "redis://fleet:***@[::1]:7000/0");
  CHECK(RemoteUrl::parse("redis://:s3cret@h:1/2").redacted() == "redis://:***@h:1/2");

  CHECK(parse_error("http://h:1").find("the scheme is not redis://") != std::string::npos);
  CHECK(parse_error("h:1").find("the scheme is not redis://") != std::string::npos);
  CHECK(parse_error("rediss://h:1").find("TLS") != std::string::npos);
  CHECK(parse_error("redis://h:0").find("the port is not a number from 1") != std::string::npos);
  CHECK(parse_error("redis://h:65536").find("the port is not") != std::string::npos);
  CHECK(parse_error("redis://h:http").find("the port is not") != std::string::npos);
  CHECK(parse_error("redis://h:").find("the port after ':' is empty") != std::string::npos);
  CHECK(parse_error("redis://h:1/x").find("the database after '/' is not") != std::string::npos);
  CHECK(parse_error("redis://:1").find("host is empty") != std::string::npos);
  CHECK(parse_error("redis://h$t:1").find("the host holds a character") != std::string::npos);
  CHECK(parse_error("redis://[::1:1").find("']'") != std::string::npos);
  CHECK(parse_error("redis://user@h:1").find("no ':'") != std::string::npos);
  CHECK(parse_error("redis://:@h:1").find("password before '@' is empty") != std::string::npos);
  CHECK(parse_error("redis://:pw@h:1/0@x").find("the password holds one of") != std::string::npos);
  // Mistyped URLs that put the password where another part is read: that part is named, and
  // nothing of the URL is quoted.
  const struct {
    const char* url;
    const char* part;
  } moved[] = {
      {"redis://default:secret", "the port is not"},            // no '@host': a host and a port
      {"redis://default:12345678", "the port is not"},          // a password of digits
      {"redis://h:1/0?password=secret", "the database after"},  // a query redis-py reads
      {"redis://secret$pw:6379", "the host holds"},             // no ':' before the password
      {"secret://h:1", "the scheme is not"},
  };
  for (const auto& m : moved) {
    const std::string why = parse_error(m.url);
    CHECK_MESSAGE(why.find(m.part) != std::string::npos, why);
    CHECK_MESSAGE(why.find("secret") == std::string::npos, why);
    CHECK_MESSAGE(why.find("12345678") == std::string::npos, why);
  }
  for (const char* bad :
       {"redis://:top%zzsecret@h:1", "redis://:top\nsecret@h:1", "redis://:top/secret@h:1"}) {
    const std::string why = parse_error(bad);
    CHECK_MESSAGE(why.find("the password holds") != std::string::npos, why);
    CHECK_MESSAGE(why.find("secret") == std::string::npos, why);  // never quoted
  }
}

TEST_CASE("the fleet key: required, at least 32 bytes, a key file checked like the cache folder") {
  RemoteOptions o;
  o.url = "redis://127.0.0.1:1";
  CHECK(key_error(o).find("no fleet key") != std::string::npos);
  o.key = "short";
  CHECK(key_error(o).find("at least 32") != std::string::npos);
  o.key = kKey;
  CHECK(detail::fleet_key(o) == kKey);

  kjit_test::TempDir dir;
  const std::string file = dir / "fleet.key";
  kjit_test::write_file(file, kKey + "\n");
  ::chmod(file.c_str(), 0600);
  o.key.clear();
  o.key_file = file;
  CHECK(detail::fleet_key(o) == kKey);  // the trailing newline is not part of it
  ::chmod(file.c_str(), 0640);
  const std::string why = key_error(o);
  CHECK(why.find("read or written by others (mode 0640)") != std::string::npos);
  CHECK(why.find(kKey) == std::string::npos);  // the key is never quoted
  ::chmod(file.c_str(), 0600);
  const std::string link = dir / "link.key";
  REQUIRE(::symlink(file.c_str(), link.c_str()) == 0);
  o.key_file = link;
  CHECK(key_error(o).find("cannot open it") != std::string::npos);  // O_NOFOLLOW
  o.key_file = dir.path();
  CHECK(key_error(o).find("not a regular file") != std::string::npos);
  o.key_file = dir / "missing.key";
  CHECK(key_error(o).find("No such file") != std::string::npos);
}

TEST_CASE("the remote tier's numbers from the environment: whole milliseconds, else a problem") {
  ::setenv("KJIT_REMOTE_CACHE_TIMEOUT_MS", "120", 1);
  ::setenv("KJIT_REMOTE_CACHE_LEASE_MS", "0", 1);
  RemoteOptions o = RemoteOptions::from_env();
  CHECK(o.op_timeout.count() == 120);
  CHECK(o.lease.count() == 0);
  CHECK(o.env_problem.empty());
  for (const char* bad : {"0", "-5", "5ms", "600001", ""}) {
    CAPTURE(bad);
    ::setenv("KJIT_REMOTE_CACHE_TIMEOUT_MS", bad, 1);
    o = RemoteOptions::from_env();
    if (*bad == '\0') {
      CHECK(o.env_problem.empty());  // unset and empty mean the default
    } else {
      CHECK(o.env_problem.find("KJIT_REMOTE_CACHE_TIMEOUT_MS='") == 0);
    }
  }
  ::unsetenv("KJIT_REMOTE_CACHE_TIMEOUT_MS");
  ::unsetenv("KJIT_REMOTE_CACHE_LEASE_MS");
}

TEST_CASE("a runtime's compiler refuses a remote tier it cannot use, naming remote_cache") {
  kjit_test::TempDir dir;
  Options o = kjit_test::options_for(dir.path());
  o.remote.url = "redis://127.0.0.1:1";  // no key
  try {
    kjit::Compiler c(o);
    FAIL("no error for a remote tier without a key");
  } catch (const kjit::Error& e) {
    CHECK(e.code() == kjit::Errc::InvalidArgument);
    CHECK(e.field() == "remote_cache");
  }
  o.remote.key = kKey;
  o.remote.url = "redis://127.0.0.1:99999";
  CHECK_THROWS_AS(kjit::Compiler{o}, kjit::Error);
  o.remote.url = "redis://127.0.0.1:1";
  o.remote.env_problem = "KJIT_REMOTE_CACHE_TIMEOUT_MS='x' is not a whole number";
  CHECK_THROWS_AS(kjit::Compiler{o}, kjit::Error);
  o.remote.env_problem.clear();
  o.remote.op_timeout = std::chrono::milliseconds(0);  // would block without a timeout
  CHECK_THROWS_AS(kjit::Compiler{o}, kjit::Error);
  o.remote.op_timeout = std::chrono::milliseconds(50);
  o.remote.failures_to_open = 0;
  CHECK_THROWS_AS(kjit::Compiler{o}, kjit::Error);
  o.remote.failures_to_open = 3;
  o.remote.max_value_bytes = UINT64_MAX;  // "no limit" would make every GETRANGE fail
  CHECK_THROWS_AS(kjit::Compiler{o}, kjit::Error);
  o.remote.max_value_bytes = 64ull << 20;
  kjit::Compiler fine(o);  // connects lazily: nothing listens on port 1, and nothing is asked
  CHECK(fine.stats().remote_enabled);
  o.mode = Mode::Off;  // KJIT_CACHE=off: no cache, no tier, nothing checked
  kjit::Compiler off(o);
  CHECK_FALSE(off.stats().remote_enabled);
}

TEST_CASE("signed values: verified before parsing; any change, other key or other name refused") {
  const Key k = key_of("kernel");
  const Entry e = entry_of(std::string(1000, 'p'));
  const std::string v = detail::seal_value(kKey, k, e);
  Entry out;
  REQUIRE(detail::open_value(kKey, k, v, &out) == detail::ValueStatus::Ok);
  CHECK(same_entry(out, e));

  using S = detail::ValueStatus;
  CHECK(detail::open_value(std::string(40, 'x'), k, v, &out) == S::BadSignature);
  CHECK(detail::open_value(kKey, key_of("other"), v, &out) == S::WrongKey);
  CHECK(detail::open_value(kKey, k, v.substr(0, 20), &out) == S::TooShort);
  CHECK(detail::open_value(kKey, k, v.substr(0, v.size() - 1), &out) == S::BadSignature);
  CHECK(detail::open_value(kKey, k, detail::serialize_entry(k, e), &out) == S::Unsigned);
  for (int i = 0; i < 64; ++i) {  // one bit anywhere: header, signature or body
    std::string bad = v;
    const size_t at = static_cast<size_t>(i) * 7919 % v.size();
    bad[at] = static_cast<char>(bad[at] ^ (1 << (i % 8)));
    CHECK(detail::open_value(kKey, k, bad, &out) != S::Ok);
  }
}
