#include "folder.hpp"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
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

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

// A folder above the cache folder, by the descriptor this walk opened (not by path: nothing can
// be swapped in between the check and the use).
OpenStatus check_ancestor(const Folder& f, const std::string& path, const Trust* trust,
                          std::string* why) {
  if (!trust) return OpenStatus::Ok;
  struct stat st;
  if (::fstat(f.fd(), &st) != 0) {
    *why = path + ": " + errno_text(errno);
    return OpenStatus::Failed;
  }
  const std::string problem = trust->ancestor_problem(st);
  if (problem.empty()) return OpenStatus::Ok;
  *why = path + " " + problem;
  return OpenStatus::Untrusted;
}

}  // namespace

OpenStatus Folder::finish(UniqueFd fd, std::string path, const Trust* trust, Folder* out,
                          std::string* why) {
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

// Walks from "/" one component at a time, each opened relative to its parent with O_NOFOLLOW:
// a symlink swapped in anywhere after resolve_path() is refused, not followed, and only a folder
// this walk itself made (mkdirat returned 0) gets its mode set.
OpenStatus Folder::open(const std::string& given, bool create, const Trust* trust, Folder* out,
                        std::string* why) {
  std::string path = given;
  while (path.size() > 1 && path.back() == '/') path.pop_back();  // the last name is the folder
  if (path.empty() || path[0] != '/') {  // never resolved against whatever the cwd is now
    *why = path + ": not an absolute path";
    return OpenStatus::Failed;
  }
  Folder at(open_fd("/", O_RDONLY | O_DIRECTORY), "");
  if (!at.valid()) {
    *why = "/: " + errno_text(errno);
    return OpenStatus::Failed;
  }
  if (const OpenStatus s = check_ancestor(at, "/", trust, why); s != OpenStatus::Ok) return s;
  size_t pos = 1;
  while (pos <= path.size()) {
    const size_t end = std::min(path.find('/', pos), path.size());
    const std::string name = path.substr(pos, end - pos);
    pos = end + 1;
    if (name.empty()) continue;
    Folder next;
    // The last folder is the cache folder (the folder rule); those above it, ancestors.
    const bool last = pos > path.size();
    OpenStatus s = at.sub(name, create, last ? trust : nullptr, &next, why, trust, !last);
    if (s == OpenStatus::Ok && !last) s = check_ancestor(next, next.path(), trust, why);
    if (s != OpenStatus::Ok) return s;
    at = std::move(next);
  }
  if (at.path_.empty()) at.path_ = "/";
  *out = std::move(at);
  return OpenStatus::Ok;
}

OpenStatus Folder::sub(std::string_view name, bool create, const Trust* trust, Folder* out,
                       std::string* why, const Trust* made_with, bool path_only) const {
  const std::string n(name);
  const std::string path = path_of(name);
  if (!made_with) made_with = trust;
  bool created = false;
  if (create) {
    const mode_t mode = made_with ? made_with->folder_mode() & 0777 : 0700;
    created = ::mkdirat(fd_.get(), n.c_str(), mode) == 0;
    if (!created && errno != EEXIST) {
      const int err = errno;
      *why = path + ": cannot create it: " + errno_text(err);
      return err == ENOENT ? OpenStatus::Missing : OpenStatus::Failed;
    }
  }
  // A folder only passed through needs search permission alone (a root-owned 0711 home):
  // O_PATH, unless this walk made it and must set its mode.
  const int access = path_only && !created ? O_PATH : O_RDONLY;
  int fd;
  do {
    fd = ::openat(fd_.get(), n.c_str(), access | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    struct stat st;
    const int saved = errno;
    const bool seen = ::fstatat(fd_.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
    const int err = link_errno(saved, seen ? &st : nullptr);
    *why = open_error(path, err);
    return status_of(err);
  }
  if (created) {
    if (int err = set_created_mode(fd, made_with, true)) {
      ::close(fd);
      ::unlinkat(fd_.get(), n.c_str(), AT_REMOVEDIR);  // nothing half-made is left behind
      *why = path + ": cannot set its mode: " + errno_text(err);
      return OpenStatus::Failed;
    }
  }
  return finish(UniqueFd(fd), path, trust, out, why);
}

UniqueFd Folder::open_file(std::string_view name, int flags, mode_t mode) const {
  const std::string n(name);
  int fd;
  do {
    fd = ::openat(fd_.get(), n.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  return UniqueFd(fd);
}

UniqueFd Folder::create_file(std::string_view name, const Trust& trust, int flags) const {
  UniqueFd fd = open_file(name, flags | O_CREAT | O_EXCL, trust.file_mode());
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

namespace {

std::vector<std::string> components(const std::string& path) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= path.size()) {
    const size_t end = std::min(path.find('/', pos), path.size());
    if (end > pos) out.push_back(path.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

}  // namespace

// Like realpath(3), one component at a time, so that every symlink is seen (and its owner
// checked) before it is followed; the part that does not exist yet is appended as written.
std::string resolve_path(const std::string& path, const Trust& trust, std::string* why,
                         bool* untrusted) {
  *untrusted = false;
  if (path.empty()) {
    *why = "the cache folder is an empty path";
    return {};
  }
  std::string start = path;
  if (start[0] != '/') {
    char cwd[PATH_MAX];
    if (!::getcwd(cwd, sizeof cwd)) {
      *why = path + ": cannot resolve it: " + errno_text(errno);
      return {};
    }
    start = std::string(cwd) + "/" + start;
  }
  std::vector<std::string> todo = components(start);
  std::reverse(todo.begin(), todo.end());  // a stack: next component last
  std::string done;                        // resolved so far, "" for "/"
  bool missing = false;                    // below here nothing exists yet
  for (int links = 0; !todo.empty();) {
    const std::string name = todo.back();
    todo.pop_back();
    if (name == ".") continue;
    if (name == "..") {
      if (missing) {
        *why = path + ": '..' after a folder that does not exist";
        return {};
      }
      done = parent_folder(done);
      if (done == "/") done.clear();  // this walk keeps the root as ""
      continue;
    }
    const std::string next = done + "/" + name;
    struct stat st;
    if (missing || ::lstat(next.c_str(), &st) != 0) {
      if (!missing && errno != ENOENT && errno != ENOTDIR) {
        // EACCES: the folder it is in may not be searched; name that one.
        *why = errno == EACCES
                   ? (done.empty() ? "/" : done) + ": cannot search it: " + errno_text(errno)
                   : next + ": " + errno_text(errno);
        return {};
      }
      missing = true;
      done = next;
      continue;
    }
    if (!S_ISLNK(st.st_mode)) {
      done = next;
      continue;
    }
    if (std::string problem = trust.link_problem(st); !problem.empty()) {
      *why = next + " is a symbolic link that " + problem;
      *untrusted = true;
      return {};
    }
    char target[PATH_MAX];
    const ssize_t n = ::readlink(next.c_str(), target, sizeof target - 1);
    if (n < 0 || ++links > 40) {
      *why = next + ": " + errno_text(n < 0 ? errno : ELOOP);
      return {};
    }
    const std::string to(target, static_cast<size_t>(n));
    if (!to.empty() && to[0] == '/') done.clear();
    std::vector<std::string> more = components(to);
    for (auto it = more.rbegin(); it != more.rend(); ++it) todo.push_back(*it);
  }
  return done.empty() ? "/" : done;
}

}  // namespace kjit::cache::detail
