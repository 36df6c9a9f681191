#include "posix_io.hpp"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>

namespace kjit::cache::detail {

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.release();
  }
  return *this;
}

int UniqueFd::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void UniqueFd::reset() {
  if (fd_ >= 0) ::close(fd_);  // errors ignored: callers that care use close_checked()
  fd_ = -1;
}

int UniqueFd::close_checked() {
  if (fd_ < 0) return EBADF;
  int fd = release();
  // Linux releases the descriptor even when close() fails (EINTR included), so never retry.
  return ::close(fd) == 0 ? 0 : errno;
}

UniqueFd open_fd(const std::string& path, int flags, mode_t mode) {
  int fd;
  do {
    fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  return UniqueFd(fd);
}

int write_all(int fd, std::string_view data) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;  // no progress and no error: treat as a failed device
    p += n;
    left -= static_cast<size_t>(n);
  }
  return 0;
}

int read_exact(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno;
    if (r == 0) return EIO;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return 0;
}

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r may return a static string instead of filling buf.
  const char* s = strerror_r(err, buf, sizeof buf);
  return s ? std::string(s) : std::string("errno ") + std::to_string(err);
}

}  // namespace kjit::cache::detail
