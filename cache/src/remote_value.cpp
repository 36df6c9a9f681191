#include "remote_value.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>
#include <stdexcept>

#include "entry_format.hpp"

namespace kjit::cache::detail {
namespace {

std::array<unsigned char, kMacSize> mac(std::string_view fleet_key, std::string_view signed_part) {
  std::array<unsigned char, kMacSize> out{};
  unsigned int n = 0;
  if (!HMAC(EVP_sha256(), fleet_key.data(), static_cast<int>(fleet_key.size()),
            reinterpret_cast<const unsigned char*>(signed_part.data()), signed_part.size(),
            out.data(), &n) ||
      n != kMacSize)
    throw std::runtime_error("HMAC-SHA256 failed in OpenSSL");
  return out;
}

}  // namespace

const char* describe(ValueStatus s) {
  switch (s) {
    case ValueStatus::Ok:
      return "ok";
    case ValueStatus::TooShort:
      return "shorter than a signed value";
    case ValueStatus::Unsigned:
      return "not a signed kjit value";
    case ValueStatus::BadSignature:
      return "signature does not verify under the fleet key";
    case ValueStatus::Corrupt:
      return "signed but not a valid entry";
    case ValueStatus::WrongKey:
      return "signed for another key";
  }
  return "?";
}

std::string seal_value(std::string_view fleet_key, const Key& key, const Entry& entry) {
  const std::string body = serialize_entry(key, entry);
  const auto m = mac(fleet_key, body);
  std::string v;
  v.reserve(kRemoteHeaderSize + body.size());
  v.append(kRemoteMagic);
  v.append(reinterpret_cast<const char*>(m.data()), m.size());
  v.append(body);
  return v;
}

ValueStatus open_value(std::string_view fleet_key, const Key& key, std::string_view value,
                       Entry* out) {
  if (value.size() < kRemoteHeaderSize) return ValueStatus::TooShort;
  if (value.substr(0, kRemoteMagic.size()) != kRemoteMagic) return ValueStatus::Unsigned;
  const std::string_view body = value.substr(kRemoteHeaderSize);
  const auto m = mac(fleet_key, body);
  if (CRYPTO_memcmp(m.data(), value.data() + kRemoteMagic.size(), kMacSize) != 0)
    return ValueStatus::BadSignature;
  Key stored;
  Entry e;
  const ParseStatus p = parse_entry(body, nullptr, true, &stored, &e);
  if (p != ParseStatus::Ok) return ValueStatus::Corrupt;
  if (stored != key) return ValueStatus::WrongKey;
  *out = std::move(e);
  return ValueStatus::Ok;
}

}  // namespace kjit::cache::detail
