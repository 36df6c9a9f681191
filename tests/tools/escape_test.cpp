// Text output of the tools with hostile bytes in labels, metadata, file names and manifests: an
// escape sequence or a newline must reach the terminal as \xNN, never raw (issue item 7).
#include <doctest/doctest.h>

#include <string>
#include <string_view>

#include "kjit/cache/disk_cache.hpp"
#include "test_util.hpp"
#include "tool_runner.hpp"
#include "tool_util.hpp"

using kjit::tools::printable;
using kjit_test::run_tool;
using kjit_test::TempDir;
using nlohmann::json;

namespace {

// Clears the screen, then starts a line of its own: what an attacker's label would hold.
const std::string kHostile = "\x1b[2J\nFAKE LINE";
const std::string kHostileShown = "\\x1b[2J\\x0aFAKE LINE";

// True when `text` holds a byte that a terminal acts on: C0 controls other than the newlines the
// tool writes itself, DEL, and the C1 CSI (0x9b, raw or UTF-8 encoded).
bool has_raw_control(const std::string& text) {
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if ((b < 0x20 && b != '\n') || b == 0x7f || b == 0x9b) return true;
  }
  return false;
}

// True when some line of `text` starts with `prefix` (a forged line would).
bool has_line_starting(const std::string& text, const std::string& prefix) {
  for (size_t pos = 0; pos < text.size();) {
    if (text.compare(pos, prefix.size(), prefix) == 0) return true;
    const size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return false;
}

// One entry through the public cache API, with hostile label and metadata.
void put_hostile_entry(const std::string& cache) {
  kjit::cache::Options o;
  o.dir = cache;
  o.max_bytes = 0;
  kjit::cache::DiskCache c(o);
  kjit::cache::KeyBuilder kb;
  kb.add("escape-test", int64_t{1});
  kjit::cache::Entry e;
  e.label = kHostile;
  e.metadata = {{"kind", "tune\x1b[31m"}, {"arch", "sm_90\nFAKE ARCH"}};
  e.payload = "payload";
  REQUIRE(c.put(kb.finish(), e));
}

}  // namespace

TEST_CASE("printable escapes controls, invalid UTF-8 and backslashes, and keeps the rest") {
  CHECK(printable("kjit::gn_fwd<float, 8, 576> [sm_90]") == "kjit::gn_fwd<float, 8, 576> [sm_90]");
  CHECK(printable(kHostile) == kHostileShown);
  CHECK(printable("a\tb\rc") == "a\\x09b\\x0dc");
  CHECK(printable(std::string_view("nul\0end", 7)) == "nul\\x00end");
  CHECK(printable("del\x7f") == "del\\x7f");
  CHECK(printable("a\\x1b") == "a\\\\x1b");  // a real backslash cannot pass for an escape
  CHECK(printable("\xc2\x9b"
                  "2J") == "\\xc2\\x9b2J");  // C1 CSI, valid UTF-8 but a control
  CHECK(printable("\x9b"
                  "2J") == "\\x9b2J");  // the raw 8-bit CSI
  // Not UTF-8: a lone byte, a truncated sequence, overlong, surrogate, past U+10FFFF.
  CHECK(printable("caf\xe9") == "caf\\xe9");
  CHECK(printable("\xe2\x82") == "\\xe2\\x82");
  CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");
  CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");
  CHECK(printable("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");
  // Valid UTF-8 text is unchanged, and a bad byte does not swallow the valid one after it.
  CHECK(printable("µs ± 1 — 日本 \xf0\x9f\x98\x80") == "µs ± 1 — 日本 \xf0\x9f\x98\x80");
  CHECK(printable("\xff\xc3\xa9") == "\\xff\xc3\xa9");
}

TEST_CASE("kjit-cache text output escapes what an imported archive holds") {
  TempDir dir;
  const std::string source = dir.path + "/source";
  put_hostile_entry(source);
  // Paths printed back (the archive and the importing cache) carry the same bytes.
  const std::string archive = dir.path + "/warm" + kHostile + ".kjitar";
  const std::string cache = dir.path + "/cache\x1b[7m";
  auto ex = run_tool("kjit-cache", "export '" + archive + "' --cache-dir " + source, dir.path);
  INFO(ex.err);
  REQUIRE(ex.rc == 0);
  auto im =
      run_tool("kjit-cache", "import '" + archive + "' --cache-dir '" + cache + "'", dir.path);
  INFO(im.err);
  REQUIRE(im.rc == 0);
  CHECK_FALSE(has_raw_control(im.out));
  CHECK(im.out.find(kHostileShown) != std::string::npos);

  for (const char* cmd : {"list", "stats", "verify", "list --full-keys"}) {
    CAPTURE(cmd);
    auto r = run_tool("kjit-cache", std::string(cmd) + " --cache-dir '" + cache + "'", dir.path);
    CHECK(r.rc == 0);
    CHECK_FALSE(has_raw_control(r.out));
    CHECK_FALSE(has_line_starting(r.out, "FAKE"));
    if (std::string(cmd) != "list" && std::string(cmd) != "list --full-keys")
      CHECK(r.out.find("cache\\x1b[7m") != std::string::npos);  // the folder they name
  }
  auto list = run_tool("kjit-cache", "list --cache-dir '" + cache + "'", dir.path);
  CHECK(list.out.find(kHostileShown) != std::string::npos);    // the label
  CHECK(list.out.find("tune\\x1b[31m") != std::string::npos);  // kind
  CHECK(list.out.find("sm_90\\x0aFAKE ARCH") != std::string::npos);
  CHECK(list.out.find("\n1 entries\n") != std::string::npos);

  // JSON keeps the bytes exactly (nlohmann escapes them as \u001b, \n).
  auto lj = run_tool("kjit-cache", "list --json --cache-dir '" + cache + "'", dir.path);
  REQUIRE(lj.rc == 0);
  CHECK_FALSE(has_raw_control(lj.out));
  const json l = lj.json();
  REQUIRE(l.size() == 1);
  CHECK(l[0]["label"] == kHostile);
  CHECK(l[0]["arch"] == "sm_90\nFAKE ARCH");
}

TEST_CASE("kjit-precompile errors escape the manifest's name and text") {
  TempDir dir;
  const std::string manifest = dir.path + "/m" + kHostile + ".json";
  kjit_test::write_text(manifest, R"({"problems": [
      {"op": "group_norm", "shape": [2, 8, 4, 4], "groups": 2, "\u001b[2J\nFAKE FIELD": 1},
      {"op": "\u001b]0;title\u0007"}]})");
  auto r = run_tool(
      "kjit-precompile",
      "-n -a sm_90 '" + manifest + "' -p '\x1b[2J' --cache-dir " + dir.path + "/cache", dir.path);
  CHECK(r.rc == 1);
  CHECK_FALSE(has_raw_control(r.err));
  CHECK_FALSE(has_line_starting(r.err, "FAKE"));
  CHECK(r.err.find("m" + kHostileShown + ".json: problems[0]: field '\\x1b[2J\\x0aFAKE FIELD'") !=
        std::string::npos);
  CHECK(r.err.find("unknown op '\\x1b]0;title\\x07'") != std::string::npos);
  CHECK(r.err.find("--problem[0]: field 'op': unknown op '\\x1b[2J'") != std::string::npos);

  // A manifest that cannot be read names the file, escaped, too.
  auto missing =
      run_tool("kjit-precompile", "-n '" + dir.path + "/nope" + kHostile + "'", dir.path);
  CHECK(missing.rc == 2);
  CHECK_FALSE(has_raw_control(missing.err));
  CHECK(missing.err.find("nope" + kHostileShown) != std::string::npos);
}
