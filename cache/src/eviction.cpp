#include "eviction.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "file_lock.hpp"

namespace kjit::cache::detail {

namespace {

int64_t to_ns(const timespec& t) {
  return int64_t{t.tv_sec} * 1000000000ll + t.tv_nsec;
}

FileRecord record(std::string_view shard, const NameInfo& n) {
  FileRecord r;
  r.shard = std::string(shard);
  r.name = n.name;
  r.size = static_cast<uint64_t>(n.st.st_size);
  r.mtime_ns = to_ns(n.st.st_mtim);
  r.type = n.st.st_mode & S_IFMT;
  return r;
}

void scan_folder(const Folder& dir, std::string_view shard, Scan* out) {
  for (const NameInfo& n : dir.list()) {
    const bool regular = S_ISREG(n.st.st_mode);
    if (!shard.empty() && is_entry_name(n.name, shard)) {
      (regular ? out->entries : out->foreign).push_back(record(shard, n));
      if (regular) out->entry_bytes += out->entries.back().size;
    } else if (regular && parse_temp_name(n.name, shard)) {
      out->temps.push_back(record(shard, n));
    }
  }
}

// Runs fn(folder) on the shard folder of `r` (v1 itself for shard ""); errno when not opened.
template <class Fn>
int in_folder(const Folder& v1, const FileRecord& r, Fn fn) {
  if (r.shard.empty()) return fn(v1);
  Folder shard;
  std::string why;
  if (v1.sub(r.shard, false, nullptr, &shard, &why) != OpenStatus::Ok) return ENOENT;
  return fn(shard);
}

int remove_entry(const Folder& v1, const FileRecord& r) {
  return in_folder(v1, r, [&](const Folder& f) { return f.remove_file(r.name); });
}

}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string record_path(const Folder& v1, const FileRecord& r) {
  return r.shard.empty() ? v1.path_of(r.name) : v1.path() + "/" + r.shard + "/" + r.name;
}

Scan scan_cache(const Folder& v1) {
  Scan scan;
  if (!v1.valid()) return scan;
  scan_folder(v1, "", &scan);
  for (const NameInfo& n : v1.list()) {
    if (!is_shard_name(n.name)) continue;
    Folder shard;
    std::string why;
    if (S_ISDIR(n.st.st_mode) && v1.sub(n.name, false, nullptr, &shard, &why) == OpenStatus::Ok)
      scan_folder(shard, n.name, &scan);
    else
      scan.foreign.push_back(record("", n));  // a link or a file where a shard folder belongs
  }
  // Ties (same mtime) broken by name so that the order is deterministic.
  std::sort(scan.entries.begin(), scan.entries.end(), [](const FileRecord& a, const FileRecord& b) {
    return a.mtime_ns != b.mtime_ns ? a.mtime_ns < b.mtime_ns : a.name < b.name;
  });
  return scan;
}

uint64_t remove_stale_temps(const Folder& v1, const Scan& scan, int64_t now) {
  uint64_t n = 0;
  for (const auto& t : scan.temps) {
    if (now - t.mtime_ns < kTempGraceNs) continue;
    const int err = in_folder(v1, t, [&](const Folder& f) {
      // Read-write: NFSv4 refuses an exclusive lock on a descriptor opened read-only (EBADF).
      UniqueFd fd = f.open_file(t.name, O_RDWR);
      struct stat st;
      if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return EINVAL;
      // Held while unlinking: no writer can be behind it.
      if (!lock_now(fd.get())) return EBUSY;
      return f.remove_file(t.name);
    });
    if (err == 0) ++n;
  }
  return n;
}

uint64_t remove_unused_locks(const Folder& v1, const Trust& trust) {
  Folder locks;
  std::string why;
  if (v1.sub("locks", false, nullptr, &locks, &why) != OpenStatus::Ok) return 0;
  uint64_t n = 0;
  for (const NameInfo& info : locks.list()) {
    if (!is_lock_name(info.name) || !S_ISREG(info.st.st_mode)) continue;
    // Taking the lock and letting it go unlinks it (remove_on_release); a busy one is kept.
    if (FileLock::try_acquire(locks, info.name, trust, true)) ++n;
  }
  return n;
}

uint64_t remove_foreign(const Folder& v1, Scan* scan) {
  uint64_t n = 0;
  std::vector<FileRecord> kept;
  for (FileRecord& r : scan->foreign) {
    const int err = in_folder(v1, r, [&](const Folder& f) { return f.remove_any(r.name); });
    if (err == 0 || err == ENOENT)
      n += err == 0;
    else
      kept.push_back(std::move(r));
  }
  scan->foreign = std::move(kept);
  return n;
}

uint64_t remove_older_than(const Folder& v1, Scan* scan, int64_t cutoff_ns) {
  uint64_t n = 0;
  auto keep = scan->entries.begin();
  for (auto& e : scan->entries) {
    if (e.mtime_ns >= cutoff_ns) {
      // Not onto itself: a string moved onto itself comes out empty (libstdc++), and a kept
      // entry with no name could never be removed by a later pass.
      if (&*keep != &e) *keep = std::move(e);
      ++keep;
      continue;
    }
    // Dropped from the list either way (a failed unlink would fail again on a retry), but only
    // bytes that left the disk leave the total.
    const int err = remove_entry(v1, e);
    if (err == 0)
      ++n;
    else if (err != ENOENT)
      continue;
    scan->entry_bytes -= e.size;
  }
  scan->entries.erase(keep, scan->entries.end());
  return n;
}

uint64_t remove_oldest(const Folder& v1, Scan* scan, uint64_t target_bytes, bool give_up) {
  uint64_t n = 0;
  size_t i = 0;
  uint64_t stuck = 0;  // bytes of entries it may not delete (still on disk: still counted)
  for (; i < scan->entries.size() && scan->entry_bytes > target_bytes; ++i) {
    const FileRecord& e = scan->entries[i];
    const int err = remove_entry(v1, e);
    if (err == 0) {
      ++n;
    } else if (err != ENOENT) {
      // Once those alone reach the target, no deletion can: the automatic trim stops rather
      // than empty the cache of everything newer (and waits before trying again).
      if ((stuck += e.size) >= target_bytes && give_up) {
        ++i;
        break;
      }
      continue;
    }
    scan->entry_bytes -= e.size;
  }
  scan->entries.erase(scan->entries.begin(), scan->entries.begin() + static_cast<long>(i));
  return n;
}

}  // namespace kjit::cache::detail
