// Walking the cache folder and deleting what the cache owns: oldest entries (LRU by mtime, which
// get() refreshes on a hit), stale temp files and unused lock files.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cache_dir.hpp"

namespace kjit::cache::detail {

struct FileRecord {
  std::string path;
  std::string name;
  std::string shard;  // "" for files directly in <dir>/v1
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  pid_t pid = 0;  // writer of a temp file
};

struct Scan {
  std::vector<FileRecord> entries;  // sorted oldest first
  std::vector<FileRecord> temps;
  uint64_t entry_bytes = 0;
};

// Regular files only (symlinks and folders that happen to match a name are ignored).
Scan scan_cache(const Layout& layout);

// A temp file is abandoned when its writer is gone: its pid no longer exists on this host, or it
// is older than an hour (pid reused, or written from another host or pid namespace that shares
// the folder). Deleting a live writer's temp file is harmless anyway: its rename fails and it
// counts a write error; no reader ever sees a temp file.
inline constexpr int64_t kStaleTempAgeNs = 3600ll * 1000000000ll;
bool is_stale_temp(const FileRecord& temp, int64_t now_ns);
uint64_t remove_stale_temps(const Scan& scan, int64_t now_ns);
// Lock files nobody holds (left by killed processes). Uses the FileLock protocol, so it cannot
// break a lock that someone holds or is about to take.
uint64_t remove_unused_locks(const Layout& layout);

// Entries last used before `cutoff_ns`. Removed ones leave `scan`; returns how many.
uint64_t remove_older_than(Scan* scan, int64_t cutoff_ns);
// Oldest first until the entries total at most `target_bytes`. Entries it may not delete still
// count; with `give_up`, it stops once those alone reach the target (no deletion could: the
// automatic trim keeps the newer entries then), else it removes all it can (prune). Returns how
// many were removed.
uint64_t remove_oldest(Scan* scan, uint64_t target_bytes, bool give_up);

int64_t now_ns();

}  // namespace kjit::cache::detail
