// What the remote tier stores under a key: kjit's entry format, signed (private to kjit_cache).
//
//   offset  size  field
//   0       8     magic "KJITRMT1"
//   8       32    HMAC-SHA256 under the fleet key of every byte after it
//   40      n     the entry exactly as the disk cache stores it (entry_format.hpp): magic,
//                 version, key copy, label, metadata, payload, SHA-256
//
// The HMAC is checked (in constant time) before the entry is parsed, so bytes that no holder of
// the fleet key wrote never reach the parser; the entry's own key copy must then be the key the
// value was found under, so a value signed for one kernel cannot be served for another.
#pragma once

#include <string>
#include <string_view>

#include "kjit/cache/disk_cache.hpp"
#include "kjit/cache/key.hpp"
#include "kjit/cache/remote_cache.hpp"

namespace kjit::cache::detail {

inline constexpr std::string_view kRemoteMagic("KJITRMT1", 8);
inline constexpr size_t kMacSize = 32;
inline constexpr size_t kRemoteHeaderSize = 8 + kMacSize;
inline constexpr size_t kMinFleetKeyBytes = 32;

// The fleet key that `o` gives (KJIT_REMOTE_CACHE_KEY, or the file KJIT_REMOTE_CACHE_KEY_FILE,
// which must be a regular file of this user's or root's that no one else may read): throws
// std::invalid_argument when there is none, it is too short, or the file breaks a rule.
std::string fleet_key(const RemoteOptions& o);

enum class ValueStatus { Ok, TooShort, Unsigned, BadSignature, Corrupt, WrongKey };

const char* describe(ValueStatus s);

std::string seal_value(std::string_view fleet_key, const Key& key, const Entry& entry);

// `out` is written only when the result is Ok. Never throws on any input (bad_alloc aside).
ValueStatus open_value(std::string_view fleet_key, const Key& key, std::string_view value,
                       Entry* out);

}  // namespace kjit::cache::detail
