// libFuzzer target: the archive reader, through DiskCache::import_from (what `kjit-cache import`
// runs on a file somebody shipped), into a fresh cache folder per input.
//
// The first input byte picks a mode; the rest is the archive file. Bit 0 clear: the bytes as they
// are. Bit 0 set: the harness first recomputes the checksums the fuzzer cannot forge (each record's
// entry checksum, then the archive's), walking the records as archive.hpp lays them out, so that
// mutations get past the checksums to the entry parser, put() and the size-cap trim. Seeds
// (kjit_fuzz_seeds) are archives written by DiskCache::export_to, in both modes.
//
// import_from refuses bad input by throwing std::runtime_error. Any other exception, a crash, a
// leak or a sanitizer report is a finding; so is an invalid entry left in the cache by an import.
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include "kjit/cache/disk_cache.hpp"
#include "kjit/cache/key.hpp"

namespace fs = std::filesystem;
using namespace kjit::cache;

namespace {

constexpr size_t kChecksum = 32;
constexpr size_t kArchiveHeader = 8 + 4;      // magic, version
constexpr size_t kRecordHeader = 1 + 32 + 8;  // tag, key, entry length

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_archive: %s\n", what.c_str());
  std::abort();
}

// Replaces the last 32 bytes of s[begin, end) with the SHA-256 of the bytes before them.
void reseal(std::string* s, size_t begin, size_t end) {
  const auto d = sha256(std::string_view(*s).substr(begin, end - begin - kChecksum));
  s->replace(end - kChecksum, kChecksum, reinterpret_cast<const char*>(d.data()), d.size());
}

void repair_checksums(std::string* a) {
  size_t pos = kArchiveHeader;
  while (pos < a->size() && (*a)[pos] == 1 && a->size() - pos >= kRecordHeader) {
    uint64_t len = 0;
    for (int i = 0; i < 8; ++i)
      len |= uint64_t{static_cast<uint8_t>((*a)[pos + 33 + static_cast<size_t>(i)])} << (8 * i);
    pos += kRecordHeader;
    if (len > a->size() - pos) break;
    if (len >= kChecksum) reseal(a, pos, pos + static_cast<size_t>(len));
    pos += static_cast<size_t>(len);
  }
  if (a->size() >= kChecksum) reseal(a, 0, a->size());
}

// One folder for the whole run, emptied after every input; removed at exit (libFuzzer ends a
// -max_total_time run with exit(), which runs static destructors).
struct Scratch {
  std::string root;
  Scratch() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/kjit-fuzz-archive-XXXXXX";
    if (!::mkdtemp(tmpl.data())) fail("mkdtemp failed");
    root = tmpl;
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Scratch scratch;
  if (size == 0) return 0;
  std::string archive(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) repair_checksums(&archive);

  const std::string path = scratch.root + "/in.kjitar";
  const std::string dir = scratch.root + "/cache";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(archive.data(), static_cast<std::streamsize>(archive.size()));
    if (!out.flush()) fail("cannot write " + path);
  }
  {
    Options o;
    o.dir = dir;
    o.mode = Mode::ReadWrite;
    // Small: an import of a few entries trims, and one over 512 bytes is skipped as oversized.
    o.max_bytes = 1024;
    o.lock_timeout = std::chrono::milliseconds(1000);
    o.quiet = true;  // an oversized entry warns once per cache, i.e. per input
    DiskCache cache(o);
    // A folder the cache refuses or cannot write would make every input a refusal, and the run a
    // pass that tested nothing.
    if (cache.mode() != Mode::ReadWrite)
      fail("the scratch cache " + dir + " is not writable: " + cache.refused_reason() +
           cache.read_only_reason());
    try {
      cache.import_from(path);
    } catch (const std::runtime_error&) {
      // The documented refusal.
    } catch (const std::exception& e) {
      fail(std::string("import_from threw something other than std::runtime_error: ") + e.what());
    } catch (...) {
      fail("import_from threw a non-std exception");
    }
    // import verifies before it publishes: whatever it left must verify.
    for (const EntryInfo& e : cache.list(true))
      if (!e.valid) fail("an import left an invalid entry " + e.path + ": " + e.error);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) fail("cannot empty " + dir + ": " + ec.message());
  ::unlink(path.c_str());
  return 0;
}
