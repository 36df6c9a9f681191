// Small POSIX helpers shared by the cache sources: an owning fd and EINTR-safe I/O loops.
// Every function reports failure as an errno value (0 = success) instead of throwing, because
// the cache's hot paths (get/put) must never throw.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace kjit::cache::detail {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset();
  // Closes and reports close()'s own error: on NFS and some FUSE filesystems a failed flush of
  // delayed writes only shows up here, so a writer must check it before publishing.
  int close_checked();

 private:
  int fd_ = -1;
};

// Opens with O_CLOEXEC added; errno is left set on failure.
UniqueFd open_fd(const std::string& path, int flags, mode_t mode = 0);

int write_all(int fd, std::string_view data);
// Exactly n bytes; EIO when the file ends first (it shrank since it was sized).
int read_exact(int fd, char* p, size_t n);

// Up to n bytes, fewer only where the file ends: *got says how many.
int read_up_to(int fd, char* p, size_t n, size_t* got);

std::string errno_text(int err);

// The folder that holds absolute `path` ("/" for "/a" and for "/" itself).
std::string parent_folder(const std::string& path);

// The whole of the regular file open at `fd`, at most `max_bytes` (`what` names the kind, "a
// template"), into *text. Returns "" or why not, worded to follow the file's name: "is a
// directory, not a regular file", "is not a regular file (...)", "is N bytes, more than <what> may
// be (M)", "cannot stat it: ...", "cannot read it: ...", "reads as ... bytes its status gives"
// (a pseudo-file or one being written: never read short). `refuse(st)` may turn a regular file down
// by its status first (a non-empty reason). Open it with O_NONBLOCK: a FIFO then cannot hang the
// open, and nothing but a regular file (never a device that does not end) is read.
std::string read_regular_file(int fd, size_t max_bytes, const char* what, std::string* text,
                              const std::function<std::string(const struct stat&)>& refuse = {});

}  // namespace kjit::cache::detail
