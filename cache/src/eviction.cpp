#include "eviction.hpp"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "file_lock.hpp"

namespace kjit::cache::detail {

namespace {

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};
using DirPtr = std::unique_ptr<DIR, DirCloser>;

int64_t to_ns(const timespec& t) {
  return int64_t{t.tv_sec} * 1000000000ll + t.tv_nsec;
}

// Calls fn(name, stat) for each regular file in `dir`.
template <class Fn>
void for_each_file(const std::string& dir, Fn fn) {
  DirPtr d(::opendir(dir.c_str()));
  if (!d) return;
  while (dirent* e = ::readdir(d.get())) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    if (::fstatat(::dirfd(d.get()), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode)) fn(name, st);
  }
}

FileRecord record(const std::string& dir, std::string_view name, std::string_view shard,
                  const struct stat& st) {
  FileRecord r;
  r.name = std::string(name);
  r.path = dir + "/" + r.name;
  r.shard = std::string(shard);
  r.size = static_cast<uint64_t>(st.st_size);
  r.mtime_ns = to_ns(st.st_mtim);
  return r;
}

void scan_folder(const std::string& dir, std::string_view shard, Scan* out) {
  for_each_file(dir, [&](std::string_view name, const struct stat& st) {
    if (!shard.empty() && is_entry_name(name, shard)) {
      out->entries.push_back(record(dir, name, shard, st));
      out->entry_bytes += out->entries.back().size;
    } else if (auto pid = parse_temp_name(name, shard)) {
      out->temps.push_back(record(dir, name, shard, st));
      out->temps.back().pid = *pid;
    }
  });
}

bool remove_file(const std::string& path) {
  return ::unlink(path.c_str()) == 0;
}

}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Scan scan_cache(const Layout& layout) {
  Scan scan;
  scan_folder(layout.root, "", &scan);
  DirPtr d(::opendir(layout.root.c_str()));
  if (d) {
    while (dirent* e = ::readdir(d.get())) {
      std::string_view name = e->d_name;
      if (is_shard_name(name)) scan_folder(layout.root + "/" + e->d_name, name, &scan);
    }
  }
  // Ties (same mtime) broken by name so that the order is deterministic.
  std::sort(scan.entries.begin(), scan.entries.end(), [](const FileRecord& a, const FileRecord& b) {
    return a.mtime_ns != b.mtime_ns ? a.mtime_ns < b.mtime_ns : a.name < b.name;
  });
  return scan;
}

bool is_stale_temp(const FileRecord& temp, int64_t now) {
  if (now - temp.mtime_ns > kStaleTempAgeNs) return true;
  if (temp.pid <= 0) return true;
  // EPERM means the process exists but belongs to someone else: still alive.
  return ::kill(temp.pid, 0) != 0 && errno == ESRCH;
}

uint64_t remove_stale_temps(const Scan& scan, int64_t now) {
  uint64_t n = 0;
  for (const auto& t : scan.temps)
    if (is_stale_temp(t, now) && remove_file(t.path)) ++n;
  return n;
}

uint64_t remove_unused_locks(const Layout& layout) {
  std::vector<std::string> names;
  for_each_file(layout.lock_dir(), [&](std::string_view name, const struct stat&) {
    if (is_lock_name(name)) names.emplace_back(name);
  });
  uint64_t n = 0;
  for (const auto& name : names) {
    // Taking the lock and letting it go unlinks it (remove_on_release); a busy one is kept.
    if (FileLock::try_acquire(layout.lock_dir() + "/" + name, true)) ++n;
  }
  return n;
}

uint64_t remove_older_than(Scan* scan, int64_t cutoff_ns) {
  uint64_t n = 0;
  auto keep = scan->entries.begin();
  for (auto& e : scan->entries) {
    if (e.mtime_ns >= cutoff_ns) {
      *keep++ = std::move(e);
      continue;
    }
    // Dropped from the list either way (a failed unlink would fail again on a retry), but only
    // bytes that left the disk leave the total.
    if (remove_file(e.path))
      ++n;
    else if (errno != ENOENT)
      continue;
    scan->entry_bytes -= e.size;
  }
  scan->entries.erase(keep, scan->entries.end());
  return n;
}

uint64_t remove_oldest(Scan* scan, uint64_t target_bytes, bool give_up) {
  uint64_t n = 0;
  size_t i = 0;
  uint64_t stuck = 0;  // bytes of entries it may not delete (still on disk: still counted)
  for (; i < scan->entries.size() && scan->entry_bytes > target_bytes; ++i) {
    const FileRecord& e = scan->entries[i];
    if (remove_file(e.path)) {
      ++n;
    } else if (errno != ENOENT) {
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
