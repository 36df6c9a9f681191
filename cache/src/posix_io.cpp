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

int read_up_to(int fd, char* p, size_t n, size_t* got) {
  *got = 0;
  while (*got < n) {
    const ssize_t r = ::read(fd, p + *got, n - *got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno;
    if (r == 0) break;
    *got += static_cast<size_t>(r);
  }
  return 0;
}

std::string read_regular_file(int fd, size_t max_bytes, const char* what, std::string* text,
                              const std::function<std::string(const struct stat&)>& refuse) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return "cannot stat it: " + errno_text(errno);
  if (S_ISDIR(st.st_mode)) return "is a directory, not a regular file";
  if (!S_ISREG(st.st_mode)) return "is not a regular file (a FIFO, device or socket)";
  if (refuse)
    if (std::string why = refuse(st); !why.empty()) return why;
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    return "is " + std::to_string(st.st_size) + " bytes, more than " + what + " may be (" +
           std::to_string(max_bytes) + ")";
  // One byte past the size stat gives: a file that reads as more or less than that (a pseudo-file,
  // as /proc's report 0 bytes and /sys's 4096, or a file written meanwhile) is refused rather than
  // read short (/proc/self/status would come back empty).
  const auto size = static_cast<size_t>(st.st_size);
  std::string out(size + 1, '\0');
  size_t got = 0;
  if (int err = read_up_to(fd, out.data(), out.size(), &got))
    return "cannot read it: " + errno_text(err);
  if (got != size)
    return "reads as " + (got > size ? "more than" : std::to_string(got) + " bytes, not") +
           " the " + std::to_string(size) +
           " bytes its status gives: a pseudo-file (as /proc's and /sys's are) or a file being "
           "written";
  out.resize(size);
  *text = std::move(out);
  return "";
}

std::string parent_folder(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r may return a static string instead of filling buf.
  const char* s = strerror_r(err, buf, sizeof buf);
  return s ? std::string(s) : std::string("errno ") + std::to_string(err);
}

}  // namespace kjit::cache::detail
