// Damaged entries: each must read as a miss that recompiles, overwrites and is counted, and no
// other valid entry may be lost.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <functional>

#include "cache/test_util.hpp"

using namespace kjit::cache;
using namespace kjit_test;

namespace {

// Rewrites the trailing SHA-256 so that only the intended field is wrong.
void reseal(std::string* file) {
  auto d = sha256(std::string_view(*file).substr(0, file->size() - 32));
  file->replace(file->size() - 32, 32, reinterpret_cast<const char*>(d.data()), 32);
}

// Puts a victim and a bystander, damages the victim's file, then asks for the victim.
void check_damage_recovers(const std::function<void(const std::string& dir, const Key& victim,
                                                    const Key& bystander)>& damage) {
  TempDir tmp;
  const Key victim = key_of("victim"), bystander = key_of("bystander");
  const Entry old_entry = entry_of(std::string(5000, 'o')),
              fresh = entry_of(std::string(5000, 'n'));
  {
    DiskCache writer(options_for(tmp.path()));
    REQUIRE(writer.put(victim, old_entry));
    REQUIRE(writer.put(bystander, entry_of("bystander")));
  }
  damage(tmp.path(), victim, bystander);

  DiskCache cache(options_for(tmp.path()));
  int makes = 0;
  bool made = false;
  Entry got = cache.get_or_make(
      victim,
      [&] {
        ++makes;
        return fresh;
      },
      &made);
  CHECK(made);
  CHECK(makes == 1);
  CHECK(same_entry(got, fresh));
  Stats s = cache.stats();
  CHECK(s.corrupt == 1);
  CHECK(s.misses == 1);
  CHECK(s.compiles == 1);
  CHECK(s.write_errors == 0);
  // Overwritten: the next reader hits the fresh entry, and no temp or lock file is left.
  DiskCache reader(options_for(tmp.path()));
  auto again = reader.get(victim);
  REQUIRE(again);
  CHECK(same_entry(*again, fresh));
  CHECK(reader.stats().corrupt == 0);
  auto by = reader.get(bystander);
  REQUIRE(by);
  CHECK(by->payload == "bystander");
  CHECK(count_files(tmp.path(), ".tmp.") == 0);
  CHECK(count_files(tmp.path(), ".lock") == 0);
}

}  // namespace

TEST_CASE("entry truncated to zero bytes") {
  check_damage_recovers([](const std::string& dir, const Key& v, const Key&) {
    REQUIRE(::truncate(entry_path(dir, v).c_str(), 0) == 0);
  });
}

TEST_CASE("entry truncated to half") {
  check_damage_recovers([](const std::string& dir, const Key& v, const Key&) {
    const std::string p = entry_path(dir, v);
    REQUIRE(::truncate(p.c_str(), static_cast<off_t>(read_file(p).size() / 2)) == 0);
  });
}

TEST_CASE("three bytes overwritten mid-entry") {
  check_damage_recovers([](const std::string& dir, const Key& v, const Key&) {
    const std::string p = entry_path(dir, v);
    std::string data = read_file(p);
    data.replace(data.size() / 2, 3, "\x00\xff\x42", 3);
    write_file(p, data);
  });
}

TEST_CASE("header of a future format version") {
  check_damage_recovers([](const std::string& dir, const Key& v, const Key&) {
    const std::string p = entry_path(dir, v);
    std::string data = read_file(p);
    data[8] = 2;    // u32 LE version right after the 8-byte magic
    reseal(&data);  // a well-formed future entry, not a damaged one
    write_file(p, data);
  });
}

TEST_CASE("an entry copied under another key's name") {
  check_damage_recovers([](const std::string& dir, const Key& v, const Key& b) {
    write_file(entry_path(dir, v), read_file(entry_path(dir, b)));
  });
}

TEST_CASE("garbage that is not an entry at all") {
  check_damage_recovers([](const std::string& dir, const Key& v, const Key&) {
    write_file(entry_path(dir, v), std::string(4096, '\x7f'));
  });
}

TEST_CASE("a folder where an entry should be: miss, made, never thrown") {
  TempDir tmp;
  const Key k = key_of("dir-in-the-way");
  DiskCache cache(options_for(tmp.path()));
  ::mkdir((tmp.path() + "/v1/" + k.hex().substr(0, 2)).c_str(), 0755);
  REQUIRE(::mkdir(entry_path(tmp.path(), k).c_str(), 0755) == 0);
  bool made = false;
  Entry e = cache.get_or_make(
      k, [] { return entry_of("made"); }, &made);
  CHECK(made);
  CHECK(e.payload == "made");
  Stats s = cache.stats();
  CHECK(s.untrusted == 1);     // not a regular file: never read
  CHECK(s.write_errors == 1);  // rename cannot replace a folder
  CHECK(count_files(tmp.path(), ".tmp.") == 0);
}
