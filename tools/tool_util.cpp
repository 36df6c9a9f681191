#include "tool_util.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <vector>

#include "kjit/error.hpp"
#include "posix_io.hpp"

namespace kjit::tools {
namespace {

// Leading decimal digits of `text` as a value; the rest goes to *unit. nullopt if none/overflow.
std::optional<uint64_t> leading_number(std::string_view text, std::string_view* unit) {
  size_t digits = 0;
  uint64_t value = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    const uint64_t d = static_cast<uint64_t>(text[digits] - '0');
    if (value > (UINT64_MAX - d) / 10) return std::nullopt;
    value = value * 10 + d;
    ++digits;
  }
  if (digits == 0) return std::nullopt;
  *unit = text.substr(digits);
  return value;
}

}  // namespace

std::optional<std::chrono::seconds> parse_duration(std::string_view text) {
  std::string_view unit;
  std::optional<uint64_t> value = leading_number(text, &unit);
  if (!value) return std::nullopt;
  uint64_t mult = 1;
  if (unit.empty() || unit == "s") {
    mult = 1;
  } else if (unit == "m" || unit == "min") {
    mult = 60;
  } else if (unit == "h") {
    mult = 3600;
  } else if (unit == "d") {
    mult = 86400;
  } else if (unit == "w") {
    mult = 7 * 86400;
  } else {
    return std::nullopt;
  }
  // Keep well inside what chrono's nanosecond arithmetic in the cache can hold (~292 years).
  if (*value > (uint64_t{100} * 365 * 86400) / mult) return std::nullopt;
  return std::chrono::seconds(static_cast<int64_t>(*value * mult));
}

std::string format_bytes(uint64_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

std::string format_age(int64_t seconds) {
  if (seconds < 0) seconds = 0;
  if (seconds < 120) return std::to_string(seconds) + "s";
  if (seconds < 2 * 3600) return std::to_string(seconds / 60) + "m";
  if (seconds < 2 * 86400) return std::to_string(seconds / 3600) + "h";
  return std::to_string(seconds / 86400) + "d";
}

cache::Options cache_options(const std::string& dir, cache::Mode mode) {
  cache::Options o = cache::Options::from_env();
  if (!dir.empty()) o.dir = dir;
  o.mode = mode;
  o.quiet = true;  // the tools report a refused folder and write errors themselves, as errors
  return o;
}

std::string refused_text(const std::string& what, const cache::DiskCache& cache) {
  return cache.refused_reason().empty() ? std::string() : what + ": " + cache.refused_reason();
}

const char* mode_name(cache::Mode m) {
  switch (m) {
    case cache::Mode::Off:
      return "off";
    case cache::Mode::ReadOnly:
      return "ro";
    case cache::Mode::ReadWrite:
      return "rw";
  }
  return "?";
}

namespace {

// Marked values are strings with this prefix. It starts with a NUL, which no manifest holds (a
// file with one is refused) and only a "\u0000" escape could spell: such a string gets the mark's
// message, a harmless error, where it would have failed as a bad value anyway.
constexpr std::string_view kMark{"\0kjit-bad-value:", 16};

nlohmann::json make_mark(const std::string& message) {
  return std::string(kMark) + message;
}

// `text` with every number that no double holds (1e400, a 400-digit integer) replaced by a marked
// string: nlohmann stops the whole parse at such a number, and no parser callback sees it first.
// Numbers are the runs of [-0-9.eE+] outside strings; invalid JSON stays invalid (a syntax error
// after such a number is then reported at a column shifted by the replacement's length).
std::string mark_huge_numbers(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (in_string || c == '"') {
      const bool escaped = in_string && c == '\\' && i + 1 < text.size();
      out.append(text, i, escaped ? 2 : 1);
      if (c == '"' || !in_string) in_string = !in_string;
      i += escaped ? 2 : 1;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      const size_t end = std::min(text.find_first_not_of("0123456789+-.eE", i), text.size());
      const std::string number = text.substr(i, end - i);
      if (std::isfinite(std::strtod(number.c_str(), nullptr)))
        out += number;
      else
        out += make_mark(number + " is out of range (a number must be within +-1.8e308)").dump();
      i = end;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

// Parses with the depth bound and the duplicate-key check; a number out of range throws
// nlohmann's out_of_range (406).
nlohmann::json parse_checked(const std::string& text, BadValues bad) {
  constexpr int kMaxDepth = 64;
  struct TooDeep {};
  struct Duplicate {
    std::string key;
  };
  struct Open {
    std::set<std::string> keys;
    std::string duplicate;  // the first key given twice (BadValues::Mark)
  };
  std::vector<Open> open;  // the objects being read, innermost last
  using E = nlohmann::json::parse_event_t;
  try {
    return nlohmann::json::parse(text, [&](int depth, E ev, nlohmann::json& v) {
      if (depth > kMaxDepth) throw TooDeep{};
      if (ev == E::object_start) open.emplace_back();
      if (ev == E::key && !open.back().keys.insert(v.get<std::string>()).second) {
        if (bad == BadValues::Throw) throw Duplicate{v.get<std::string>()};
        if (open.back().duplicate.empty()) open.back().duplicate = v.get<std::string>();
      }
      if (ev == E::object_end) {
        if (!open.back().duplicate.empty())
          v = make_mark("key '" + open.back().duplicate + "' appears twice in one object");
        open.pop_back();
      }
      return true;
    });
  } catch (const Duplicate& d) {
    throw JsonError("key '" + d.key + "' appears twice in one object");
  } catch (const nlohmann::json::parse_error& e) {
    throw JsonError(std::string("not valid JSON: ") + e.what());
  } catch (const TooDeep&) {
    throw JsonError("JSON nested deeper than " + std::to_string(kMaxDepth) + " levels");
  }
}

}  // namespace

nlohmann::json parse_json(const std::string& text, BadValues bad) {
  try {
    return parse_checked(text, bad);
  } catch (const nlohmann::json::out_of_range& e) {
    if (bad == BadValues::Throw || e.id != 406)
      throw JsonError(std::string("a number out of range: ") + e.what());
  }
  try {  // only texts with such a number pay for the second pass
    return parse_checked(mark_huge_numbers(text), bad);
  } catch (const nlohmann::json::out_of_range& e) {
    throw JsonError(std::string("a number out of range: ") + e.what());
  }
}

std::optional<std::string> json_mark(const nlohmann::json& v) {
  if (!v.is_string()) return std::nullopt;
  const std::string& s = v.get_ref<const std::string&>();
  if (s.compare(0, kMark.size(), kMark) != 0) return std::nullopt;
  return s.substr(kMark.size());
}

std::string shown(const nlohmann::json& v) {
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

// Length of the valid UTF-8 sequence at the start of `s` (1 to 4), or 0: a stray continuation
// byte, a truncated sequence, an overlong form, a surrogate or a code point past U+10FFFF.
// *cp is its code point.
size_t utf8_length(std::string_view s, uint32_t* cp) {
  const auto b = static_cast<unsigned char>(s[0]);
  size_t n = 0;  // from the lead byte: 0xxxxxxx, 110xxxxx, 1110xxxx, 11110xxx
  if (b < 0x80)
    n = 1;
  else if ((b >> 5) == 0x6)
    n = 2;
  else if ((b >> 4) == 0xE)
    n = 3;
  else if ((b >> 3) == 0x1E)
    n = 4;
  if (n == 0 || n > s.size()) return 0;
  *cp = n == 1 ? b : b & (0x7F >> n);
  for (size_t i = 1; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) != 0x80) return 0;
    *cp = (*cp << 6) | (c & 0x3F);
  }
  static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (*cp < kMin[n] || *cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF)) return 0;
  return n;
}

void append_hex(std::string* out, std::string_view bytes) {
  static const char kHex[] = "0123456789abcdef";
  for (const char ch : bytes) {
    const auto b = static_cast<unsigned char>(ch);
    *out += "\\x";
    *out += kHex[b >> 4];
    *out += kHex[b & 0xF];
  }
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t n = utf8_length(text.substr(i), &cp);
    if (n == 0) {
      append_hex(&out, text.substr(i, 1));  // one bad byte; what follows may still be valid
      i += 1;
      continue;
    }
    if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F))  // C0, DEL, C1
      append_hex(&out, text.substr(i, n));
    else if (cp == '\\')
      out += "\\\\";
    else
      out.append(text, i, n);
    i += n;
  }
  return out;
}

namespace {

// JSON text has no NUL; the parser would stop at one and ignore what follows.
void check_text(const std::string& text, const std::string& name) {
  if (const size_t nul = text.find('\0'); nul != std::string::npos)
    throw Error(Errc::Io, name + ": a NUL byte at offset " + std::to_string(nul) + ", not text");
}

}  // namespace

std::string read_text(std::istream& in, const std::string& name) {
  std::string text;
  char buf[1 << 16];
  try {
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
      if (text.size() + static_cast<size_t>(in.gcount()) > kMaxTextBytes)
        throw Error(Errc::Io, name + ": longer than " + std::to_string(kMaxTextBytes >> 20) +
                                  " MiB, more than any manifest");
      text.append(buf, static_cast<size_t>(in.gcount()));
    }
  } catch (const std::ios_base::failure& e) {
    throw Error(Errc::Io, name + ": cannot read it (" + e.what() + ")");
  }
  if (in.bad()) throw Error(Errc::Io, name + ": cannot read it");
  check_text(text, name);
  return text;
}

std::string read_text_file(const std::string& path) {
  // Not blocking, and only a regular file is read, through the descriptor that was checked: a
  // FIFO or a device at the name (a planted recording, say) is refused rather than waited on, or
  // read without end.
  cache::detail::UniqueFd fd = cache::detail::open_fd(path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (!fd.valid())
    throw Error(Errc::Io, path + ": cannot open it (" + cache::detail::errno_text(errno) + ")");
  std::string text;
  if (std::string why =
          cache::detail::read_regular_file(fd.get(), kMaxTextBytes, "a JSON file", &text);
      !why.empty())
    throw Error(Errc::Io, path + ": " + why);
  check_text(text, path);
  return text;
}

void check_output_path(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      throw Error(Errc::Io, path +
                                ": exists and is not a regular file (a symbolic link, folder, "
                                "FIFO or device): not written through");
  } else if (errno != ENOENT) {
    throw Error(Errc::Io, path + ": cannot stat it (" + cache::detail::errno_text(errno) + ")");
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  if (::access(dir.empty() ? "." : dir.c_str(), W_OK | X_OK) != 0)
    throw Error(Errc::Io,
                path + ": its folder is not writable (" + cache::detail::errno_text(errno) + ")");
}

void write_text_file(const std::string& path, const std::string& text) {
  check_output_path(path);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  cache::detail::UniqueFd fd =
      cache::detail::open_fd(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
  if (!fd.valid())
    throw Error(Errc::Io, tmp + ": cannot create it (" + cache::detail::errno_text(errno) + ")");
  int err = cache::detail::write_all(fd.get(), text);
  if (const int c = fd.close_checked(); err == 0) err = c;
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    throw Error(Errc::Io, path + ": cannot write it (" + cache::detail::errno_text(err) + ")");
  }
}

std::string not_empty(const std::string& value) {
  return value.empty() ? "must not be empty (leave the option out for the default)" : "";
}

std::vector<std::string> split_commas(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (const std::string& v : values) {
    size_t start = 0;
    for (size_t comma; (comma = v.find(',', start)) != std::string::npos; start = comma + 1)
      out.push_back(v.substr(start, comma - start));
    out.push_back(v.substr(start));
  }
  return out;
}

std::optional<int> parse_args(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return std::nullopt;
}

int finish_output(const char* tool, int rc) {
  const bool flushed = std::fflush(stdout) == 0;
  const int err = errno;
  if (flushed && !std::ferror(stdout)) return rc;
  std::fprintf(stderr, "%s: cannot write the output: %s\n", tool,
               flushed ? "an earlier write failed" : std::strerror(err));
  return rc == 0 ? 1 : rc;
}

std::string not_writable_text(const std::string& what, const cache::DiskCache& cache) {
  const std::string& why = cache.read_only_reason();
  return what + ": cache folder " + cache.dir() + " is not writable" +
         (why.empty() ? "" : " (" + why + ")");
}

}  // namespace kjit::tools
