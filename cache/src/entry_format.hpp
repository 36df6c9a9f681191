// On-disk format of one cache entry (private to kjit_cache).
//
//   offset  size  field
//   0       8     magic "KJITCAC\0"
//   8       4     format version, u32 LE (kEntryFormatVersion)
//   12      32    key (raw SHA-256 bytes)
//   44      8+n   label: u64 LE length, bytes
//           8     metadata count, u64 LE; then per pair: u64 len, name, u64 len, value
//           8+n   payload: u64 LE length, bytes
//   end-32  32    SHA-256 of every byte before it
//
// Every length is checked against the bytes that remain, so a damaged length can never make
// the parser read past the end or allocate more than the file holds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kjit/cache/disk_cache.hpp"
#include "kjit/cache/key.hpp"

namespace kjit::cache::detail {

inline constexpr std::string_view kEntryMagic("KJITCAC\0", 8);
inline constexpr uint32_t kEntryFormatVersion = 1;
inline constexpr size_t kEntryVersionOffset = 8;
inline constexpr size_t kEntryKeyOffset = 12;
inline constexpr size_t kChecksumSize = 32;
inline constexpr size_t kEntryHeaderSize = kEntryKeyOffset + 32;  // magic, version, key

enum class ParseStatus { Ok, TooShort, BadMagic, BadVersion, BadChecksum, KeyMismatch, BadLength };

const char* describe(ParseStatus s);

std::string serialize_entry(const Key& key, const Entry& entry);

// The fixed header alone (at least kEntryHeaderSize bytes): magic, version and, when `expected`
// is given, the key. Readers check it before reading a body that may be large.
ParseStatus check_entry_header(std::string_view head, const Key* expected);

// `expected` (optional) must equal the stored key. `verify_checksum` = false skips hashing for
// callers that only want the label (listing); every length is still bounds-checked.
ParseStatus parse_entry(std::string_view file, const Key* expected, bool verify_checksum,
                        Key* key_out, Entry* out);

}  // namespace kjit::cache::detail
