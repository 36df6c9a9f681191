// Helpers shared by the cache and cache_fault suites (header-only, not a suite source).
#pragma once

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>

#include "kjit/cache/disk_cache.hpp"
#include "kjit/cache/key.hpp"

namespace kjit_test {

using namespace kjit::cache;

// A fresh folder per test, removed (whatever the test did to its permissions) at the end.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/kjit-cache-test-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    ::nftw(path_.c_str(), &make_writable, 32, FTW_PHYS);
    ::nftw(path_.c_str(), &remove_one, 32, FTW_DEPTH | FTW_PHYS);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  static int make_writable(const char* p, const struct stat* st, int type, FTW*) {
    if (type == FTW_D || type == FTW_DNR) ::chmod(p, st->st_mode | 0700);
    return 0;
  }
  static int remove_one(const char* p, const struct stat*, int, FTW*) {
    ::remove(p);
    return 0;
  }
  std::string path_;
};

inline Key key_of(const std::string& s) {
  return KeyBuilder().add("test", s).finish();
}

inline Entry entry_of(const std::string& payload, const std::string& label = "label") {
  Entry e;
  e.label = label;
  e.metadata = {{"lowered", "_Z6kernelv"}, {"arch", "sm_90"}};
  e.payload = payload;
  return e;
}

inline bool same_entry(const Entry& a, const Entry& b) {
  return a.label == b.label && a.metadata == b.metadata && a.payload == b.payload;
}

inline Options options_for(const std::string& dir, Mode mode = Mode::ReadWrite) {
  Options o;
  o.dir = dir;
  o.mode = mode;
  return o;
}

inline std::string entry_path(const std::string& dir, const Key& k) {
  return dir + "/v1/" + k.hex().substr(0, 2) + "/" + k.hex() + ".kjit";
}

inline bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_file(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

// Every path below `root` with its size, mtime and mode: equal snapshots = nothing written.
using Tree = std::map<std::string, std::tuple<long long, long long, unsigned>>;
inline Tree snapshot(const std::string& root) {
  static thread_local Tree* out;
  Tree tree;
  out = &tree;
  ::nftw(
      root.c_str(),
      [](const char* p, const struct stat* st, int, FTW*) {
        (*out)[p] = {
            static_cast<long long>(st->st_size),
            static_cast<long long>(st->st_mtim.tv_sec) * 1000000000ll + st->st_mtim.tv_nsec,
            static_cast<unsigned>(st->st_mode)};
        return 0;
      },
      32, FTW_PHYS);
  return tree;
}

// Files below `root` whose name contains `part`.
inline int count_files(const std::string& root, const std::string& part) {
  int n = 0;
  for (const auto& kv : snapshot(root)) {
    std::string name = kv.first.substr(kv.first.rfind('/') + 1);
    if (S_ISREG(std::get<2>(kv.second)) && name.find(part) != std::string::npos) ++n;
  }
  return n;
}

// Runs `fn` in a forked child; returns its pid. The child exits with fn's result (99 if it threw).
// doctest's checks cannot report from a child, so children return codes instead.
inline pid_t spawn_child(const std::function<int()>& fn) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 99;
    try {
      rc = fn();
    } catch (...) {
    }
    ::_exit(rc);
  }
  return pid;
}

// The child's exit code, or 100 + signal number if a signal ended it.
inline int wait_child(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 100 + WTERMSIG(status);
  return 98;
}

inline int in_child(const std::function<int()>& fn) {
  return wait_child(spawn_child(fn));
}

// Sets or unsets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Sets a file's mtime to `seconds_ago` in the past (to fake entry ages for LRU tests).
inline void age_file(const std::string& path, long seconds_ago) {
  timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  timespec t[2] = {now, now};
  t[0].tv_sec -= seconds_ago;
  t[1].tv_sec -= seconds_ago;
  ::utimensat(AT_FDCWD, path.c_str(), t, 0);
}

}  // namespace kjit_test
