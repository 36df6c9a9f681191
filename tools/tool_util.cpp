#include "tool_util.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <vector>

#include "kjit/error.hpp"

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
  return o;
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

nlohmann::json parse_json(const std::string& text) {
  constexpr int kMaxDepth = 64;
  struct TooDeep {};
  struct Duplicate {
    std::string key;
  };
  std::vector<std::set<std::string>> keys;  // the keys seen in each open object
  using E = nlohmann::json::parse_event_t;
  try {
    return nlohmann::json::parse(text, [&](int depth, E ev, nlohmann::json& v) {
      if (depth > kMaxDepth) throw TooDeep{};
      if (ev == E::object_start) keys.emplace_back();
      if (ev == E::object_end) keys.pop_back();
      if (ev == E::key && !keys.back().insert(v.get<std::string>()).second)
        throw Duplicate{v.get<std::string>()};
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
  // JSON text has no NUL; the parser would stop at one and ignore what follows.
  if (const size_t nul = text.find('\0'); nul != std::string::npos)
    throw Error(Errc::Io, name + ": a NUL byte at offset " + std::to_string(nul) + ", not text");
  return text;
}

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(Errc::Io, path + ": is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Errc::Io, path + ": cannot open it");
  return read_text(in, path);
}

std::string not_empty(const std::string& value) {
  return value.empty() ? "must not be empty (leave the option out for the default)" : "";
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
