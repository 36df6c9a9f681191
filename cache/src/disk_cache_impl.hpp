// DiskCache's state, shared by its sources (disk_cache.cpp: lookups, publishing, trimming;
// disk_cache_maintenance.cpp: list, prune, export, import).
#pragma once

#include <atomic>
#include <mutex>
#include <optional>
#include <string>

#include "cache_dir.hpp"
#include "folder.hpp"
#include "kjit/cache/disk_cache.hpp"
#include "trust.hpp"

namespace kjit::cache {

enum class Lookup { Hit, Miss, Corrupt, ReadError, Untrusted };

struct DiskCache::Impl {
  Options opts;
  std::unique_ptr<detail::Trust> trust;
  std::unique_ptr<RemoteCache> remote;  // null: no remote tier
  std::string root;  // opts.dir resolved (a symlink given by the user is followed once, here)
  Mode mode;
  int stall_write_ms;
  std::string read_only_reason;  // why a ReadWrite cache fell back to ReadOnly, or is unusable
  std::string refused_reason;    // why the trust policy turned the cache off
  // Set (only) by the constructor when the folder cannot be used at all: no lookup or listing
  // touches the path again (an unresolved path is never opened; one whose folders change later is
  // not read without the checks it failed).
  bool unreachable = false;

  std::atomic<uint64_t> hits{0}, misses{0}, compiles{0}, corrupt{0};
  std::atomic<uint64_t> read_errors{0}, write_errors{0}, evictions{0}, oversized{0};
  std::atomic<uint64_t> untrusted{0}, bytes_read{0}, bytes_written{0};

  // Approximate bytes on disk: one scan on the first put, then our own puts added. Other
  // processes' writes are only seen at the next trim's scan, which is what "approximate" buys.
  std::mutex total_mu;
  bool total_known = false;
  uint64_t written_since_scan = 0;  // our bytes since the last scan (guarded by total_mu)
  std::atomic<uint64_t> approx_total{0};
  // When a trim could not get under the cap (files it may not delete), wait before rescanning
  // instead of walking the whole folder on every put.
  std::atomic<int64_t> next_trim_ns{0};

  mutable std::mutex error_mu;
  std::string last_error;  // guarded by error_mu
  bool warned_write = false, warned_untrusted = false;

  explicit Impl(Options o);

  // <root>/v1 (made when `create`), checked by the trust policy like every folder on the way.
  detail::OpenStatus open_v1(bool create, detail::Folder* v1, std::string* why) const;
  detail::OpenStatus open_shard(const Key& key, bool create, detail::Folder* shard,
                                std::string* why) const;

  Lookup lookup(const Key& key, Entry* out);
  // The remote tier's verified entry, written to disk (when writable); false on any miss.
  // *missed (when given): the server answered, without a value (not a failure).
  bool fetch_remote(const Key& key, Entry* out, bool* missed = nullptr);
  // After fetch_remote's miss, before compiling: the fleet's compile lease (RemoteCache::
  // claim_or_wait). True with *out when another process's compile arrived; *leased when ours.
  bool wait_for_fleet(const Key& key, bool* leased, Entry* out);
  bool put_local(const Key& key, const Entry& entry);
  // Queues `entry` for the remote tier, sealed by opts.check as put_local writes it.
  void publish_remote(const Key& key, const Entry& entry);
  // A remote value (none: false) into *out and, when writable, onto disk. The HMAC vouches that
  // a fleet member wrote it; opts.check, which every entry read must pass, decides whether this
  // cache serves it (a refusal is counted untrusted).
  bool accept_remote(const Key& key, std::optional<Entry> e, Entry* out);
  std::string publish(const Key& key, const std::string& bytes);  // empty, or why it failed
  void account_put(uint64_t size);
  void trim_if_over_cap();
  void count(Lookup r);
  void note_write_error(const std::string& why);
  void note_untrusted(const std::string& why);
  void warn(const std::string& message) const;

 private:
  void refuse(const std::string& why);
  void unusable(const std::string& why);
  void check_writable();
  void check_readable();
};

}  // namespace kjit::cache
