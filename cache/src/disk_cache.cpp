#include "kjit/cache/disk_cache.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "archive.hpp"
#include "cache_dir.hpp"
#include "entry_format.hpp"
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

enum class Lookup { Hit, Miss, Corrupt, ReadError };

// Empty when `v1` can be written, else why not. Creating a file is the only honest test: access()
// says yes to root on a 0555 folder and knows nothing about read-only bind mounts.
std::string writability_problem(const std::string& v1) {
  if (int err = make_dirs(v1)) return "cannot create it: " + errno_text(err);
  std::string probe = temp_path_for(v1 + "/" + std::string(kProbePrefix));
  UniqueFd fd = open_fd(probe, O_WRONLY | O_CREAT | O_EXCL, 0666);
  if (!fd.valid()) return "cannot create a file in it: " + errno_text(errno);
  fd.reset();
  ::unlink(probe.c_str());
  return {};
}

// One warning per folder per process, however many caches are opened on it.
void warn_read_only_once(const std::string& dir, const std::string& why) {
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mu);
  if (warned.insert(dir).second)
    warn("cache dir " + dir + " is not writable (" + why + "); using it read-only");
}

int stall_ms_from_env() {
  const char* v = std::getenv(kStallEnv);
  return v ? std::atoi(v) : 0;
}

}  // namespace

struct DiskCache::Impl {
  Options opts;
  Layout layout;
  Mode mode;
  int stall_write_ms;

  std::atomic<uint64_t> hits{0}, misses{0}, compiles{0}, corrupt{0};
  std::atomic<uint64_t> read_errors{0}, write_errors{0}, evictions{0}, oversized{0};
  std::atomic<uint64_t> bytes_read{0}, bytes_written{0};

  // Approximate bytes on disk: one scan on the first put, then our own puts added. Other
  // processes' writes are only seen at the next trim's scan, which is what "approximate" buys.
  std::mutex total_mu;
  bool total_known = false;
  uint64_t written_since_scan = 0;  // our bytes since the last scan (guarded by total_mu)
  std::atomic<uint64_t> approx_total{0};
  // When a trim could not get under the cap (files it may not delete), wait before rescanning
  // instead of walking the whole folder on every put.
  std::atomic<int64_t> next_trim_ns{0};
  std::string read_only_reason;  // why a ReadWrite cache fell back to ReadOnly

  explicit Impl(Options o)
      : opts(std::move(o)), layout(opts.dir), mode(opts.mode), stall_write_ms(stall_ms_from_env()) {
    if (mode != Mode::ReadWrite) return;
    read_only_reason = writability_problem(layout.root);
    if (!read_only_reason.empty()) {
      mode = Mode::ReadOnly;
      warn_read_only_once(opts.dir, read_only_reason);
    }
  }

  Lookup lookup(const Key& key, Entry* out);
  bool publish(const Key& key, const std::string& bytes);
  bool write_temp(int fd, const std::string& bytes);
  void account_put(uint64_t size);
  void trim_if_over_cap();
  uint64_t trim_locked(uint64_t target);
  void count(Lookup r);
};

Lookup DiskCache::Impl::lookup(const Key& key, Entry* out) {
  // O_NONBLOCK: a FIFO planted at an entry's path must not block the open (it does nothing to a
  // regular file's reads).
  UniqueFd fd = open_fd(layout.entry_path(key), O_RDONLY | O_NONBLOCK);
  if (!fd.valid()) return (errno == ENOENT || errno == ENOTDIR) ? Lookup::Miss : Lookup::ReadError;
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Lookup::ReadError;
  if (!S_ISREG(st.st_mode)) return Lookup::Corrupt;
  if (static_cast<uint64_t>(st.st_size) > kMaxEntryBytes) return Lookup::Corrupt;
  std::string data;
  if (read_all(fd.get(), &data, static_cast<size_t>(st.st_size)) != 0) return Lookup::ReadError;
  if (parse_entry(data, &key, true, nullptr, out) != ParseStatus::Ok) return Lookup::Corrupt;
  bytes_read += data.size();
  // futimens on the descriptor we verified: a path-based touch could hit a file renamed in since.
  // Read-only mode writes nothing, not even timestamps.
  const int64_t mtime = int64_t{st.st_mtim.tv_sec} * 1000000000ll + st.st_mtim.tv_nsec;
  if (mode == Mode::ReadWrite && now_ns() - mtime > kTouchIntervalNs) ::futimens(fd.get(), nullptr);
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
}

bool DiskCache::Impl::write_temp(int fd, const std::string& bytes) {
  std::string_view all(bytes);
  if (stall_write_ms <= 0) return write_all(fd, all) == 0;
  size_t half = all.size() / 2;
  if (write_all(fd, all.substr(0, half)) != 0) return false;
  std::this_thread::sleep_for(std::chrono::milliseconds(stall_write_ms));
  return write_all(fd, all.substr(half)) == 0;
}

// No fsync: a reader verifies the checksum of every entry, so the torn or empty file that a
// power loss may leave behind a rename is just a miss that recompiles. fsync would cost every
// put a journal commit (milliseconds, far more on NFS) to protect data we can regenerate.
bool DiskCache::Impl::publish(const Key& key, const std::string& bytes) {
  // The whole folder may have been deleted under a running process (rm -rf ~/.cache/kjit):
  // create it again rather than fail every put until restart.
  int err = make_dir(layout.shard_dir(key));
  if (err == ENOENT) err = make_dirs(layout.shard_dir(key));
  if (err != 0) return false;
  const std::string final_path = layout.entry_path(key);
  std::string temp;
  UniqueFd fd;
  // Names are random; a clash (EEXIST) is retried with a new name, anything else is a failure.
  for (int attempt = 0; attempt < 4 && !fd.valid(); ++attempt) {
    temp = temp_path_for(final_path);
    fd = open_fd(temp, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (!fd.valid() && errno != EEXIST) return false;
  }
  if (!fd.valid()) return false;
  bool ok = write_temp(fd.get(), bytes);
  // close() is where NFS reports a failed flush: only a clean close may be published.
  ok = fd.close_checked() == 0 && ok;
  ok = ok && ::rename(temp.c_str(), final_path.c_str()) == 0;
  if (!ok) ::unlink(temp.c_str());
  return ok;
}

void DiskCache::Impl::account_put(uint64_t size) {
  {
    std::lock_guard<std::mutex> lock(total_mu);
    if (!total_known) {
      // The scan already includes the entry just written.
      approx_total = scan_cache(layout).entry_bytes;
      total_known = true;
    } else if (opts.max_bytes != 0 && (written_since_scan += size) >= opts.max_bytes / 16) {
      // Other processes write too: rescan after each 1/16 of the cap that we wrote, so that N
      // long-lived writers overshoot the cap by at most N/16 of it, not N times it.
      approx_total = scan_cache(layout).entry_bytes;
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
  // Try-lock: when another process or thread is trimming, it does the work for us.
  auto lock = FileLock::try_acquire(layout.evict_lock_path(), false);
  if (!lock) return;
  trim_locked(cap / 100 * kTrimPercent + cap % 100 * kTrimPercent / 100);
  if (approx_total.load() > cap) next_trim_ns = now_ns() + kTrimRetryNs;
}

uint64_t DiskCache::Impl::trim_locked(uint64_t target) {
  Scan scan = scan_cache(layout);
  remove_stale_temps(scan, now_ns());
  uint64_t removed = remove_oldest(&scan, target, /*give_up=*/true);
  evictions += removed;
  approx_total = scan.entry_bytes;
  return removed;
}

DiskCache::DiskCache(Options opts) {
  if (opts.dir.empty()) opts.dir = Options::default_dir();
  impl_ = std::make_unique<Impl>(std::move(opts));
}

DiskCache::~DiskCache() = default;

Mode DiskCache::mode() const {
  return impl_->mode;
}
const std::string& DiskCache::read_only_reason() const {
  return impl_->read_only_reason;
}
const std::string& DiskCache::dir() const {
  return impl_->opts.dir;
}

std::optional<Entry> DiskCache::get(const Key& key) {
  try {
    Entry e;
    Lookup r = impl_->mode == Mode::Off ? Lookup::Miss : impl_->lookup(key, &e);
    impl_->count(r);
    if (r == Lookup::Hit) return e;
  } catch (...) {  // bad_alloc on a huge file: a failed read, never an exception for the caller
    ++impl_->read_errors;
    ++impl_->misses;
  }
  return std::nullopt;
}

bool DiskCache::put(const Key& key, const Entry& entry) {
  if (impl_->mode != Mode::ReadWrite) return false;
  try {
    std::string bytes = serialize_entry(key, entry);
    // An entry over half the cap would make the next trim evict everything, itself included.
    const uint64_t cap = impl_->opts.max_bytes;
    if (cap != 0 && bytes.size() > cap / 2) {
      if (impl_->oversized++ == 0)  // once per cache: every such put would say the same
        warn("not caching " + entry.label + " (" + std::to_string(bytes.size()) +
             " bytes): entries over half of the size cap (" + std::to_string(cap) +
             " bytes, KJIT_CACHE_MAX_SIZE) are not stored");
      return false;
    }
    if (!impl_->publish(key, bytes)) {
      ++impl_->write_errors;
      return false;
    }
    impl_->bytes_written += bytes.size();
    impl_->account_put(bytes.size());
    return true;
  } catch (...) {
    ++impl_->write_errors;
    return false;
  }
}

Entry DiskCache::get_or_make(const Key& key, const std::function<Entry()>& make, bool* made) {
  if (made) *made = false;
  Impl& m = *impl_;
  Entry e;
  Lookup first = Lookup::Miss;
  std::optional<FileLock> lock;
  try {
    if (m.mode != Mode::Off) first = m.lookup(key, &e);
    if (first == Lookup::Hit) {
      m.count(first);
      return e;
    }
    if (m.mode == Mode::ReadWrite) {
      // Serialize compiles of this key across processes. If the lock cannot be had (timeout,
      // lock folder not creatable) we compile anyway: a duplicate compile beats a stuck op.
      if (make_dirs(m.layout.lock_dir()) == 0)
        lock = FileLock::acquire(m.layout.lock_path(key), m.opts.lock_timeout, true);
      // Whoever held the lock has probably just published the entry.
      Lookup second = lock ? m.lookup(key, &e) : Lookup::Miss;
      if (second == Lookup::Hit) {
        if (first == Lookup::Corrupt) ++m.corrupt;
        if (first == Lookup::ReadError) ++m.read_errors;
        m.count(Lookup::Hit);
        return e;
      }
      // One call counts one miss, with the first problem seen on the way.
      if (first == Lookup::Miss) first = second;
    }
  } catch (...) {
    first = Lookup::ReadError;  // bad_alloc while reading: fall through and compile
  }
  m.count(first);
  e = make();  // the caller's exceptions propagate; `lock` is released on the way out
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
  s.bytes_read = m.bytes_read;
  s.bytes_written = m.bytes_written;
  return s;
}

void DiskCache::count_compile() {
  ++impl_->compiles;
}

std::vector<EntryInfo> DiskCache::list(bool verify_checksums) {
  std::vector<EntryInfo> out;
  for (const FileRecord& r : scan_cache(impl_->layout).entries) {
    EntryInfo info;
    info.key_hex = r.name.substr(0, 64);
    info.path = r.path;
    info.size = r.size;
    info.mtime = r.mtime_ns / 1000000000ll;
    if (r.size > kMaxEntryBytes) {  // as in get(): never read such a file into memory
      info.valid = false;
      info.error = "larger than any entry (not read)";
      out.push_back(std::move(info));
      continue;
    }
    std::string data;
    UniqueFd fd = open_fd(r.path, O_RDONLY);
    int err = fd.valid() ? read_all(fd.get(), &data, r.size) : errno;
    if (err == ENOENT) continue;  // removed since the scan
    Key key;
    Key::from_hex(info.key_hex, &key);
    Entry e;
    ParseStatus s = err ? ParseStatus::Ok : parse_entry(data, &key, verify_checksums, nullptr, &e);
    info.valid = err == 0 && s == ParseStatus::Ok;
    info.error = err ? errno_text(err) : (info.valid ? "" : describe(s));
    info.label = std::move(e.label);
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(),
            [](const EntryInfo& a, const EntryInfo& b) { return a.key_hex < b.key_hex; });
  return out;
}

uint64_t DiskCache::total_bytes() {
  return scan_cache(impl_->layout).entry_bytes;
}

uint64_t DiskCache::prune(std::optional<uint64_t> target_bytes,
                          std::optional<std::chrono::seconds> max_age) {
  Impl& m = *impl_;
  if (m.mode != Mode::ReadWrite) return 0;
  // Wait for a running trim rather than skip: the caller asked for this explicitly. Proceeding
  // without the lock after the timeout is safe, only wasteful.
  auto lock = FileLock::acquire(m.layout.evict_lock_path(), m.opts.lock_timeout, false);
  Scan scan = scan_cache(m.layout);
  remove_stale_temps(scan, now_ns());
  remove_unused_locks(m.layout);
  uint64_t removed = 0;
  if (max_age) {
    const int64_t age_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(*max_age).count();
    removed += remove_older_than(&scan, now_ns() - age_ns);
  }
  if (target_bytes) removed += remove_oldest(&scan, *target_bytes, /*give_up=*/false);
  m.evictions += removed;
  m.approx_total = scan.entry_bytes;
  return removed;
}

uint64_t DiskCache::clear() {
  if (impl_->mode != Mode::ReadWrite) return 0;
  return prune(uint64_t{0}, std::nullopt);
}

uint64_t DiskCache::export_to(const std::string& archive_path) {
  ArchiveWriter out(archive_path);
  uint64_t n = 0;
  for (const FileRecord& r : scan_cache(impl_->layout).entries) {
    Key key;
    Key::from_hex(r.name.substr(0, 64), &key);
    if (r.size > kMaxEntryBytes) continue;  // get() would never serve it
    std::string data;
    UniqueFd fd = open_fd(r.path, O_RDONLY);
    if (!fd.valid() || read_all(fd.get(), &data, r.size) != 0) continue;
    // Invalid entries are left behind: an archive only carries what get() would serve.
    if (parse_entry(data, &key, true, nullptr, nullptr) != ParseStatus::Ok) continue;
    out.add(key, data);
    ++n;
  }
  out.commit();
  return n;
}

uint64_t DiskCache::import_from(const std::string& archive_path) {
  if (impl_->mode != Mode::ReadWrite)
    throw std::runtime_error("kjit cache: cannot import into " + dir() +
                             ": the cache is not writable (mode off or read-only)");
  auto check = [&](const Key& key, std::string_view file, Entry* out) {
    ParseStatus s = parse_entry(file, &key, true, nullptr, out);
    if (s != ParseStatus::Ok)
      throw std::runtime_error("kjit cache: bad archive " + archive_path + ": entry " + key.hex() +
                               ": " + describe(s));
  };
  // Pass 1 proves the whole archive sound (checksum included) before anything is published, so
  // a bad archive imports nothing. Pass 2 re-verifies each entry as it publishes it.
  read_archive(archive_path,
               [&](const Key& key, std::string_view file) { check(key, file, nullptr); });
  uint64_t n = 0;
  read_archive(archive_path, [&](const Key& key, std::string_view file) {
    Entry e;
    check(key, file, &e);
    const uint64_t oversized_before = impl_->oversized;
    if (put(key, e)) {
      ++n;
      return;
    }
    if (impl_->oversized != oversized_before) return;  // over half the cap: skipped, warned
    throw std::runtime_error("kjit cache: import from " + archive_path + ": cannot write entry " +
                             key.hex() + " into " + dir());
  });
  return n;
}

}  // namespace kjit::cache
