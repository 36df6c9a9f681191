#include "cache_dir.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kjit/cache/size.hpp"

namespace kjit::cache {

namespace detail {

namespace {

bool is_lower_hex(std::string_view s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return !s.empty();
}

bool is_digits(std::string_view s) {
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return !s.empty();
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string home_from_passwd() {
  std::vector<char> buf(16384);
  passwd pw;
  passwd* found = nullptr;
  if (getpwuid_r(getuid(), &pw, buf.data(), buf.size(), &found) != 0 || !found || !pw.pw_dir)
    return {};
  return pw.pw_dir;
}

uint64_t random_u64() {
  // Seeded once per process; the pid in every temp name separates processes (forked children
  // share this state), the counter separates threads and calls within one process.
  static const uint64_t seed = std::random_device{}() ^ (uint64_t{std::random_device{}()} << 32);
  static std::atomic<uint64_t> counter{0};
  uint64_t x = seed + 0x9e3779b97f4a7c15ull * (counter.fetch_add(1) + 1);
  // splitmix64 finalizer: cheap and well mixed.
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

std::string temp_path_for(const std::string& final_path) {
  char rnd[17];
  std::snprintf(rnd, sizeof rnd, "%016llx", static_cast<unsigned long long>(random_u64()));
  return final_path + std::string(kTempMarker) + std::to_string(getpid()) + "." + rnd;
}

bool is_shard_name(std::string_view name) {
  return name.size() == 2 && is_lower_hex(name);
}

bool is_entry_name(std::string_view name, std::string_view shard) {
  return name.size() == 64 + kEntrySuffix.size() && is_lower_hex(name.substr(0, 64)) &&
         name.substr(64) == kEntrySuffix && name.substr(0, 2) == shard;
}

bool is_lock_name(std::string_view name) {
  return name.size() == 64 + kLockSuffix.size() && is_lower_hex(name.substr(0, 64)) &&
         name.substr(64) == kLockSuffix;
}

std::optional<pid_t> parse_temp_name(std::string_view name, std::string_view shard) {
  size_t marker = name.find(kTempMarker);
  if (marker == std::string_view::npos) return std::nullopt;
  std::string_view prefix = name.substr(0, marker);
  // Shard folders hold entry temps; the v1 folder itself (shard "") holds only the probe.
  bool ours = shard.empty() ? prefix == kProbePrefix : is_entry_name(prefix, shard);
  if (!ours) return std::nullopt;
  std::string_view rest = name.substr(marker + kTempMarker.size());
  size_t dot = rest.find('.');
  if (dot == std::string_view::npos || dot > 9) return std::nullopt;
  std::string_view pid = rest.substr(0, dot);
  if (!is_digits(pid) || !is_lower_hex(rest.substr(dot + 1))) return std::nullopt;
  return static_cast<pid_t>(std::stol(std::string(pid)));
}

std::optional<Mode> parse_mode(std::string_view text) {
  if (text == "off") return Mode::Off;
  if (text == "ro") return Mode::ReadOnly;
  if (text == "rw") return Mode::ReadWrite;
  return std::nullopt;
}

void warn(const std::string& message) {
  // Messages carry labels and paths that came from files: control bytes are escaped so that they
  // cannot drive the terminal or forge lines.
  std::string line = "kjit: ";
  for (unsigned char c : message) {
    if (c >= 0x20 && c != 0x7f) {
      line += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      line += hex;
    }
  }
  line += "\n";
  // One write() so that lines from concurrent processes do not interleave.
  ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
  (void)n;
}

}  // namespace detail

std::string Options::default_dir() {
  std::string xdg = detail::env("XDG_CACHE_HOME");
  // The XDG spec says relative values are invalid and must be ignored.
  if (!xdg.empty() && xdg[0] == '/') return xdg + "/kjit";
  std::string home = detail::env("HOME");
  if (home.empty()) home = detail::home_from_passwd();
  if (!home.empty()) return home + "/.cache/kjit";
  // A predictable name in a folder every user may write: another user could make it first and
  // plant entries. The trust policy refuses it then (not ours), so the cache is off, not fooled.
  return "/tmp/kjit-cache-" + std::to_string(::geteuid());
}

std::optional<uint64_t> parse_size(std::string_view text) {
  size_t digits = 0;
  uint64_t value = 0;
  for (; digits < text.size() && text[digits] >= '0' && text[digits] <= '9'; ++digits) {
    const uint64_t d = static_cast<uint64_t>(text[digits] - '0');
    if (value > (UINT64_MAX - d) / 10) return std::nullopt;
    value = value * 10 + d;
  }
  if (digits == 0) return std::nullopt;
  std::string_view unit = text.substr(digits);
  int shift = 0;
  if (!unit.empty()) {
    constexpr std::string_view kPrefixes = "kmgt";  // binary: K = 2^10, ..., T = 2^40
    const size_t i = kPrefixes.find(static_cast<char>(unit[0] | 0x20));  // ASCII lower case
    if (i != std::string_view::npos) {
      shift = 10 * static_cast<int>(i + 1);
      unit.remove_prefix(1);
      if (unit == "i" || unit == "iB") unit = {};  // "64Ki", "64KiB" mean "64K"
    }
    if (unit == "B" || unit == "b") unit = {};  // "100B", "64KB"
    if (!unit.empty()) return std::nullopt;
  }
  if (shift && value > (UINT64_MAX >> shift)) return std::nullopt;
  return value << shift;
}

Options Options::from_env() {
  Options o;
  o.dir = detail::env("KJIT_CACHE_DIR");
  if (o.dir.empty()) o.dir = default_dir();
  std::string mode = detail::env("KJIT_CACHE");
  if (!mode.empty()) {
    if (auto m = detail::parse_mode(mode))
      o.mode = *m;
    else
      detail::warn("KJIT_CACHE=" + mode + " is not one of off|ro|rw; using rw");
  }
  o.shared_group = detail::env("KJIT_CACHE_SHARED");
  std::string size = detail::env("KJIT_CACHE_MAX_SIZE");
  if (!size.empty()) {
    if (auto s = parse_size(size))
      o.max_bytes = *s;
    else
      detail::warn("KJIT_CACHE_MAX_SIZE=" + size +
                   " is not a size (bytes, or with K/M/G/T); using " + std::to_string(o.max_bytes));
  }
  o.remote = RemoteOptions::from_env();
  return o;
}

}  // namespace kjit::cache
