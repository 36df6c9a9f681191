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

// getgrgid_r and friends with a buffer that grows on ERANGE (a group with thousands of members
// does not fit the usual 16 KB). The buffer lives as long as the result.
template <class Entry, class Call>
bool lookup(Entry* entry, std::vector<char>* buf, Call call) {
  buf->resize(16384);
  for (;;) {
    Entry* found = nullptr;
    const int err = call(entry, buf->data(), buf->size(), &found);
    if (err == ERANGE && buf->size() < (size_t{64} << 20)) {
      buf->resize(buf->size() * 4);
      continue;
    }
    return err == 0 && found;
  }
}

bool group_by_gid(gid_t gid, group* gr, std::vector<char>* buf) {
  return lookup(
      gr, buf, [&](group* g, char* b, size_t n, group** f) { return getgrgid_r(gid, g, b, n, f); });
}

bool user_by_uid(uid_t uid, passwd* pw, std::vector<char>* buf) {
  return lookup(pw, buf, [&](passwd* p, char* b, size_t n, passwd** f) {
    return getpwuid_r(uid, p, b, n, f);
  });
}

std::string group_name(gid_t gid) {
  std::vector<char> buf;
  group gr;
  return group_by_gid(gid, &gr, &buf) && gr.gr_name ? gr.gr_name : std::to_string(gid);
}

std::string user_name(uid_t uid) {
  std::vector<char> buf;
  passwd pw;
  return user_by_uid(uid, &pw, &buf) && pw.pw_name ? pw.pw_name : std::to_string(uid);
}

}  // namespace

Trust::Trust(const std::string& shared_group) : uid_(::geteuid()), primary_gid_(::getegid()) {
  std::vector<char> buf;
  passwd pw;
  if (user_by_uid(uid_, &pw, &buf)) {
    user_name_ = pw.pw_name ? pw.pw_name : "";
    primary_gid_ = pw.pw_gid;
  }
  if (shared_group.empty()) return;
  group gr;
  const bool found = lookup(&gr, &buf, [&](group* g, char* b, size_t n, group** f) {
    return getgrnam_r(shared_group.c_str(), g, b, n, f);
  });
  if (!found) throw std::runtime_error("KJIT_CACHE_SHARED=" + shared_group + ": no such group");
  shared_gid_ = gr.gr_gid;
}

// Debian-style user private groups (umask 002): a group named after the user with no other
// member gives nobody else write access, as OpenSSH's Debian patch for StrictModes also allows.
bool Trust::group_is_users_own(gid_t gid) const {
  return remembered(users_own_group_, gid, [&] { return look_up_group_is_users_own(gid); });
}

bool Trust::in_shared_group(uid_t uid) const {
  return shared_gid_ && remembered(team_member_, uid, [&] { return look_up_in_shared_group(uid); });
}

bool Trust::look_up_group_is_users_own(gid_t gid) const {
  // Never gid 0: other accounts have it as their primary group (RHEL's operator), which its
  // member list does not show.
  if (gid == 0 || gid != primary_gid_ || user_name_.empty()) return false;
  std::vector<char> buf;
  group gr;
  if (!group_by_gid(gid, &gr, &buf) || user_name_ != gr.gr_name) return false;
  for (char** m = gr.gr_mem; m && *m; ++m)
    if (user_name_ != *m) return false;
  return true;
}

bool Trust::look_up_in_shared_group(uid_t uid) const {
  std::vector<char> buf, gbuf;
  passwd pw;
  group gr;
  if (!user_by_uid(uid, &pw, &buf)) return false;
  if (pw.pw_gid == *shared_gid_) return true;
  if (!pw.pw_name || !group_by_gid(*shared_gid_, &gr, &gbuf)) return false;
  for (char** m = gr.gr_mem; m && *m; ++m)
    if (std::string(pw.pw_name) == *m) return true;
  return false;
}

std::string Trust::owner_problem(const struct stat& st) const {
  if (st.st_uid == uid_ || st.st_uid == 0 || in_shared_group(st.st_uid)) return {};
  const std::string me = user_name_.empty() ? std::to_string(uid_) : user_name_;
  return "is owned by " + user_name(st.st_uid) + ", not by " +
         (uid_ == 0 ? std::string("root") : me + " or root") +
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

std::string Trust::ancestor_problem(const struct stat& st) const {
  std::string p = owner_problem(st);
  return p.empty() ? write_problem(st, true) : p;
}

std::string Trust::chain_problem(const std::string& path) const {
  std::string p = path;
  for (bool first = true;; first = false) {
    struct stat st;
    // Missing folders are made by kjit, with its own mode; a file in the way makes that fail,
    // which is a folder that cannot be written, not one to distrust.
    const bool seen = ::lstat(p.c_str(), &st) == 0;
    if (seen && S_ISLNK(st.st_mode))
      return p + " is a symbolic link (swapped in after it was resolved)";
    if (seen && S_ISDIR(st.st_mode)) {
      std::string why = first ? folder_problem(st) : ancestor_problem(st);
      if (!why.empty()) return p + " " + why;
    } else if (!seen && errno != ENOENT && errno != ENOTDIR) {
      return p + ": " + errno_text(errno);
    }
    if (p == "/") return {};
    p = parent_folder(p);
  }
}

}  // namespace kjit::cache::detail
