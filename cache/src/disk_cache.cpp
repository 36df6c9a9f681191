#include "kjit/cache/disk_cache.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>

#include "cache_dir.hpp"
#include "disk_cache_impl.hpp"
#include "entry_format.hpp"
#include "entry_reader.hpp"
#include "eviction.hpp"
#include "file_lock.hpp"
#include "posix_io.hpp"

namespace kjit::cache {

using namespace detail;

namespace {

// A hit refreshes the entry's mtime (the LRU clock) only when it is older than this, so a hot
// entry costs one metadata write a minute, not one per lookup.
constexpr int64_t kTouchIntervalNs = 60ll * 1000000000ll;
// Trim goes this far below the cap so that it does not run again on the very next put.
constexpr uint64_t kTrimPercent = 90;
constexpr int64_t kTrimRetryNs = 60ll * 1000000000ll;
// Test hook (fault suite): sleep this long after writing half of an entry, so that a test can
// SIGKILL a writer mid-write.
constexpr const char* kStallEnv = "KJIT_CACHE_TEST_STALL_WRITE_MS";

// One warning per folder per process, however many caches are opened on it.
bool first_time_for(const std::string& what) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mu);
  return seen.insert(what).second;
}

// Why lookups could not search `f` (no execute permission for this process), or empty. Asks the
// kernel with a name that is never an entry: ENOENT means the folder is searchable.
std::string search_problem(const Folder& f) {
  struct stat st;
  if (::fstatat(f.fd(), ".kjit-search-probe", &st, AT_SYMLINK_NOFOLLOW) == 0 || errno == ENOENT)
    return {};
  return f.path() + ": cannot search it: " + errno_text(errno);
}

// For a cache folder that is missing: the deepest existing path on the way down to `path`, when
// it is something other than a folder (a file where a folder goes, at any level), or cannot be
// looked at; empty when the rest is merely not made yet.
std::string blocked_path(std::string p) {
  for (;;) {
    struct stat st;
    if (::lstat(p.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) return {};
      return p + (S_ISLNK(st.st_mode) ? ": is a symbolic link" : ": not a directory");
    }
    if (errno != ENOENT && errno != ENOTDIR) return p + ": " + errno_text(errno);
    if (p == "/" || p.find('/') == std::string::npos) return {};
    p = parent_folder(p);
  }
}

int stall_ms_from_env() {
  const char* v = std::getenv(kStallEnv);
  return v ? std::atoi(v) : 0;
}

int write_stalled(int fd, const std::string& bytes, int stall_ms) {
  std::string_view all(bytes);
  if (stall_ms <= 0) return write_all(fd, all);
  const size_t half = all.size() / 2;
  if (int err = write_all(fd, all.substr(0, half))) return err;
  std::this_thread::sleep_for(std::chrono::milliseconds(stall_ms));
  return write_all(fd, all.substr(half));
}

}  // namespace

DiskCache::Impl::Impl(Options o)
    : opts(std::move(o)), root(opts.dir), mode(opts.mode), stall_write_ms(stall_ms_from_env()) {
  try {
    trust = std::make_unique<Trust>(opts.shared_group);
  } catch (const std::exception& e) {
    trust = std::make_unique<Trust>();
    refuse(e.what());
    return;
  }
  if (mode == Mode::Off) return;
  std::string why;
  bool untrusted = false;
  root = resolve_path(opts.dir, *trust, &why, &untrusted);
  if (root.empty()) {
    root = opts.dir;
    if (untrusted) {
      refuse(why);
    } else {  // cannot be resolved (a folder on the way we may not search): nothing to use
      unusable(why);
    }
  } else if (why = trust->chain_problem(root); !why.empty()) {
    refuse(why);
  } else if (mode == Mode::ReadWrite) {
    check_writable();
  } else {
    check_readable();
  }
}

// A missing folder is an empty read-only cache; one that exists but cannot be opened or
// searched (a file at its path or above it, no permission) is a mistake worth a warning, or every
// lookup would quietly miss (or count a read error).
void DiskCache::Impl::check_readable() {
  Folder top, v1;
  std::string why;
  OpenStatus s = Folder::open(root, false, trust.get(), &top, &why);
  if (s == OpenStatus::Ok) {
    if (why = search_problem(top); !why.empty()) return unusable(why);
    s = top.sub(kVersionFolder, false, trust.get(), &v1, &why);
    if (s == OpenStatus::Ok && !(why = search_problem(v1)).empty()) return unusable(why);
  }
  if (s == OpenStatus::Untrusted) return refuse(why);
  if (s == OpenStatus::Failed) return unusable(why);
  if (s != OpenStatus::Missing) return;
  if (why = blocked_path(root + "/" + std::string(kVersionFolder)); !why.empty()) unusable(why);
}

void DiskCache::Impl::unusable(const std::string& why) {
  read_only_reason = why;
  if (first_time_for("unusable " + opts.dir))
    warn("cache dir " + opts.dir + " cannot be used (" + why + "); using no cache");
  mode = Mode::ReadOnly;  // nothing is written, and with `unreachable` every lookup misses
  unreachable = true;
}

void DiskCache::Impl::refuse(const std::string& why) {
  mode = Mode::Off;
  refused_reason = "cache folder " + opts.dir + " is not used: " + why +
                   " (kjit loads GPU code only from folders that no other user can write; "
                   "KJIT_CACHE_SHARED=<group> allows a team's folder)";
  if (first_time_for("refused " + opts.dir)) warn(refused_reason);
}

// Creating a file is the only honest test: access() says yes to root on a 0555 folder and knows
// nothing about read-only bind mounts. A folder that cannot be written is then checked as a
// read-only one is, so that one that cannot be read either says so the same way in both modes.
void DiskCache::Impl::check_writable() {
  Folder v1;
  std::string why;
  const OpenStatus s = open_v1(true, &v1, &why);
  if (s == OpenStatus::Untrusted) return refuse(why);
  if (s == OpenStatus::Ok) {
    const std::string probe = temp_path_for(std::string(kProbePrefix));
    UniqueFd fd = v1.create_file(probe, *trust);
    if (fd.valid())
      ::unlinkat(v1.fd(), probe.c_str(), 0);
    else
      why = v1.path() + ": cannot create a file in it: " + errno_text(errno);
  }
  if (why.empty()) return;
  check_readable();
  if (mode == Mode::Off || unreachable) return;
  read_only_reason = why;
  mode = Mode::ReadOnly;
  if (first_time_for("read-only " + opts.dir))
    warn("cache dir " + opts.dir + " is not writable (" + why + "); using it read-only");
}

void DiskCache::Impl::warn(const std::string& message) const {
  if (!opts.quiet) detail::warn(message);
}

OpenStatus DiskCache::Impl::open_v1(bool create, Folder* v1, std::string* why) const {
  if (unreachable) {
    *why = read_only_reason;
    return OpenStatus::Missing;  // a miss, as the warning said: "using no cache"
  }
  Folder top;
  const OpenStatus s = Folder::open(root, create, trust.get(), &top, why);
  return s == OpenStatus::Ok ? top.sub(kVersionFolder, create, trust.get(), v1, why) : s;
}

OpenStatus DiskCache::Impl::open_shard(const Key& key, bool create, Folder* shard,
                                       std::string* why) const {
  Folder v1;
  const OpenStatus s = open_v1(create, &v1, why);
  return s == OpenStatus::Ok ? v1.sub(shard_name(key), create, trust.get(), shard, why) : s;
}

void DiskCache::Impl::note_write_error(const std::string& why) {
  ++write_errors;
  std::lock_guard<std::mutex> lock(error_mu);
  last_error = why;
  if (!warned_write) {
    warned_write = true;
    warn("cannot write to the cache: " + why + " (later write errors are only counted)");
  }
}

void DiskCache::Impl::note_untrusted(const std::string& why) {
  std::lock_guard<std::mutex> lock(error_mu);
  if (!warned_untrusted) {
    warned_untrusted = true;
    warn("not using " + why + ": kjit runs only entries that no other user can write " +
         "(later ones are only counted)");
  }
}

Lookup DiskCache::Impl::lookup(const Key& key, Entry* out) {
  Folder shard;
  std::string why;
  const OpenStatus s = open_shard(key, false, &shard, &why);
  if (s == OpenStatus::Missing) return Lookup::Miss;
  if (s == OpenStatus::Untrusted) {
    note_untrusted(why);
    return Lookup::Untrusted;
  }
  if (s != OpenStatus::Ok) return Lookup::ReadError;
  EntryRead r = read_entry_file(shard, entry_name(key), *trust, &key, true, out);
  switch (r.status) {
    case ReadStatus::Ok:
      break;
    case ReadStatus::Missing:
      return Lookup::Miss;
    case ReadStatus::Untrusted:
      note_untrusted(r.why);
      return Lookup::Untrusted;
    case ReadStatus::Corrupt:
      return Lookup::Corrupt;
    case ReadStatus::Failed:
      return Lookup::ReadError;
  }
  if (opts.check) {
    if (const std::string refusal = opts.check->problem(key, *out); !refusal.empty()) {
      note_untrusted(shard.path_of(entry_name(key)) + ": " + refusal);
      return Lookup::Untrusted;
    }
  }
  bytes_read += r.bytes.size();
  // futimens on the descriptor we verified: a path-based touch could hit a file renamed in since.
  // Read-only mode writes nothing, not even timestamps.
  if (mode == Mode::ReadWrite && now_ns() - r.mtime_ns > kTouchIntervalNs)
    ::futimens(r.fd.get(), nullptr);
  return Lookup::Hit;
}

void DiskCache::Impl::count(Lookup r) {
  if (r == Lookup::Hit) {
    ++hits;
    return;
  }
  ++misses;
  if (r == Lookup::Corrupt) ++corrupt;
  if (r == Lookup::ReadError) ++read_errors;
  if (r == Lookup::Untrusted) ++untrusted;
}

// No fsync: a reader verifies the checksum of every entry, so the torn or empty file that a
// power loss may leave behind a rename is just a miss that recompiles. fsync would cost every
// put a journal commit (milliseconds, far more on NFS) to protect data we can regenerate.
std::string DiskCache::Impl::publish(const Key& key, const std::string& bytes) {
  // The whole folder may have been deleted under a running process (rm -rf ~/.cache/kjit):
  // it is made again rather than every put failing until restart.
  Folder shard;
  std::string why;
  if (open_shard(key, true, &shard, &why) != OpenStatus::Ok) return why;
  const std::string final_name = entry_name(key);
  std::string temp;
  UniqueFd fd;
  // Names are random; a clash (EEXIST) is retried with a new name, anything else is a failure.
  for (int attempt = 0; attempt < 4 && !fd.valid(); ++attempt) {
    temp = temp_path_for(final_name);
    fd = shard.create_file(temp, *trust);
    if (!fd.valid() && errno != EEXIST)
      return shard.path_of(temp) + ": cannot create it: " + errno_text(errno);
  }
  if (!fd.valid()) return shard.path_of(temp) + ": cannot create it: " + errno_text(EEXIST);
  // The flock says "a writer is alive" to prune (eviction.hpp). It belongs to the open file
  // description, so the duplicate keeps it held after the checked close, until the rename.
  lock_now(fd.get());
  UniqueFd hold(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 0));
  int err = write_stalled(fd.get(), bytes, stall_write_ms);
  // close() is where NFS reports a failed flush: only a clean close may be published.
  if (int close_err = fd.close_checked(); err == 0) err = close_err;
  if (err == 0 && (err = shard.rename(temp, final_name)) != 0) {
    ::unlinkat(shard.fd(), temp.c_str(), 0);
    return shard.path_of(final_name) + ": cannot publish it: " + errno_text(err);
  }
  if (err != 0) {
    ::unlinkat(shard.fd(), temp.c_str(), 0);
    return shard.path_of(temp) + ": " + errno_text(err);
  }
  return {};
}

void DiskCache::Impl::account_put(uint64_t size) {
  {
    std::lock_guard<std::mutex> lock(total_mu);
    Folder v1;
    std::string why;
    const bool scan = !total_known ||
                      // Other processes write too: rescan after each 1/16 of the cap that we
                      // wrote, so that N long-lived writers overshoot the cap by at most N/16.
                      (opts.max_bytes != 0 && (written_since_scan += size) >= opts.max_bytes / 16);
    if (scan && open_v1(false, &v1, &why) == OpenStatus::Ok) {
      approx_total = scan_cache(v1).entry_bytes;  // includes the entry just written
      total_known = true;
      written_since_scan = 0;
    } else {
      approx_total += size;
    }
  }
  trim_if_over_cap();
}

void DiskCache::Impl::trim_if_over_cap() {
  const uint64_t cap = opts.max_bytes;
  if (cap == 0 || approx_total.load() <= cap || now_ns() < next_trim_ns.load()) return;
  Folder v1;
  std::string why;
  if (open_v1(false, &v1, &why) != OpenStatus::Ok) return;
  // Try-lock: when another process or thread is trimming, it does the work for us.
  auto lock = FileLock::try_acquire(v1, std::string(kEvictLock), *trust, false);
  if (!lock) return;
  Scan scan = scan_cache(v1);
  remove_stale_temps(v1, scan, now_ns());
  evictions += remove_oldest(v1, &scan, cap / 100 * kTrimPercent + cap % 100 * kTrimPercent / 100,
                             /*give_up=*/true);
  approx_total = scan.entry_bytes;
  if (approx_total.load() > cap) next_trim_ns = now_ns() + kTrimRetryNs;
}

DiskCache::DiskCache(Options opts) {
  if (opts.dir.empty()) opts.dir = Options::default_dir();
  impl_ = std::make_unique<Impl>(std::move(opts));
  // KJIT_CACHE=off means no cache at all; a folder the trust policy refused still has the tier.
  if (!impl_->opts.remote.url.empty() && impl_->opts.mode != Mode::Off)
    impl_->remote = std::make_unique<RemoteCache>(impl_->opts.remote);
}

DiskCache::~DiskCache() = default;

Mode DiskCache::mode() const {
  return impl_->mode;
}
bool DiskCache::usable() const {
  return !impl_->unreachable;
}
const std::string& DiskCache::read_only_reason() const {
  return impl_->read_only_reason;
}
const std::string& DiskCache::refused_reason() const {
  return impl_->refused_reason;
}
const std::string& DiskCache::dir() const {
  return impl_->opts.dir;
}
std::string DiskCache::last_error() const {
  std::lock_guard<std::mutex> lock(impl_->error_mu);
  return impl_->last_error;
}

std::optional<Entry> DiskCache::get(const Key& key) {
  try {
    Entry e;
    Lookup r = impl_->mode == Mode::Off ? Lookup::Miss : impl_->lookup(key, &e);
    impl_->count(r);
    if (r == Lookup::Hit || impl_->fetch_remote(key, &e)) return e;
  } catch (...) {  // bad_alloc on a huge file: a failed read, never an exception for the caller
    ++impl_->read_errors;
    ++impl_->misses;
  }
  return std::nullopt;
}

bool DiskCache::Impl::put_local(const Key& key, const Entry& entry) {
  if (mode != Mode::ReadWrite) return false;
  try {
    Entry sealed;
    const Entry* to_write = &entry;
    if (opts.check) {
      sealed = entry;
      opts.check->seal(key, &sealed);
      to_write = &sealed;
    }
    std::string bytes = serialize_entry(key, *to_write);
    // An entry over half the cap would make the next trim evict everything, itself included.
    const uint64_t cap = opts.max_bytes;
    if (cap != 0 && bytes.size() > cap / 2) {
      if (oversized++ == 0)  // once per cache: every such put would say the same
        warn("not caching " + entry.label + " (" + std::to_string(bytes.size()) +
             " bytes): entries over half of the size cap (" + std::to_string(cap) +
             " bytes, KJIT_CACHE_MAX_SIZE) are not stored");
      return false;
    }
    if (std::string why = publish(key, bytes); !why.empty()) {
      note_write_error(why);
      return false;
    }
    bytes_written += bytes.size();
    account_put(bytes.size());
    return true;
  } catch (const std::exception& e) {
    note_write_error(std::string("cannot write entry ") + key.hex() + ": " + e.what());
    return false;
  }
}

bool DiskCache::put(const Key& key, const Entry& entry) {
  const bool stored = impl_->put_local(key, entry);
  if (impl_->remote) impl_->publish_remote(key, entry);
  return stored;
}

void DiskCache::Impl::publish_remote(const Key& key, const Entry& entry) {
  try {
    // Sealed as the disk stores it, so that the fleet's caches with the same check accept it.
    Entry sealed;
    if (opts.check) {
      sealed = entry;
      opts.check->seal(key, &sealed);
    }
    remote->publish(key, opts.check ? sealed : entry);  // never blocks: a bounded queue
  } catch (const std::exception&) {  // bad_alloc, or the check failed: not published
  }
}

bool DiskCache::Impl::accept_remote(const Key& key, std::optional<Entry> e, Entry* out) {
  if (!e) return false;
  if (opts.check) {
    const std::string refusal = opts.check->problem(key, *e);
    if (!refusal.empty()) {
      ++untrusted;
      note_untrusted("the remote tier's value for " + key.hex() + ": " + refusal);
      return false;
    }
  }
  // Sealed and checked like any entry: what lands on disk is this user's file again.
  if (mode == Mode::ReadWrite) put_local(key, *e);
  *out = std::move(*e);
  return true;
}

bool DiskCache::Impl::wait_for_fleet(const Key& key, bool* leased, Entry* out) {
  return remote && accept_remote(key, remote->claim_or_wait(key, leased), out);
}

bool DiskCache::Impl::fetch_remote(const Key& key, Entry* out, bool* missed) {
  return remote && accept_remote(key, remote->get(key, missed), out);
}

Entry DiskCache::get_or_make(const Key& key, const std::function<Entry()>& make, bool* made) {
  if (made) *made = false;
  Impl& m = *impl_;
  Entry e;
  Lookup first = Lookup::Miss;
  std::optional<FileLock> lock;
  bool leased = false;  // this process holds the fleet's compile lease on `key`
  try {
    if (m.mode != Mode::Off) first = m.lookup(key, &e);
    if (first == Lookup::Hit) {
      m.count(first);
      return e;
    }
    if (m.mode == Mode::ReadWrite) {
      // Serialize compiles of this key across processes. If the lock cannot be had (timeout,
      // lock folder not creatable) we compile anyway: a duplicate compile beats a stuck op.
      Folder v1, locks;
      std::string why;
      if (m.open_v1(true, &v1, &why) == OpenStatus::Ok &&
          v1.sub(kLockFolder, true, m.trust.get(), &locks, &why) == OpenStatus::Ok)
        lock = FileLock::acquire(locks, lock_name(key), *m.trust, m.opts.lock_timeout, true);
      // Whoever held the lock has probably just published the entry.
      Lookup second = lock ? m.lookup(key, &e) : Lookup::Miss;
      if (second == Lookup::Hit) {
        if (first == Lookup::Corrupt) ++m.corrupt;
        if (first == Lookup::ReadError) ++m.read_errors;
        if (first == Lookup::Untrusted) ++m.untrusted;
        m.count(Lookup::Hit);
        return e;
      }
      // One call counts one miss, with the first problem seen on the way.
      if (first == Lookup::Miss) first = second;
    }
    // Under the per-key lock: the other processes of this host that wait for it then find the
    // fetched entry on disk instead of asking the server too.
    // The lease only after a clean miss: a failed lookup already cost this call its one timeout.
    bool missed = false;
    if (m.fetch_remote(key, &e, &missed) || (missed && m.wait_for_fleet(key, &leased, &e))) {
      m.count(first);
      return e;
    }
  } catch (...) {
    first = Lookup::ReadError;  // bad_alloc while reading: fall through and compile
  }
  m.count(first);
  try {
    e = make();  // the caller's exceptions propagate; `lock` is released on the way out
  } catch (...) {
    if (leased) m.remote->release(key);  // the fleet need not wait for a compile that failed
    throw;
  }
  ++m.compiles;
  if (made) *made = true;
  put(key, e);
  return e;
}

Stats DiskCache::stats() const {
  const Impl& m = *impl_;
  Stats s;
  s.hits = m.hits;
  s.misses = m.misses;
  s.compiles = m.compiles;
  s.corrupt = m.corrupt;
  s.read_errors = m.read_errors;
  s.write_errors = m.write_errors;
  s.evictions = m.evictions;
  s.oversized = m.oversized;
  s.untrusted = m.untrusted;
  s.bytes_read = m.bytes_read;
  s.bytes_written = m.bytes_written;
  return s;
}

void DiskCache::count_compile() {
  ++impl_->compiles;
}

RemoteCache* DiskCache::remote() {
  return impl_->remote.get();
}

}  // namespace kjit::cache
