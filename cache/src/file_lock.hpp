// Exclusive inter-process lock on a lock file (flock). Used for the per-key compile lock and the
// trim try-lock. flock locks belong to the open file description, so two threads of one process
// exclude each other too, and the kernel drops the lock when its holder dies (even by SIGKILL).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "posix_io.hpp"

namespace kjit::cache::detail {

class FileLock {
 public:
  // Waits up to `timeout` (polling LOCK_NB with backoff: no signals, no threads).
  // nullopt when the file cannot be opened/created or the wait times out.
  // `remove_on_release`: unlink the file when done, so per-key locks do not pile up. This is safe
  // because every party unlinks only while holding the lock, and re-checks after locking that
  // the path still names the inode it locked.
  static std::optional<FileLock> acquire(const std::string& path, std::chrono::milliseconds timeout,
                                         bool remove_on_release);
  static std::optional<FileLock> try_acquire(const std::string& path, bool remove_on_release) {
    return acquire(path, std::chrono::milliseconds(0), remove_on_release);
  }

  FileLock(FileLock&&) = default;
  FileLock& operator=(FileLock&& o) noexcept;
  ~FileLock() { release(); }

 private:
  FileLock(std::string path, UniqueFd fd, bool remove)
      : path_(std::move(path)), fd_(std::move(fd)), remove_(remove) {}

  void release();

  std::string path_;
  UniqueFd fd_;
  bool remove_;
};

}  // namespace kjit::cache::detail
