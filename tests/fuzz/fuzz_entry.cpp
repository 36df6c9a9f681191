// libFuzzer target: the cache entry decoder (cache/src/entry_format.cpp). It reads every file in a
// cache folder, and whoever can write to that folder chooses those bytes.
//
// Each input is parsed as it is and "resealed" (its trailing SHA-256 recomputed): the fuzzer cannot
// forge a checksum, so without the resealed copy nothing past the checksum check would be reached
// with verification on. Each copy is parsed with no expected key, with the key the input itself
// stores and with another key, each with and without checksum verification. Whatever parses must
// be exactly what serialize_entry writes for the parsed key and entry (the format has one encoding
// per entry), and that must parse back equal.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "entry_format.hpp"

using namespace kjit::cache;
using namespace kjit::cache::detail;

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_entry: %s\n", what);
  std::abort();
}

bool same(const Entry& a, const Entry& b) {
  return a.label == b.label && a.metadata == b.metadata && a.payload == b.payload;
}

void check(std::string_view file, const Key* expected, bool verify) {
  Key key;
  Entry entry;
  const ParseStatus s = parse_entry(file, expected, verify, &key, &entry);
  if (describe(s) == nullptr) fail("describe() returned null");
  // Listing passes no outputs: the verdict must not depend on them.
  if (parse_entry(file, expected, verify, nullptr, nullptr) != s)
    fail("the status depends on the output pointers");
  if (s != ParseStatus::Ok) return;
  if (expected && key != *expected) fail("parsed an entry whose key is not the expected one");
  const std::string again = serialize_entry(key, entry);
  // Everything before the checksum is the input's (the checksum too when it was verified).
  const size_t body = file.size() - kChecksumSize;
  if (again.size() != file.size() ||
      std::string_view(again).substr(0, body) != file.substr(0, body))
    fail("serialize_entry of the parsed entry differs from the input");
  if (verify && again != file) fail("the verified checksum differs from serialize_entry's");
  Key key2;
  Entry entry2;
  if (parse_entry(again, &key, true, &key2, &entry2) != ParseStatus::Ok)
    fail("serialize_entry's output does not parse");
  if (key2 != key || !same(entry, entry2)) fail("the round trip changed the entry");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  std::string sealed(in);
  if (sealed.size() >= kChecksumSize) {
    const auto d = sha256(in.substr(0, in.size() - kChecksumSize));
    sealed.replace(sealed.size() - kChecksumSize, kChecksumSize,
                   reinterpret_cast<const char*>(d.data()), d.size());
  }
  Key stored;  // the key the input stores, where it is long enough to hold one
  if (size >= kEntryKeyOffset + stored.bytes.size())
    std::memcpy(stored.bytes.data(), data + kEntryKeyOffset, stored.bytes.size());
  Key other = stored;
  other.bytes[31] ^= 1;
  const Key* const expectations[] = {nullptr, &stored, &other};
  for (const std::string_view file : {in, std::string_view(sealed)})
    for (const Key* expected : expectations)
      for (const bool verify : {false, true}) check(file, expected, verify);
  return 0;
}
