// RemoteOptions from the environment, and the fleet key from its variable or file.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "kjit/cache/remote_cache.hpp"
#include "posix_io.hpp"
#include "remote_value.hpp"

namespace kjit::cache {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// A whole number of milliseconds from `least` to 600000, or a problem text.
void read_ms(const char* name, std::chrono::milliseconds* out, std::string* problem,
             long long least = 1) {
  const std::string v = env(name);
  if (v.empty()) return;
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (*end != '\0' || v[0] < '0' || v[0] > '9' || n < least || n > 600000) {
    if (problem->empty())
      *problem = std::string(name) + "='" + v + "' is not a whole number of milliseconds from " +
                 std::to_string(least) + " to 600000";
    return;
  }
  *out = std::chrono::milliseconds(n);
}

}  // namespace

RemoteOptions RemoteOptions::from_env() {
  RemoteOptions o;
  o.url = env("KJIT_REMOTE_CACHE");
  o.key = env("KJIT_REMOTE_CACHE_KEY");
  o.key_file = env("KJIT_REMOTE_CACHE_KEY_FILE");
  read_ms("KJIT_REMOTE_CACHE_CONNECT_TIMEOUT_MS", &o.connect_timeout, &o.env_problem);
  read_ms("KJIT_REMOTE_CACHE_TIMEOUT_MS", &o.op_timeout, &o.env_problem);
  read_ms("KJIT_REMOTE_CACHE_BACKOFF_MS", &o.backoff, &o.env_problem);
  read_ms("KJIT_REMOTE_CACHE_LEASE_MS", &o.lease, &o.env_problem, 0);
  return o;
}

namespace detail {

// Like a cache folder: a regular file (no symlink, FIFO or device), owned by this user or root,
// and neither readable nor writable by anyone else. The key is never quoted in an error.
std::string read_key_file(const std::string& path) {
  const auto fail = [&](const std::string& why) -> std::string {
    throw std::invalid_argument("KJIT_REMOTE_CACHE_KEY_FILE " + path + ": " + why);
  };
  UniqueFd fd = open_fd(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  if (!fd.valid()) return fail("cannot open it: " + errno_text(errno));
  std::string key;
  const std::string why =
      read_regular_file(fd.get(), 4096, "a key", &key, [](const struct stat& st) {
        if (st.st_uid != ::getuid() && st.st_uid != 0)
          return "is owned by uid " + std::to_string(st.st_uid) + ", not by you or root";
        if ((st.st_mode & 077) != 0)
          return "may be read or written by others (mode 0" +
                 std::to_string((st.st_mode >> 6) & 7) + std::to_string((st.st_mode >> 3) & 7) +
                 std::to_string(st.st_mode & 7) + "): chmod 600 it";
        return std::string();
      });
  if (!why.empty()) return fail(why);
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r' || key.back() == ' '))
    key.pop_back();
  return key;
}

// The key the options give, checked; throws std::invalid_argument.
std::string fleet_key(const RemoteOptions& o) {
  std::string key = !o.key.empty() ? o.key : o.key_file.empty() ? "" : read_key_file(o.key_file);
  if (key.empty())
    throw std::invalid_argument(
        "KJIT_REMOTE_CACHE is set but there is no fleet key (KJIT_REMOTE_CACHE_KEY or "
        "KJIT_REMOTE_CACHE_KEY_FILE): without it no value can be verified, so the remote tier "
        "cannot be used at all, not even read-only");
  if (key.size() < kMinFleetKeyBytes)
    throw std::invalid_argument(
        "the fleet key (" +
        std::string(o.key.empty() ? "KJIT_REMOTE_CACHE_KEY_FILE" : "KJIT_REMOTE_CACHE_KEY") +
        ") is " + std::to_string(key.size()) + " bytes; it must be at least " +
        std::to_string(kMinFleetKeyBytes) + " (e.g. openssl rand -hex 32)");
  return key;
}

}  // namespace detail
}  // namespace kjit::cache
