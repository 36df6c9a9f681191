// libFuzzer target: kjit::template_includes, the one scan of what a template includes (the cache
// key's closure, TemplateSet::add's refusal of files NVRTC would read from disk, and
// kjit-precompile's check of recorded headers all rest on it). Every input is scanned, added to a
// TemplateSet and, when added, its closure taken.
//
// The documented refusal is kjit::Error with InvalidArgument; any other exception, a crash, a hang
// or a sanitizer report is a finding. So is a scan that differs after the text's LF line ends
// become CRLF (the compiler reads both alike), or an added template holding an include through
// which NVRTC could read the disk (include_disk_problem: add must have refused it).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kjit/error.hpp"
#include "kjit/templates.hpp"

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_includes: %s\n", what.c_str());
  std::abort();
}

// The scan, or nullopt-like `ok = false` for a documented refusal.
std::vector<kjit::TemplateInclude> scan(const std::string& text, bool* ok) {
  *ok = true;
  try {
    return kjit::template_includes(text, "fuzz.cuh");
  } catch (const kjit::Error& e) {
    if (e.code() != kjit::Errc::InvalidArgument) fail(std::string("scan threw ") + e.what());
    *ok = false;
  } catch (const std::exception& e) {
    fail(std::string("scan threw a non-kjit exception: ") + e.what());
  }
  return {};
}

bool same(const std::vector<kjit::TemplateInclude>& a,
          const std::vector<kjit::TemplateInclude>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].directive != b[i].directive || a[i].target != b[i].target ||
        a[i].angled != b[i].angled || a[i].line != b[i].line)
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  bool ok = false;
  const std::vector<kjit::TemplateInclude> incs = scan(text, &ok);

  // CRLF line ends read as LF (a text holding CR already may be refused either way).
  if (text.find('\r') == std::string::npos) {
    std::string crlf;
    for (char c : text) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
    bool ok2 = false;
    const auto incs2 = scan(crlf, &ok2);
    if (ok != ok2 || !same(incs, incs2)) fail("CRLF line ends changed the scan");
  }

  kjit::TemplateSet set;
  try {
    set.add("fuzz.cuh", text);
  } catch (const kjit::Error& e) {
    if (e.code() != kjit::Errc::InvalidArgument) fail(std::string("add threw ") + e.what());
    return 0;
  } catch (const std::exception& e) {
    fail(std::string("add threw a non-kjit exception: ") + e.what());
  }
  if (!ok) fail("add accepted a text the scan refuses");
  for (const auto& inc : incs)
    if (!kjit::include_disk_problem(inc).empty())
      fail("add accepted an include of '" + inc.target + "'");
  try {
    (void)set.closure("fuzz.cuh");
  } catch (const std::exception& e) {
    fail(std::string("closure threw ") + e.what());
  }
  return 0;
}
