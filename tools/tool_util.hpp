// Small helpers shared by the tools: command lines, sizes and durations as users type them,
// human-readable output, and the cache options a tool opens its folder with.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <istream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

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
// choose the mode by what the command does (read-only commands never touch a file). Quiet: the
// tools print the cache's problems as their own errors.
cache::Options cache_options(const std::string& dir, cache::Mode mode);
const char* mode_name(cache::Mode m);

// A tool's JSON input, parsed. Nesting is bounded: nlohmann parses deep nesting fine but copies
// and destroys it recursively, and a file nested 200 000 levels deep overflowed the stack. No
// input of the tools needs more than a few levels. JsonError says "not valid JSON: ...", "JSON
// nested deeper than 64 levels", or names a number out of range or a key given twice.
//
// With BadValues::Mark, those last two do not fail the whole text: a number no double holds
// (1e400) becomes a marked value, and so does an object holding a key twice; json_mark() gives
// their message. A manifest reader then fails only the problem that holds one, as it does for any
// other bad field, instead of refusing every problem of the file.
struct JsonError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
enum class BadValues { Throw, Mark };
nlohmann::json parse_json(const std::string& text, BadValues bad = BadValues::Throw);
// The message of a value that parse_json(..., Mark) marked; nullopt for any other value.
std::optional<std::string> json_mark(const nlohmann::json& v);

// `v` as JSON text for a message. Strings from the short problem form and file names are bytes,
// not always UTF-8: invalid sequences become U+FFFD instead of nlohmann throwing mid-message.
std::string shown(const nlohmann::json& v);

// Text for a terminal. Labels, metadata, file names and manifest text are bytes from outside: an
// escape sequence or a newline in them would repaint the screen or forge an output line. C0
// controls (newline, tab and ESC included), DEL, C1 controls and bytes that are not valid UTF-8
// become \xNN, and a backslash becomes \\ so that a real "\x1b" stays distinguishable; valid
// UTF-8 text passes unchanged. Every text (non-JSON) output of the tools prints outside bytes
// through it; JSON output is escaped by json_text instead.
std::string printable(std::string_view text);

// The whole file at `path` (or stream `in`, called `name` in messages) as text. Errc::Io naming
// it when it is a directory, cannot be read, holds a NUL byte or is longer than kMaxTextBytes.
inline constexpr size_t kMaxTextBytes = size_t{256} << 20;
std::string read_text_file(const std::string& path);
std::string read_text(std::istream& in, const std::string& name);

// Results files (--json): `path` must be absent or a regular file, never written through a
// symlink, FIFO or device; check_output_path says so (and that its folder is writable) before a
// long run, write_text_file writes `text` beside it and renames it over. Errc::Io naming the path
// and the reason.
void check_output_path(const std::string& path);
void write_text_file(const std::string& path, const std::string& text);

// A CLI11 check for options whose empty value would silently mean the default (--cache-dir '').
std::string not_empty(const std::string& value);

// Each value split at its commas, empty pieces kept (CLI11's delimiter drops them, so that
// '-a sm_90,,sm_80' or a trailing comma would pass unnoticed): the caller refuses them by name.
std::vector<std::string> split_commas(const std::vector<std::string>& values);

// Parses a tool's command line: nullopt to go on, else the code to exit with (0 after --help,
// 2 for a usage error, with CLI11's message printed).
std::optional<int> parse_args(CLI::App& app, int argc, char** argv);

// A tool's exit status once its output is written: stdout flushed, and a write error (a full
// disk, a closed pipe's EPIPE) turned into a failure naming it instead of exit 0.
int finish_output(const char* tool, int rc);

// "<what>: cache folder <dir> is not used: <path> <rule it breaks> ...", for a cache folder the
// trust policy refused (docs/API.md, "Trust"); empty when it was not refused. The tools stop with
// it (exit 1): they never work on a folder whose code the runtime would refuse to run.
std::string refused_text(const std::string& what, const cache::DiskCache& cache);
// "<what>: cache folder <dir> is not writable (<why>)", for a cache that fell back to read-only.
std::string not_writable_text(const std::string& what, const cache::DiskCache& cache);

// JSON output: file names and cache labels are bytes, not always UTF-8, so invalid sequences are
// written as U+FFFD instead of making nlohmann throw mid-output.
inline std::string json_text(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kjit::tools
