// Cache keys: SHA-256 (OpenSSL) over a length-prefixed record of named fields.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace kjit::cache {

struct Key {
  std::array<uint8_t, 32> bytes{};
  std::string hex() const;
  static bool from_hex(std::string_view hex, Key* out);
  bool operator==(const Key& o) const { return bytes == o.bytes; }
  bool operator!=(const Key& o) const { return bytes != o.bytes; }
};

// Every field is written as (len(name), name, len(value), value) so that no two different
// records can hash alike by shifting bytes between fields.
class KeyBuilder {
 public:
  KeyBuilder();
  ~KeyBuilder();
  KeyBuilder(const KeyBuilder&) = delete;
  KeyBuilder& operator=(const KeyBuilder&) = delete;

  KeyBuilder& add(std::string_view name, std::string_view value);
  KeyBuilder& add(std::string_view name, int64_t value);
  Key finish();  // the builder cannot be used afterwards

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// SHA-256 of a byte string (used for source digests and checksums).
std::array<uint8_t, 32> sha256(std::string_view data);

}  // namespace kjit::cache
