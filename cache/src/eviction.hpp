// Walking the cache folder and deleting what the cache owns: oldest entries (LRU by mtime, which
// get() refreshes on a hit), abandoned temp files and unused lock files. Every name is reached
// from the v1 folder's descriptor without following a symlink, and only regular files are
// deleted (a link planted at an entry's name is removed by clear, never what it points to).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cache_dir.hpp"
#include "folder.hpp"

namespace kjit::cache::detail {

struct FileRecord {
  std::string shard;  // "" for names directly in <dir>/v1
  std::string name;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  mode_t type = S_IFREG;  // S_IFMT bits: foreign records are not regular files
};

struct Scan {
  std::vector<FileRecord> entries;  // regular files at entry names, oldest first
  std::vector<FileRecord> temps;    // writers' temp files and writability probes
  // Something else at a name the cache owns (an entry name or a shard name): a folder, a symlink,
  // a FIFO. Never read; reported by verify and removed by clear.
  std::vector<FileRecord> foreign;
  uint64_t entry_bytes = 0;
};

Scan scan_cache(const Folder& v1);
std::string record_path(const Folder& v1, const FileRecord& r);

// A temp file is abandoned when no writer holds the flock that every writer takes on its temp
// file as soon as it creates it, and it is older than kTempGraceNs (the moment between a
// writer's create and its flock). A lock works across PID namespaces and hosts sharing the
// folder, which a pid test does not.
// Deleting a live writer's temp file in that moment would only cost it a failed rename (a counted
// write error): no reader ever sees a temp file.
inline constexpr int64_t kTempGraceNs = 10ll * 1000000000ll;
uint64_t remove_stale_temps(const Folder& v1, const Scan& scan, int64_t now_ns);
// Lock files nobody holds (left by killed processes). Uses the FileLock protocol, so it cannot
// break a lock that someone holds or is about to take.
uint64_t remove_unused_locks(const Folder& v1, const Trust& trust);
// Foreign things at the cache's names: links, FIFOs and empty folders are removed (a link itself,
// never its target); returns how many.
uint64_t remove_foreign(const Folder& v1, Scan* scan);

// Entries last used before `cutoff_ns`. Removed ones leave `scan`; returns how many.
uint64_t remove_older_than(const Folder& v1, Scan* scan, int64_t cutoff_ns);
// Oldest first until the entries total at most `target_bytes`. Entries it may not delete still
// count; with `give_up`, it stops once those alone reach the target (no deletion could: the
// automatic trim keeps the newer entries then), else it removes all it can (prune). Returns how
// many were removed.
uint64_t remove_oldest(const Folder& v1, Scan* scan, uint64_t target_bytes, bool give_up);

int64_t now_ns();

}  // namespace kjit::cache::detail
