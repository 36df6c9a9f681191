#include <doctest/doctest.h>

#include "../../cache/src/entry_format.hpp"  // private: the suite tests the format directly
#include "cache/test_util.hpp"

using namespace kjit::cache;
using namespace kjit::cache::detail;
using kjit_test::entry_of;
using kjit_test::key_of;
using kjit_test::same_entry;

namespace {

// Rewrites the trailing checksum so that a test can change one field and nothing else.
void reseal(std::string* file) {
  auto d = sha256(std::string_view(*file).substr(0, file->size() - 32));
  file->replace(file->size() - 32, 32, reinterpret_cast<const char*>(d.data()), 32);
}

}  // namespace

TEST_CASE("entry round trip") {
  Key k = key_of("round trip");
  Entry in = entry_of(std::string("\0binary\xff payload", 16), "k<4> sm_90");
  in.metadata.push_back({"empty", ""});
  in.metadata.push_back({"", "nameless"});
  std::string file = serialize_entry(k, in);
  CHECK(file.substr(0, 8) == std::string("KJITCAC\0", 8));
  Entry out;
  Key stored;
  REQUIRE(parse_entry(file, &k, true, &stored, &out) == ParseStatus::Ok);
  CHECK(stored == k);
  CHECK(same_entry(in, out));
  REQUIRE(out.find("arch"));
  CHECK(*out.find("arch") == "sm_90");
  CHECK(out.find("missing") == nullptr);
}

TEST_CASE("empty entry round trip") {
  Key k = key_of("empty");
  Entry out;
  REQUIRE(parse_entry(serialize_entry(k, Entry{}), &k, true, nullptr, &out) == ParseStatus::Ok);
  CHECK(out.label.empty());
  CHECK(out.metadata.empty());
  CHECK(out.payload.empty());
}

TEST_CASE("parse rejects every kind of damage") {
  Key k = key_of("damage");
  const std::string good = serialize_entry(k, entry_of(std::string(1000, 'p')));
  auto status = [&](const std::string& f) { return parse_entry(f, &k, true, nullptr, nullptr); };

  SUBCASE("short files") {
    CHECK(status("") == ParseStatus::TooShort);
    CHECK(status(good.substr(0, 50)) == ParseStatus::TooShort);
    CHECK(status(good.substr(0, good.size() / 2)) == ParseStatus::BadChecksum);
    CHECK(status(good.substr(0, good.size() - 1)) == ParseStatus::BadChecksum);
  }
  SUBCASE("bad magic") {
    std::string f = good;
    f[0] = 'X';
    CHECK(status(f) == ParseStatus::BadMagic);
  }
  SUBCASE("future and past format versions") {
    for (uint8_t v : {0, 2, 255}) {
      std::string f = good;
      f[kEntryVersionOffset] = static_cast<char>(v);
      reseal(&f);
      CHECK(status(f) == ParseStatus::BadVersion);
    }
  }
  SUBCASE("key mismatch") {
    Key other = key_of("other");
    CHECK(parse_entry(good, &other, true, nullptr, nullptr) == ParseStatus::KeyMismatch);
    CHECK(parse_entry(good, nullptr, true, nullptr, nullptr) == ParseStatus::Ok);
  }
  SUBCASE("one flipped bit anywhere") {
    for (size_t i = 0; i < good.size(); i += 37) {
      std::string f = good;
      f[i] ^= 0x10;
      CHECK(status(f) != ParseStatus::Ok);
    }
  }
  SUBCASE("lengths that run past the end, even with a valid checksum") {
    const size_t label_len_at = kEntryKeyOffset + 32;
    for (uint64_t bogus : {uint64_t{1} << 40, uint64_t{good.size()}, ~uint64_t{0}}) {
      std::string f = good;
      for (int i = 0; i < 8; ++i) f[label_len_at + i] = static_cast<char>(bogus >> (8 * i));
      reseal(&f);
      CHECK(status(f) == ParseStatus::BadLength);
    }
    // A metadata count far beyond what the file could hold must not allocate.
    std::string f = good;
    const size_t count_at = label_len_at + 8 + 5;  // label "label"
    for (int i = 0; i < 8; ++i) f[count_at + i] = static_cast<char>(0xff);
    reseal(&f);
    CHECK(status(f) == ParseStatus::BadLength);
  }
  SUBCASE("trailing garbage before the checksum") {
    std::string f = good.substr(0, good.size() - 32) + "xx" + std::string(32, '\0');
    reseal(&f);
    CHECK(status(f) == ParseStatus::BadLength);
  }
  SUBCASE("checksum skipped on request, lengths still checked") {
    std::string f = good;
    f[f.size() - 1] ^= 1;
    CHECK(parse_entry(f, &k, false, nullptr, nullptr) == ParseStatus::Ok);
    CHECK(status(f) == ParseStatus::BadChecksum);
  }
}
