// Where things live inside a cache folder, and which file names the cache owns.
//
//   <dir>/v1/<2 hex>/<64 hex>.kjit                entries, sharded by the key's first byte
//   <dir>/v1/<2 hex>/<64 hex>.kjit.tmp.<pid>.<r>  a writer's temp file (same folder: atomic rename)
//   <dir>/v1/probe.tmp.<pid>.<r>                  the writability probe
//   <dir>/v1/locks/<64 hex>.lock                  per-key compile locks
//   <dir>/v1/evict.lock                           trim try-lock
//
// Only names matching these patterns are ever deleted; anything else in the folder is left alone.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kjit/cache/disk_cache.hpp"
#include "kjit/cache/key.hpp"

namespace kjit::cache::detail {

inline constexpr std::string_view kEntrySuffix = ".kjit";
inline constexpr std::string_view kLockSuffix = ".lock";
inline constexpr std::string_view kTempMarker = ".tmp.";
inline constexpr std::string_view kProbePrefix = "probe";
// No kernel comes near this: a bigger file at an entry's path, or an archive record claiming
// more, is never read into memory.
inline constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 30;

inline constexpr std::string_view kVersionFolder = "v1";
inline constexpr std::string_view kLockFolder = "locks";
inline constexpr std::string_view kEvictLock = "evict.lock";

inline std::string shard_name(const Key& k) {
  return k.hex().substr(0, 2);
}
inline std::string entry_name(const Key& k) {
  return k.hex() + std::string(kEntrySuffix);
}
inline std::string lock_name(const Key& k) {
  return k.hex() + std::string(kLockSuffix);
}

// A unique temp name beside `final_name` ("<final>.tmp.<pid>.<random hex>"). The pid only helps
// a person reading the folder: liveness is the writer's flock on the file (eviction.hpp).
std::string temp_path_for(const std::string& final_name);

bool is_shard_name(std::string_view name);
// "<64 lowercase hex>.kjit" whose first two digits equal `shard`.
bool is_entry_name(std::string_view name, std::string_view shard);
bool is_lock_name(std::string_view name);
// "<prefix>.tmp.<pid>.<hex>" for one of our prefixes; returns the writer's pid.
std::optional<pid_t> parse_temp_name(std::string_view name, std::string_view shard);

std::optional<Mode> parse_mode(std::string_view text);  // "off" | "ro" | "rw"

// stderr, prefixed "kjit: ". Shared so that every cache message looks the same.
void warn(const std::string& message);

}  // namespace kjit::cache::detail
