#include "file_lock.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

namespace kjit::cache::detail {

namespace {

// True when `path` still names the inode behind `fd` (it may have been unlinked, and perhaps
// recreated, between our open() and our flock()).
bool still_linked(int fd, const std::string& path) {
  struct stat by_fd, by_path;
  if (::fstat(fd, &by_fd) != 0 || ::stat(path.c_str(), &by_path) != 0) return false;
  return by_fd.st_dev == by_path.st_dev && by_fd.st_ino == by_path.st_ino;
}

int flock_nb(int fd) {
  int rc;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  return rc == 0 ? 0 : errno;
}

}  // namespace

std::optional<FileLock> FileLock::acquire(const std::string& path,
                                          std::chrono::milliseconds timeout,
                                          bool remove_on_release) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    UniqueFd fd = open_fd(path, O_RDWR | O_CREAT, 0666);
    if (!fd.valid()) return std::nullopt;
    for (;;) {
      int err = flock_nb(fd.get());
      if (err == 0) break;
      if (err != EWOULDBLOCK || Clock::now() >= deadline) return std::nullopt;
      // Short first sleeps keep a waiter's latency low when the holder finishes quickly; the cap
      // keeps many waiters from spinning during a long compile.
      std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - Clock::now()));
      pause = std::min(pause * 2, std::chrono::milliseconds(20));
    }
    if (still_linked(fd.get(), path)) return FileLock(path, std::move(fd), remove_on_release);
    // We locked an inode that its previous holder already unlinked: start over on the new file.
  }
}

FileLock& FileLock::operator=(FileLock&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    fd_ = std::move(o.fd_);
    remove_ = o.remove_;
  }
  return *this;
}

void FileLock::release() {
  if (!fd_.valid()) return;  // moved from
  if (remove_) ::unlink(path_.c_str());
  fd_.reset();  // closing the last descriptor releases the flock
}

}  // namespace kjit::cache::detail
