#include "folder.hpp"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>

namespace kjit::cache::detail {

namespace {

std::string open_error(const std::string& path, int err) {
  if (err == ELOOP) return path + ": is a symbolic link (kjit never follows one inside a cache)";
  if (err == ENOTDIR) return path + ": is not a folder";
  return path + ": " + errno_text(err);
}

// Linux reports a symlink opened with O_DIRECTORY | O_NOFOLLOW as ENOTDIR, not ELOOP: ask lstat.
int link_errno(int open_errno, const struct stat* st) {
  return st && S_ISLNK(st->st_mode) ? ELOOP : open_errno;
}

// A symlink where a cache folder belongs is refused like a folder writable by others: both let
// someone else choose what the cache reads.
OpenStatus status_of(int open_errno) {
  if (open_errno == ENOENT || open_errno == ENOTDIR) return OpenStatus::Missing;
  return open_errno == ELOOP ? OpenStatus::Untrusted : OpenStatus::Failed;
}

// The owner's mode exactly, whatever the umask, and the team's group when shared.
int set_created_mode(int fd, const Trust* trust, bool folder) {
  if (!trust) return 0;
  if (const auto gid = trust->shared_gid())
    if (::fchown(fd, static_cast<uid_t>(-1), *gid) != 0) return errno;
  return ::fchmod(fd, folder ? trust->folder_mode() : trust->file_mode()) == 0 ? 0 : errno;
}

int make_dirs_for(const std::string& path, mode_t mode) {
  for (size_t pos = path.find('/', 1);; pos = path.find('/', pos + 1)) {
    const std::string part = pos == std::string::npos ? path : path.substr(0, pos);
    if (::mkdir(part.c_str(), mode) == 0) {
      // Made here: exact mode now (the last one gets it from finish(), by descriptor).
      if (pos != std::string::npos && ::chmod(part.c_str(), mode) != 0) return errno;
    } else if (errno != EEXIST) {
      return errno;
    }
    if (pos == std::string::npos) return 0;
  }
}

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

}  // namespace

OpenStatus Folder::finish(UniqueFd fd, std::string path, bool created, const Trust* trust,
                          Folder* out, std::string* why) {
  if (created) {
    if (int err = set_created_mode(fd.get(), trust, true)) {
      *why = path + ": cannot set its mode: " + errno_text(err);
      return OpenStatus::Failed;
    }
  }
  if (trust) {
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) {
      *why = open_error(path, errno);
      return OpenStatus::Failed;
    }
    std::string problem = trust->folder_problem(st);
    if (!problem.empty()) {
      *why = path + " " + problem;
      return OpenStatus::Untrusted;
    }
  }
  *out = Folder(std::move(fd), std::move(path));
  return OpenStatus::Ok;
}

OpenStatus Folder::open(const std::string& path, bool create, const Trust* trust, Folder* out,
                        std::string* why) {
  const mode_t mode = trust ? trust->folder_mode() : 0700;
  struct stat before;
  const bool existed = ::lstat(path.c_str(), &before) == 0;
  if (create && !existed) {
    if (int err = make_dirs_for(path, mode & 0777)) {
      *why = path + ": cannot create it: " + errno_text(err);
      return OpenStatus::Failed;
    }
  }
  UniqueFd fd = open_fd(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  if (!fd.valid()) {
    const int err = link_errno(errno, ::lstat(path.c_str(), &before) == 0 ? &before : nullptr);
    *why = open_error(path, err);
    return status_of(err);
  }
  return finish(std::move(fd), path, create && !existed, trust, out, why);
}

OpenStatus Folder::sub(std::string_view name, bool create, const Trust* trust, Folder* out,
                       std::string* why) const {
  const std::string n(name);
  const std::string path = path_of(name);
  bool created = false;
  if (create) {
    const mode_t mode = trust ? trust->folder_mode() & 0777 : 0700;
    created = ::mkdirat(fd_.get(), n.c_str(), mode) == 0;
    if (!created && errno != EEXIST) {
      const int err = errno;
      *why = path + ": cannot create it: " + errno_text(err);
      return err == ENOENT ? OpenStatus::Missing : OpenStatus::Failed;
    }
  }
  int fd;
  do {
    fd = ::openat(fd_.get(), n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    struct stat st;
    const int saved = errno;
    const bool seen = ::fstatat(fd_.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
    const int err = link_errno(saved, seen ? &st : nullptr);
    *why = open_error(path, err);
    return status_of(err);
  }
  return finish(UniqueFd(fd), path, created, trust, out, why);
}

UniqueFd Folder::open_file(std::string_view name, int flags, mode_t mode) const {
  const std::string n(name);
  int fd;
  do {
    fd = ::openat(fd_.get(), n.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  return UniqueFd(fd);
}

UniqueFd Folder::create_file(std::string_view name, const Trust& trust) const {
  UniqueFd fd = open_file(name, O_WRONLY | O_CREAT | O_EXCL, trust.file_mode());
  if (!fd.valid()) return fd;
  if (int err = set_created_mode(fd.get(), &trust, false)) {
    ::unlinkat(fd_.get(), std::string(name).c_str(), 0);
    fd.reset();
    errno = err;
  }
  return fd;
}

std::vector<NameInfo> Folder::list() const {
  std::vector<NameInfo> out;
  // A fresh open file description: a dup would share (and move) this descriptor's offset.
  const int fd = ::openat(fd_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return out;
  std::unique_ptr<DIR, DirCloser> d(::fdopendir(fd));
  if (!d) {
    ::close(fd);
    return out;
  }
  while (dirent* e = ::readdir(d.get())) {
    const std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    NameInfo info;
    info.name = std::string(name);
    if (::fstatat(fd_.get(), e->d_name, &info.st, AT_SYMLINK_NOFOLLOW) == 0)
      out.push_back(std::move(info));
  }
  return out;
}

int Folder::remove_file(std::string_view name) const {
  const std::string n(name);
  struct stat st;
  if (::fstatat(fd_.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return errno;
  if (!S_ISREG(st.st_mode)) return EISDIR;
  return ::unlinkat(fd_.get(), n.c_str(), 0) == 0 ? 0 : errno;
}

int Folder::remove_any(std::string_view name) const {
  const std::string n(name);
  if (::unlinkat(fd_.get(), n.c_str(), 0) == 0) return 0;
  if (errno != EISDIR) return errno;
  return ::unlinkat(fd_.get(), n.c_str(), AT_REMOVEDIR) == 0 ? 0 : errno;
}

int Folder::rename(std::string_view from, std::string_view to) const {
  return ::renameat(fd_.get(), std::string(from).c_str(), fd_.get(), std::string(to).c_str()) == 0
             ? 0
             : errno;
}

std::string resolve_path(const std::string& path, std::string* why) {
  if (path.empty()) {
    *why = "the cache folder is an empty path";
    return {};
  }
  std::string head = path;
  if (head[0] != '/') {
    char cwd[PATH_MAX];
    if (!::getcwd(cwd, sizeof cwd)) {
      *why = path + ": cannot resolve it: " + errno_text(errno);
      return {};
    }
    head = std::string(cwd) + "/" + head;
  }
  std::string rest;  // the components that do not exist yet
  for (int depth = 0; depth < 256; ++depth) {
    if (char* r = ::realpath(head.c_str(), nullptr)) {
      std::string out(r);
      std::free(r);
      return rest.empty() ? out : (out == "/" ? "" : out) + "/" + rest;
    }
    if (errno != ENOENT && errno != ENOTDIR) {
      *why = head + ": " + errno_text(errno);
      return {};
    }
    const size_t slash = head.find_last_of('/');
    const std::string name = head.substr(slash + 1);
    if (name == "..") {
      *why = path + ": '..' after a folder that does not exist";
      return {};
    }
    if (!name.empty() && name != ".") rest = rest.empty() ? name : name + "/" + rest;
    head = slash == 0 ? "/" : head.substr(0, slash);
  }
  *why = path + ": too many components";
  return {};
}

}  // namespace kjit::cache::detail
