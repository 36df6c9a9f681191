// A folder of the cache, held open by descriptor. Every name inside it is opened, listed, renamed
// and removed relative to that descriptor with O_NOFOLLOW, so a symlink planted anywhere inside
// the cache is never followed: it fails to open (ELOOP, ENOTDIR) or is seen as the link it is.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>

#include <string>
#include <string_view>
#include <vector>

#include "posix_io.hpp"
#include "trust.hpp"

namespace kjit::cache::detail {

enum class OpenStatus { Ok, Missing, Untrusted, Failed };

struct NameInfo {
  std::string name;
  struct stat st;  // lstat of the name: a symlink is reported as one
};

class Folder {
 public:
  Folder() = default;

  // The folder at `path` (absolute, resolved by resolve_path), made with `trust`'s mode (and any
  // missing parents) when `create`. `trust` checks its owner and mode, and every folder above it
  // as it is walked (Trust::ancestor_problem: one made or swapped in since the cache was opened
  // is caught here); nullptr skips that (for deleting, which never reads). A relative path is
  // refused (Failed). On failure `why` says "<path>: <reason>".
  static OpenStatus open(const std::string& path, bool create, const Trust* trust, Folder* out,
                         std::string* why);
  // The subfolder `name`, as open() does. A folder it makes gets `made_with`'s mode and group
  // (default: `trust`'s), set exactly, or is removed again. `path_only`: opened with O_PATH (to
  // walk through and fstat only, not to list or read), so that search permission is enough.
  OpenStatus sub(std::string_view name, bool create, const Trust* trust, Folder* out,
                 std::string* why, const Trust* made_with = nullptr, bool path_only = false) const;

  bool valid() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }
  std::string path_of(std::string_view name) const { return path_ + "/" + std::string(name); }

  // open(2) of `name` with O_NOFOLLOW, O_NONBLOCK (a FIFO never blocks) and O_CLOEXEC added;
  // errno is left set on failure.
  UniqueFd open_file(std::string_view name, int flags, mode_t mode = 0) const;
  // A new file `name` (O_EXCL) with `trust`'s exact file mode and group, open with `flags`
  // (O_WRONLY or O_RDWR).
  UniqueFd create_file(std::string_view name, const Trust& trust, int flags = O_WRONLY) const;
  // Every name but . and .., with its lstat.
  std::vector<NameInfo> list() const;
  // unlink of `name` when it is a regular file (0), else the errno (EISDIR for anything else).
  int remove_file(std::string_view name) const;
  // unlink of `name` whatever it is (a link is removed, not what it points to); an empty folder
  // is removed too. Returns the errno, 0 on success.
  int remove_any(std::string_view name) const;
  int rename(std::string_view from, std::string_view to) const;  // errno, 0 on success

 private:
  Folder(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  static OpenStatus finish(UniqueFd fd, std::string path, const Trust* trust, Folder* out,
                           std::string* why);

  UniqueFd fd_;
  std::string path_;
};

// `path` made absolute with every symlink resolved, also when its last components do not exist
// yet (the resolved existing part, plus the rest). A symlink on the way is followed only when
// `trust` accepts its owner (this user, root, or a member of the shared group): someone else's
// link, in /tmp say, would let them choose where the cache is made. Empty with `why` set when it
// cannot be resolved; *untrusted tells a link refused by the rule from an OS error.
std::string resolve_path(const std::string& path, const Trust& trust, std::string* why,
                         bool* untrusted);

}  // namespace kjit::cache::detail
