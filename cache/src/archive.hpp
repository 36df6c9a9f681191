// Archive file for export/import: a stream of complete entry files (each still carrying its own
// key and checksum), so import re-verifies each entry exactly as get() would.
//
//   "KJITARC\0"  u32 LE version (1)
//   per entry:   u8 1, key (32 bytes), u64 LE length, entry file bytes
//   end:         u8 0, u64 LE entry count
//   SHA-256 of every byte before it (32 bytes)
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "kjit/cache/key.hpp"
#include "posix_io.hpp"
#include "sha256.hpp"

namespace kjit::cache::detail {

// Writes to a temp file beside `path` and renames it into place on commit(), so a failed or
// interrupted export never leaves a truncated archive under the requested name.
// All methods throw std::runtime_error on I/O errors.
class ArchiveWriter {
 public:
  explicit ArchiveWriter(const std::string& path);
  ~ArchiveWriter();
  ArchiveWriter(const ArchiveWriter&) = delete;
  ArchiveWriter& operator=(const ArchiveWriter&) = delete;

  void add(const Key& key, std::string_view entry_file);
  void commit();

 private:
  void write(std::string_view bytes);

  std::string path_, temp_;
  UniqueFd fd_;
  Sha256 sha_;
  uint64_t count_ = 0;
  bool committed_ = false;
};

// The archive at `path` (a symlink given by the user is followed), opened without blocking on a
// FIFO and checked to be a regular file. Throws std::runtime_error naming the path and the cause.
UniqueFd open_archive(const std::string& path);

// Streams every record of the archive open on `fd` (from its start: a second pass reads the same
// file, not whatever `path` names by then) to `visit` in order, then checks the end marker, the
// count and the checksum. Throws std::runtime_error naming the problem; since the checksum is
// only known at the end, callers that must not act on a bad archive do a validation pass first.
// Test hook: called by DiskCache::import_from between its two passes (nullptr: nothing).
extern void (*import_between_passes_hook)();

void read_archive(int fd, const std::string& path,
                  const std::function<void(const Key&, std::string_view entry_file)>& visit);

}  // namespace kjit::cache::detail
