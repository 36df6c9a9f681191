#include <doctest/doctest.h>

#include <cctype>
#include <set>
#include <stdexcept>
#include <vector>

#include "kjit/cache/key.hpp"

using kjit::cache::Key;
using kjit::cache::KeyBuilder;

namespace {

// The fields the runtime hashes, in a fixed order.
struct Fields {
  std::string format = "1", kjit = "0.1.0", source = "template <int N> __global__ void k() {}",
              inst = "k<4>", options = "-O3 --std=c++17", nvrtc = "13.0.88", arch = "sm_90";
  int64_t block = 256;

  Key key() const {
    return KeyBuilder()
        .add("format", format)
        .add("kjit", kjit)
        .add("source", source)
        .add("instantiation", inst)
        .add("options", options)
        .add("nvrtc", nvrtc)
        .add("arch", arch)
        .add("block", block)
        .finish();
  }
};

}  // namespace

TEST_CASE("sha256 matches the FIPS 180-2 test vector") {
  auto d = kjit::cache::sha256("abc");
  Key k;
  k.bytes = d;
  CHECK(k.hex() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("key derivation is deterministic") {
  Fields f;
  CHECK(f.key() == f.key());
  CHECK(f.key().hex() == Fields().key().hex());
}

TEST_CASE("every field changes the key") {
  const Fields base;
  std::vector<Fields> variants(9, base);
  variants[0].format = "2";
  variants[1].kjit = "0.1.1";
  variants[2].source += " ";
  variants[3].inst = "k<8>";
  variants[4].options = "-O2 --std=c++17";
  variants[5].nvrtc = "13.0.89";
  variants[6].arch = "sm_90a";
  variants[7].block = 257;
  variants[8].block = -256;
  std::set<std::string> seen{base.key().hex()};
  for (const auto& v : variants) CHECK(seen.insert(v.key().hex()).second);
}

TEST_CASE("shifting bytes between fields changes the key") {
  auto two = [](std::string_view a, std::string_view b) {
    return KeyBuilder().add("a", a).add("b", b).finish();
  };
  CHECK(two("ab", "c") != two("a", "bc"));
  CHECK(two("", "abc") != two("abc", ""));
  // Name/value boundary and field order matter too.
  CHECK(KeyBuilder().add("ab", "c").finish() != KeyBuilder().add("a", "bc").finish());
  CHECK(two("x", "y") != KeyBuilder().add("b", "y").add("a", "x").finish());
  // One field is not the same as two fields that concatenate to it.
  CHECK(KeyBuilder().add("a", "xy").finish() != KeyBuilder().add("a", "x").add("", "y").finish());
}

TEST_CASE("an integer field differs from a string field with the same bytes") {
  std::string le(8, '\0');
  le[0] = 5;
  CHECK(KeyBuilder().add("n", int64_t{5}).finish() != KeyBuilder().add("n", le).finish());
  CHECK(KeyBuilder().add("n", int64_t{5}).finish() != KeyBuilder().add("n", "5").finish());
}

TEST_CASE("hex round trip and rejection of malformed hex") {
  Key k = Fields().key();
  std::string hex = k.hex();
  CHECK(hex.size() == 64);
  CHECK(hex.find_first_not_of("0123456789abcdef") == std::string::npos);
  Key back;
  REQUIRE(Key::from_hex(hex, &back));
  CHECK(back == k);
  std::string upper = hex;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  REQUIRE(Key::from_hex(upper, &back));
  CHECK(back == k);
  CHECK_FALSE(Key::from_hex(hex.substr(1), &back));
  CHECK_FALSE(Key::from_hex(hex + "0", &back));
  CHECK_FALSE(Key::from_hex(std::string(63, '0') + "g", &back));
  CHECK_FALSE(Key::from_hex("", &back));
}

TEST_CASE("a finished builder refuses further use") {
  KeyBuilder b;
  b.add("a", "b");
  b.finish();
  CHECK_THROWS_AS(b.add("c", "d"), std::logic_error);
  CHECK_THROWS_AS(b.finish(), std::logic_error);
}
