// kjit disk cache: pure C++17, no CUDA. One verified file per entry, atomic publish,
// lock-free reads, optional per-key inter-process lock, size cap with approximate LRU.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kjit/cache/key.hpp"
#include "kjit/cache/remote_cache.hpp"

namespace kjit::cache {

enum class Mode { Off, ReadOnly, ReadWrite };

// What one entry holds. `payload` is opaque (a cubin, PTX or a tuning record);
// `metadata` carries what the runtime needs next to it (lowered names, arch, NVRTC version, log).
struct Entry {
  std::string
      label;  // human-readable: instantiation or problem description (shown by kjit-cache list)
  std::vector<std::pair<std::string, std::string>> metadata;
  std::string payload;

  const std::string* find(const std::string& name) const;  // metadata lookup, nullptr if absent
};

struct Stats {
  uint64_t hits = 0, misses = 0, compiles = 0, corrupt = 0;
  uint64_t read_errors = 0, write_errors = 0, evictions = 0;
  uint64_t oversized = 0;  // puts not stored: the entry alone was over half the size cap
  // Lookups that found an entry (or a folder on its path) that the trust policy refuses: owned
  // by another user, writable by others, or a symlink. Each is a miss, never served.
  uint64_t untrusted = 0;
  uint64_t bytes_read = 0, bytes_written = 0;
};

// The hook a shared or remote tier plugs its own check into (docs/API.md, "Trust"): a folder's
// owner check cannot vouch for bytes another machine wrote, a signature by a key the fleet holds
// can. seal() runs on every entry before it is written, problem() on every entry read before it
// is served (get, get_or_make, list, export, import).
class EntryCheck {
 public:
  virtual ~EntryCheck() = default;
  // Empty when `entry`, stored under `key`, may be served; else why not. A refused entry is a
  // miss counted as untrusted (it is recompiled and replaced), listed as bad, never exported,
  // and an archive holding one is not imported.
  virtual std::string problem(const Key& key, const Entry& entry) const = 0;
  // May add to the entry before it is written (e.g. metadata "signature": an HMAC over the key,
  // the metadata and the payload).
  virtual void seal(const Key& key, Entry* entry) const = 0;
};

struct Options {
  std::string dir;  // empty -> default_dir()
  Mode mode = Mode::ReadWrite;
  uint64_t max_bytes = 4ull << 30;  // size cap; trim to ~90% when exceeded; 0 = no cap
  std::chrono::milliseconds lock_timeout{60000};
  // Empty: the cache is private (this user and root only). A group name: a team's shared folder,
  // whose members are trusted too (folders made 2770, files 0660). See docs/API.md, "Trust".
  std::string shared_group;
  // Checked on every entry as well as the trust policy (null: the trust policy alone).
  std::shared_ptr<const EntryCheck> check;
  // The cache prints its warnings (folder refused, read-only fallback, first write error) to
  // stderr once each, unless quiet: the tools report the same problems as errors themselves.
  bool quiet = false;
  // The remote tier behind this cache (docs/API.md, "Remote cache"): url "" = none. Not used when
  // `mode` is Off. A miss on disk asks it; a hit is verified and written to disk; every put is
  // also published to it (in the background).
  RemoteOptions remote;

  // KJIT_CACHE_DIR, else $XDG_CACHE_HOME/kjit, else $HOME/.cache/kjit, else getpwuid's home,
  // else /tmp/kjit-cache-<uid>; KJIT_CACHE=off|ro|rw; KJIT_CACHE_MAX_SIZE (bytes, or with K/M/G
  // suffix); KJIT_CACHE_SHARED (a group name); KJIT_REMOTE_CACHE* (RemoteOptions::from_env).
  static Options from_env();
  static std::string default_dir();
};

struct EntryInfo {
  std::string key_hex, label, path;
  uint64_t size = 0;
  int64_t mtime = 0;  // seconds since epoch (last use)
  bool valid = true;
  std::string error;  // why invalid (never read: a folder, link or FIFO at an entry's name, an
                      // entry that the trust policy refuses, a file larger than any entry)
};

class DiskCache {
 public:
  // Throws std::invalid_argument only for a remote tier that is asked for (opts.remote.url) and
  // misconfigured (RemoteCache's constructor); a folder problem never throws.
  explicit DiskCache(Options opts);
  ~DiskCache();
  DiskCache(const DiskCache&) = delete;
  DiskCache& operator=(const DiskCache&) = delete;

  // Effective mode: ReadWrite falls back to ReadOnly when the dir is not writable, and
  // read_only_reason() then says why (empty otherwise); it also says why a folder that exists
  // cannot be read at all (a file at its path or above it, no permission to open or search it,
  // a path that cannot be resolved), in either mode: such a cache misses every lookup without
  // touching the path again. A folder that the trust policy refuses (it, or a folder above it,
  // is writable by another user, owned by one, or a symlink inside the cache) turns the cache
  // Off, and refused_reason() says which path breaks which rule.
  Mode mode() const;
  // False when the folder cannot be used at all: its path cannot be resolved, something other
  // than a folder is at it (or above it), or it (or its v1) cannot be opened or searched;
  // read_only_reason() says which. Every lookup then misses and nothing is listed, which a tool
  // should report rather than show as empty. (A folder it may search but not list still lists
  // nothing while its lookups work.)
  bool usable() const;
  const std::string& read_only_reason() const;
  const std::string& refused_reason() const;
  const std::string& dir() const;
  // The last write error ("<path>: <OS reason>" or the rule a folder breaks), empty when none.
  std::string last_error() const;

  // Verified read. Missing -> nullopt (miss). Anything wrong -> nullopt, counted corrupt. Never
  // throws. A miss asks the remote tier, whose verified hit is written to disk and returned.
  std::optional<Entry> get(const Key& key);
  // Atomic publish. Never throws; false and counted on failure. No-op (false) unless ReadWrite,
  // and for an entry over half the size cap (counted as oversized: storing it would evict the
  // whole cache, itself included, at the next trim). Queued for the remote tier in any mode.
  bool put(const Key& key, const Entry& entry);

  // get; on a miss take the per-key lock (bounded wait), get again, else call `make`, put, release.
  // `make` exceptions propagate (a compile error is the caller's error, not a cache error).
  // *made tells whether `make` ran in this call. Counts `compiles` when make ran.
  Entry get_or_make(const Key& key, const std::function<Entry()>& make, bool* made = nullptr);

  Stats stats() const;
  void count_compile();
  // The remote tier, or nullptr when none is configured.
  RemoteCache* remote();  // for callers that compile outside get_or_make

  // Maintenance (kjit-cache tool). These walk the folder; not for hot paths.
  // list, total_bytes and export_to only read, in any mode; prune and clear do nothing
  // (return 0) unless the effective mode is ReadWrite, and import_from then throws.
  std::vector<EntryInfo> list(bool verify_checksums = false);
  uint64_t total_bytes();
  // Delete until total <= target_bytes (oldest mtime first) and/or entries older than max_age.
  // Returns the number of entries removed. Only files the cache owns are ever deleted.
  uint64_t prune(std::optional<uint64_t> target_bytes, std::optional<std::chrono::seconds> max_age);
  uint64_t clear();
  // One archive file holding every valid entry; import verifies each and publishes atomically.
  // export_to writes a temp file beside archive_path, then renames it; throws std::runtime_error
  // on I/O errors (and leaves no temp file). import reads the archive through one descriptor
  // twice: the first pass proves it sound and refuses duplicate keys, the second publishes only
  // entries identical to what the first pass checked. Both return the number of entries.
  uint64_t export_to(const std::string& archive_path);
  uint64_t import_from(
      const std::string& archive_path);  // throws std::runtime_error on a bad archive

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kjit::cache
