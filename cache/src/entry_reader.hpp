// Reading one entry file from its shard folder: opened without following a symlink or blocking
// on a FIFO, checked to be a regular file that the trust policy accepts, its fixed header checked
// before the body is read (a huge file of garbage costs 44 bytes, not its size), then parsed and
// verified. get(), list, verify and export all read entries through this one function.
#pragma once

#include <string>
#include <string_view>

#include "entry_format.hpp"
#include "folder.hpp"

namespace kjit::cache::detail {

enum class ReadStatus { Ok, Missing, Untrusted, Corrupt, Failed };

struct EntryRead {
  ReadStatus status = ReadStatus::Failed;
  std::string why;     // "<path>: <reason>" unless Ok
  std::string reason;  // the reason alone
  std::string bytes;   // the whole file when Ok
  UniqueFd fd;         // the descriptor that was read (for touching its mtime)
  int64_t mtime_ns = 0;
};

EntryRead read_entry_file(const Folder& shard, std::string_view name, const Trust& trust,
                          const Key* expected, bool verify_checksum, Entry* out);

}  // namespace kjit::cache::detail
