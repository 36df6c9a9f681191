#include "entry_reader.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_dir.hpp"

namespace kjit::cache::detail {

namespace {

EntryRead fail(EntryRead r, ReadStatus s, const std::string& path, const std::string& reason) {
  r.status = s;
  r.reason = reason;
  r.why = path + (reason.rfind("is ", 0) == 0 ? " " : ": ") + reason;
  r.bytes.clear();
  return r;
}

}  // namespace

EntryRead read_entry_file(const Folder& shard, std::string_view name, const Trust& trust,
                          const Key* expected, bool verify_checksum, Entry* out) {
  EntryRead r;
  const std::string path = shard.path_of(name);
  r.fd = shard.open_file(name, O_RDONLY);
  if (!r.fd.valid()) {
    const int err = errno;
    if (err == ENOENT) return fail(std::move(r), ReadStatus::Missing, path, "no such entry");
    if (err == ELOOP) return fail(std::move(r), ReadStatus::Untrusted, path, "is a symbolic link");
    return fail(std::move(r), ReadStatus::Failed, path, errno_text(err));
  }
  struct stat st;
  if (::fstat(r.fd.get(), &st) != 0)
    return fail(std::move(r), ReadStatus::Failed, path, errno_text(errno));
  if (std::string problem = trust.file_problem(st); !problem.empty())
    return fail(std::move(r), ReadStatus::Untrusted, path, problem);
  r.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000ll + st.st_mtim.tv_nsec;
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > kMaxEntryBytes)
    return fail(std::move(r), ReadStatus::Corrupt, path, "is larger than any entry (not read)");
  if (size < kEntryHeaderSize)
    return fail(std::move(r), ReadStatus::Corrupt, path, describe(ParseStatus::TooShort));
  r.bytes.resize(kEntryHeaderSize);
  if (int err = read_exact(r.fd.get(), r.bytes.data(), r.bytes.size()))
    return fail(std::move(r), ReadStatus::Failed, path, errno_text(err));
  if (ParseStatus s = check_entry_header(r.bytes, expected); s != ParseStatus::Ok)
    return fail(std::move(r), ReadStatus::Corrupt, path, describe(s));
  const size_t head = r.bytes.size();
  r.bytes.resize(static_cast<size_t>(size));
  if (int err = read_exact(r.fd.get(), r.bytes.data() + head, r.bytes.size() - head))
    return fail(std::move(r), ReadStatus::Failed, path, errno_text(err));
  if (ParseStatus s = parse_entry(r.bytes, expected, verify_checksum, nullptr, out);
      s != ParseStatus::Ok)
    return fail(std::move(r), ReadStatus::Corrupt, path, describe(s));
  r.status = ReadStatus::Ok;
  return r;
}

}  // namespace kjit::cache::detail
