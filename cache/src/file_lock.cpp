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

// True when `name` in `dir` still names the inode behind `fd` (it may have been unlinked, and
// perhaps recreated, between our open() and our flock()).
bool still_linked(int dir, int fd, const std::string& name) {
  struct stat by_fd, by_name;
  if (::fstat(fd, &by_fd) != 0 || ::fstatat(dir, name.c_str(), &by_name, AT_SYMLINK_NOFOLLOW) != 0)
    return false;
  return by_fd.st_dev == by_name.st_dev && by_fd.st_ino == by_name.st_ino;
}

int flock_nb(int fd, int op) {
  int rc;
  do {
    rc = ::flock(fd, op | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  return rc == 0 ? 0 : errno;
}

}  // namespace

bool lock_now(int fd) {
  return flock_nb(fd, LOCK_EX) == 0;
}

std::optional<FileLock> FileLock::acquire(const Folder& dir, const std::string& name,
                                          const Trust& trust, std::chrono::milliseconds timeout,
                                          bool remove_on_release) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    // Made with the exact mode and group (in a shared cache, every member must open it), or
    // opened as it is.
    UniqueFd fd = dir.create_file(name, trust, O_RDWR);
    if (!fd.valid() && errno == EEXIST) {
      fd = dir.open_file(name, O_RDWR);
      // Gone between the two calls: its holder let go, which unlinks it. Create it again (taking
      // no lock here would let this caller compile beside the next holder).
      if (!fd.valid() && errno == ENOENT) {
        if (Clock::now() >= deadline) return std::nullopt;
        continue;
      }
    }
    struct stat st;
    // A lock file is only ever a regular file of ours: a FIFO or device planted at its name is
    // not locked (nor written, nor waited on: O_NONBLOCK).
    if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
    for (;;) {
      int err = flock_nb(fd.get(), LOCK_EX);
      if (err == 0) break;
      if (err != EWOULDBLOCK || Clock::now() >= deadline) return std::nullopt;
      // Short first sleeps keep a waiter's latency low when the holder finishes quickly; the cap
      // keeps many waiters from spinning during a long compile.
      std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - Clock::now()));
      pause = std::min(pause * 2, std::chrono::milliseconds(20));
    }
    if (still_linked(dir.fd(), fd.get(), name)) {
      UniqueFd dir_copy(::fcntl(dir.fd(), F_DUPFD_CLOEXEC, 0));
      if (!dir_copy.valid()) return std::nullopt;
      return FileLock(std::move(dir_copy), name, std::move(fd), remove_on_release);
    }
    // We locked an inode that its previous holder already unlinked: start over on the new file.
  }
}

FileLock& FileLock::operator=(FileLock&& o) noexcept {
  if (this != &o) {
    release();
    dir_ = std::move(o.dir_);
    name_ = std::move(o.name_);
    fd_ = std::move(o.fd_);
    remove_ = o.remove_;
  }
  return *this;
}

void FileLock::release() {
  if (!fd_.valid()) return;  // moved from
  if (remove_) ::unlinkat(dir_.get(), name_.c_str(), 0);
  fd_.reset();  // closing the last descriptor releases the flock
  dir_.reset();
}

}  // namespace kjit::cache::detail
