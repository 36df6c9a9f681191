#include "trust.hpp"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <vector>

#include "posix_io.hpp"

namespace kjit::cache::detail {

namespace {

std::string octal(mode_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

std::string group_name(gid_t gid) {
  std::vector<char> buf(16384);
  group gr;
  group* found = nullptr;
  if (getgrgid_r(gid, &gr, buf.data(), buf.size(), &found) == 0 && found && gr.gr_name)
    return gr.gr_name;
  return std::to_string(gid);
}

std::string user_name(uid_t uid) {
  std::vector<char> buf(16384);
  passwd pw;
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found && pw.pw_name)
    return pw.pw_name;
  return std::to_string(uid);
}

}  // namespace

Trust::Trust(const std::string& shared_group) : uid_(::geteuid()), primary_gid_(::getegid()) {
  std::vector<char> buf(16384);
  passwd pw;
  passwd* found = nullptr;
  if (getpwuid_r(uid_, &pw, buf.data(), buf.size(), &found) == 0 && found) {
    user_name_ = pw.pw_name ? pw.pw_name : "";
    primary_gid_ = pw.pw_gid;
  }
  if (shared_group.empty()) return;
  group gr;
  group* g = nullptr;
  const int err = getgrnam_r(shared_group.c_str(), &gr, buf.data(), buf.size(), &g);
  if (err != 0 || !g)
    throw std::runtime_error("KJIT_CACHE_SHARED=" + shared_group + ": no such group" +
                             (err ? " (" + errno_text(err) + ")" : std::string()));
  shared_gid_ = g->gr_gid;
}

// Debian-style user private groups (umask 002): a group named after the user with no other
// member gives nobody else write access, as OpenSSH's Debian patch for StrictModes also allows.
bool Trust::group_is_users_own(gid_t gid) const {
  if (gid != primary_gid_ || user_name_.empty()) return false;
  std::vector<char> buf(16384);
  group gr;
  group* found = nullptr;
  if (getgrgid_r(gid, &gr, buf.data(), buf.size(), &found) != 0 || !found) return false;
  if (user_name_ != gr.gr_name) return false;
  for (char** m = gr.gr_mem; m && *m; ++m)
    if (user_name_ != *m) return false;
  return true;
}

bool Trust::in_shared_group(uid_t uid) const {
  if (!shared_gid_) return false;
  std::vector<char> buf(16384);
  passwd pw;
  passwd* who = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &who) != 0 || !who) return false;
  if (pw.pw_gid == *shared_gid_) return true;
  const std::string name = pw.pw_name ? pw.pw_name : "";
  std::vector<char> gbuf(65536);
  group gr;
  group* found = nullptr;
  if (getgrgid_r(*shared_gid_, &gr, gbuf.data(), gbuf.size(), &found) != 0 || !found) return false;
  for (char** m = gr.gr_mem; m && *m; ++m)
    if (name == *m) return true;
  return false;
}

std::string Trust::owner_problem(const struct stat& st) const {
  if (st.st_uid == uid_ || st.st_uid == 0 || in_shared_group(st.st_uid)) return {};
  return "is owned by " + user_name(st.st_uid) + ", not by " +
         (user_name_.empty() ? std::to_string(uid_) : user_name_) + " or root" +
         (shared_gid_ ? " or a member of group " + group_name(*shared_gid_) : std::string());
}

std::string Trust::write_problem(const struct stat& st, bool ancestor) const {
  const std::string mode = " (mode " + octal(st.st_mode) + ")";
  // A sticky folder (/tmp) lets others add names but not rename or remove ours: safe above the
  // cache, never for the cache's own folders, where an added name is a planted entry.
  const bool sticky_ok = ancestor && S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX);
  if ((st.st_mode & S_IWOTH) && !sticky_ok) return "is writable by every user" + mode;
  if ((st.st_mode & S_IWGRP) && !sticky_ok) {
    const bool team = shared_gid_ && st.st_gid == *shared_gid_;
    if (!team && !group_is_users_own(st.st_gid))
      return "is writable by group " + group_name(st.st_gid) + mode;
  }
  return {};
}

std::string Trust::folder_problem(const struct stat& st) const {
  if (!S_ISDIR(st.st_mode)) return "is not a folder";
  std::string p = owner_problem(st);
  return p.empty() ? write_problem(st, false) : p;
}

std::string Trust::file_problem(const struct stat& st) const {
  if (!S_ISREG(st.st_mode)) return "is not a regular file";
  std::string p = owner_problem(st);
  return p.empty() ? write_problem(st, false) : p;
}

std::string Trust::chain_problem(const std::string& path) const {
  std::string p = path;
  for (bool first = true;; first = false) {
    struct stat st;
    errno = 0;
    // Missing folders are made by kjit, with its own mode; a file in the way makes that fail,
    // which is a folder that cannot be written, not one to distrust.
    if (::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      std::string why = owner_problem(st);
      if (why.empty()) why = write_problem(st, !first);
      if (!why.empty()) return p + " " + why;
    } else if (errno != ENOENT && errno != ENOTDIR && errno != 0) {
      return p + ": " + errno_text(errno);
    }
    if (p == "/") return {};
    const size_t slash = p.find_last_of('/');
    p = slash == 0 ? "/" : p.substr(0, slash);
  }
}

}  // namespace kjit::cache::detail
