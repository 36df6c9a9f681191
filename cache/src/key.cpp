#include "kjit/cache/key.hpp"

#include <stdexcept>

#include "sha256.hpp"

namespace kjit::cache {

namespace {

// Domain separation: a key can never equal the SHA-256 of some other kjit record.
constexpr std::string_view kKeyDomain("kjit.cache.key.v1", 17);

// A type tag keeps add("n", int64 5) distinct from add("n", <the same 8 bytes as a string>).
constexpr char kStringTag = 's';
constexpr char kIntTag = 'i';

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string Key::hex() const {
  static const char digits[] = "0123456789abcdef";
  std::string out(bytes.size() * 2, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 0xf];
  }
  return out;
}

bool Key::from_hex(std::string_view hex, Key* out) {
  if (hex.size() != 64) return false;
  Key k;
  for (size_t i = 0; i < k.bytes.size(); ++i) {
    int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    k.bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  if (out) *out = k;
  return true;
}

struct KeyBuilder::Impl {
  detail::Sha256 sha;
  bool finished = false;

  void field(char tag, std::string_view name, std::string_view value) {
    if (finished) throw std::logic_error("kjit::cache::KeyBuilder used after finish()");
    sha.update(std::string_view(&tag, 1));
    sha.update_u64(name.size());
    sha.update(name);
    sha.update_u64(value.size());
    sha.update(value);
  }
};

KeyBuilder::KeyBuilder() : impl_(std::make_unique<Impl>()) {
  impl_->sha.update_u64(kKeyDomain.size());
  impl_->sha.update(kKeyDomain);
}

KeyBuilder::~KeyBuilder() = default;

KeyBuilder& KeyBuilder::add(std::string_view name, std::string_view value) {
  impl_->field(kStringTag, name, value);
  return *this;
}

KeyBuilder& KeyBuilder::add(std::string_view name, int64_t value) {
  char le[8];
  const auto u = static_cast<uint64_t>(value);
  for (int i = 0; i < 8; ++i) le[i] = static_cast<char>(u >> (8 * i));
  impl_->field(kIntTag, name, std::string_view(le, sizeof le));
  return *this;
}

Key KeyBuilder::finish() {
  if (impl_->finished) throw std::logic_error("kjit::cache::KeyBuilder::finish() called twice");
  impl_->finished = true;
  Key k;
  k.bytes = impl_->sha.finish();
  return k;
}

std::array<uint8_t, 32> sha256(std::string_view data) {
  detail::Sha256 sha;
  sha.update(data);
  return sha.finish();
}

}  // namespace kjit::cache
