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

int read_all(int fd, std::string* out, size_t size_hint) {
  out->clear();
  // One extra byte so that a file of exactly size_hint bytes ends in one read() plus the EOF read.
  out->resize(size_hint + 1);
  size_t used = 0;
  for (;;) {
    if (used == out->size()) out->resize(out->size() * 2 + 4096);
    ssize_t n = ::read(fd, &(*out)[used], out->size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      out->clear();
      return err;
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  out->resize(used);
  return 0;
}

int make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0777) == 0) return 0;
  int err = errno;
  if (err != EEXIST) return err;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return errno;
  return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

int make_dirs(const std::string& path) {
  if (path.empty()) return ENOENT;
  for (size_t pos = path.find('/', 1); pos != std::string::npos; pos = path.find('/', pos + 1)) {
    int err = make_dir(path.substr(0, pos));
    if (err != 0) return err;
  }
  return make_dir(path);
}

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r may return a static string instead of filling buf.
  const char* s = strerror_r(err, buf, sizeof buf);
  return s ? std::string(s) : std::string("errno ") + std::to_string(err);
}

}  // namespace kjit::cache::detail
