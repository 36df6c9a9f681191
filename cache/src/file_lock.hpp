// Exclusive inter-process lock on a lock file (flock). Used for the per-key compile lock and the
// trim try-lock. flock locks belong to the open file description, so two threads of one process
// exclude each other too, and the kernel drops the lock when its holder dies (even by SIGKILL).
// The lock file is opened relative to its folder's descriptor and never through a symlink.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "folder.hpp"
#include "posix_io.hpp"

namespace kjit::cache::detail {

class FileLock {
 public:
  // Waits up to `timeout` (polling LOCK_NB with backoff: no signals, no threads).
  // nullopt when the file cannot be opened/created or the wait times out.
  // `remove_on_release`: unlink the file when done, so per-key locks do not pile up. This is safe
  // because every party unlinks only while holding the lock, and re-checks after locking that
  // the name still names the inode it locked.
  static std::optional<FileLock> acquire(const Folder& dir, const std::string& name,
                                         const Trust& trust, std::chrono::milliseconds timeout,
                                         bool remove_on_release);
  static std::optional<FileLock> try_acquire(const Folder& dir, const std::string& name,
                                             const Trust& trust, bool remove_on_release) {
    return acquire(dir, name, trust, std::chrono::milliseconds(0), remove_on_release);
  }

  FileLock(FileLock&&) = default;
  FileLock& operator=(FileLock&& o) noexcept;
  ~FileLock() { release(); }

 private:
  FileLock(UniqueFd dir, std::string name, UniqueFd fd, bool remove)
      : dir_(std::move(dir)), name_(std::move(name)), fd_(std::move(fd)), remove_(remove) {}

  void release();

  UniqueFd dir_;  // a duplicate of the folder's descriptor, for the unlink at release
  std::string name_;
  UniqueFd fd_;
  bool remove_;
};

// Takes an exclusive flock on `fd` without waiting; true when had.
bool lock_now(int fd);

}  // namespace kjit::cache::detail
