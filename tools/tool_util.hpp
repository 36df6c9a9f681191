// Small helpers shared by kjit-precompile and kjit-cache: sizes and durations as users type them,
// human-readable output, and the cache options a tool opens its folder with.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "kjit/cache/disk_cache.hpp"
#include "kjit/cache/size.hpp"

namespace kjit::tools {

// "123", "64K", "512M", "4G", "1T" (binary units; "KB", "KiB" accepted); nullopt when malformed.
// The cache library's, so that `--max-size` reads sizes exactly as KJIT_CACHE_MAX_SIZE does.
using cache::parse_size;
// "90s", "90m", "12h", "30d", "2w"; a bare number is seconds. nullopt when malformed.
std::optional<std::chrono::seconds> parse_duration(std::string_view text);

std::string format_bytes(uint64_t bytes);  // "812 B", "4.1 KiB", "3.2 MiB"
std::string format_age(int64_t seconds);   // "45s", "12m", "5h", "3d"

// The cache folder and size cap the runtime would use (KJIT_CACHE_DIR, KJIT_CACHE_MAX_SIZE...),
// with `dir` (when not empty) in place of the folder and `mode` in place of KJIT_CACHE: the tools
// choose the mode by what the command does (read-only commands never touch a file).
cache::Options cache_options(const std::string& dir, cache::Mode mode);
const char* mode_name(cache::Mode m);

// nlohmann parses deep nesting fine but copies and destroys it recursively: a file nested 200 000
// levels deep overflowed the stack. No input of the tools needs more than a few levels.
constexpr int kMaxJsonDepth = 64;
struct JsonTooDeep {};  // thrown by parse_json_bounded
inline nlohmann::json parse_json_bounded(const std::string& text) {
  return nlohmann::json::parse(text, [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonDepth) throw JsonTooDeep{};
    return true;
  });
}
inline std::string json_too_deep_text() {
  return "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";
}

// JSON output: file names and cache labels are bytes, not always UTF-8, so invalid sequences are
// written as U+FFFD instead of making nlohmann throw mid-output.
inline std::string json_text(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kjit::tools
