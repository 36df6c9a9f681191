// Which cache folders and files kjit trusts. A cache entry is code that runs on the GPU, so the
// rule is OpenSSH's StrictModes applied to a folder tree: everything the cache reads must be
// owned by this user (or root) and writable by no one else, and so must every folder above it,
// since whoever can rename a folder on the path can swap the whole cache. A team may opt into a
// shared folder by naming a group (KJIT_CACHE_SHARED): then members of that group are trusted too.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace kjit::cache::detail {

class Trust {
 public:
  // Private: only this user and root. `shared_group` non-empty: also that group's members.
  // Throws std::runtime_error when the group does not exist.
  explicit Trust(const std::string& shared_group = {});

  bool shared() const { return shared_gid_.has_value(); }
  // Modes kjit creates with (exact, whatever the umask): 0700/0600, or 2770/0660 when shared.
  mode_t folder_mode() const { return shared() ? 02770 : 0700; }
  mode_t file_mode() const { return shared() ? 0660 : 0600; }
  std::optional<gid_t> shared_gid() const { return shared_gid_; }

  // Empty when trusted, else the rule it breaks ("is writable by group 'staff' (mode 0775)").
  std::string folder_problem(const struct stat& st) const;
  std::string file_problem(const struct stat& st) const;
  // A symlink on the way to the cache folder: whose it is decides where the cache goes.
  std::string link_problem(const struct stat& st) const { return owner_problem(st); }
  // Every folder from `path` (absolute, no symlinks: realpath'd) up to "/" (those that do not
  // exist yet are skipped: kjit makes them). The first problem found, prefixed with the folder's
  // path; empty when the whole chain is trusted.
  std::string chain_problem(const std::string& path) const;
  // A folder above the cache folder: owned by the user, root or (shared) a team member, and
  // writable by no one else unless sticky (/tmp). Empty when trusted, else the rule it breaks.
  std::string ancestor_problem(const struct stat& st) const;

 private:
  std::string owner_problem(const struct stat& st) const;
  std::string write_problem(const struct stat& st, bool folder) const;
  bool group_is_users_own(gid_t gid) const;
  bool in_shared_group(uid_t uid) const;
  bool look_up_group_is_users_own(gid_t gid) const;
  bool look_up_in_shared_group(uid_t uid) const;
  using Clock = std::chrono::steady_clock;
  using Memo = std::map<id_t, std::pair<bool, Clock::time_point>>;  // uid or gid -> (answer, when)
  // memo[id] while under a minute old, else look_up()'s answer, remembered (asked outside the
  // lock: two threads may both ask). A minute bounds both a lookup that failed (an LDAP timeout
  // reads as "no") and a membership changed since (a team member removed).
  template <class LookUp>
  bool remembered(Memo& memo, id_t id, LookUp look_up) const {
    const Clock::time_point now = Clock::now();
    {
      std::lock_guard<std::mutex> lock(memo_mu_);
      auto it = memo.find(id);
      if (it != memo.end() && now - it->second.second < std::chrono::minutes(1))
        return it->second.first;
    }
    const bool answer = look_up();
    std::lock_guard<std::mutex> lock(memo_mu_);
    memo[id] = {answer, now};
    return answer;
  }

  uid_t uid_;
  gid_t primary_gid_;
  std::string user_name_;
  std::optional<gid_t> shared_gid_;
  // The account database's answers, remembered for a minute: every lookup checks each folder it
  // walks, and a user-private or team group on the way would otherwise read /etc/group (or ask
  // LDAP) on every cache access.
  mutable std::mutex memo_mu_;
  mutable Memo users_own_group_;  // by gid
  mutable Memo team_member_;      // by uid
};

}  // namespace kjit::cache::detail
