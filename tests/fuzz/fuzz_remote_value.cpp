// libFuzzer target: what the remote tier reads from the network (cache/src/remote_value.cpp,
// remote_url.cpp). Whoever can write to the Redis chooses every byte of a value; whoever sets
// KJIT_REMOTE_CACHE chooses the URL.
//
// The first byte picks the mode. 0: the rest is a value, opened as it is. 1: the rest is a value
// whose HMAC is recomputed under the fleet key first, so that the entry parser behind the
// signature is reached. In both, whatever opens must be exactly what seal_value writes for the
// key and entry (no other bytes open: mode 0 reaches genuine values too, from mode 1 seeds whose
// first byte a mutation changed), and must not open under another fleet key or for another cache
// key. 2: the rest is a URL: parsed or refused with std::invalid_argument, and neither the
// message nor redacted() holds the password.
#include <openssl/hmac.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

#include "kjit/cache/remote_cache.hpp"
#include "remote_value.hpp"

using namespace kjit::cache;
using namespace kjit::cache::detail;

namespace {

const std::string kFleetKey(32, 'f');

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_remote_value: %s\n", what);
  std::abort();
}

// The HMAC over the body replaced by the right one (a value shorter than the header is kept).
std::string resign(std::string v) {
  if (v.size() < kRemoteHeaderSize) return v;
  unsigned char mac[32];
  unsigned int n = 0;
  const std::string_view body = std::string_view(v).substr(kRemoteHeaderSize);
  HMAC(EVP_sha256(), kFleetKey.data(), static_cast<int>(kFleetKey.size()),
       reinterpret_cast<const unsigned char*>(body.data()), body.size(), mac, &n);
  v.replace(kRemoteMagic.size(), kMacSize, reinterpret_cast<const char*>(mac), kMacSize);
  return v;
}

void check_value(std::string_view value) {
  Key stored;  // the cache key the entry inside claims, where the value is long enough
  const size_t key_at = kRemoteHeaderSize + 12;
  if (value.size() >= key_at + 32) std::memcpy(stored.bytes.data(), value.data() + key_at, 32);
  Key other = stored;
  other.bytes[0] ^= 1;
  Entry e;
  const ValueStatus s = open_value(kFleetKey, stored, value, &e);
  if (describe(s) == nullptr) fail("describe() returned null");
  if (s != ValueStatus::Ok) return;
  if (seal_value(kFleetKey, stored, e) != value) fail("seal_value of what opened differs");
  Entry unused;
  if (open_value(kFleetKey, other, value, &unused) != ValueStatus::WrongKey)
    fail("a value opened for another cache key");
  if (open_value(std::string(32, 'g'), stored, value, &unused) != ValueStatus::BadSignature)
    fail("a value opened under another fleet key");
}

void check_url(const std::string& text) {
  try {
    const RemoteUrl u = RemoteUrl::parse(text);
    if (u.port < 1 || u.port > 65535 || u.host.empty() || u.db < 0) fail("parsed out of range");
    RemoteUrl other = u;  // what redacted() prints must not depend on the password
    other.password = u.password.empty() ? "" : u.password + "x";
    if (other.redacted() != u.redacted()) fail("redacted() depends on the password");
  } catch (const std::invalid_argument&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      check_value(rest);
      break;
    case 1:
      check_value(resign(rest));
      break;
    default:
      check_url(rest);
  }
  return 0;
}
