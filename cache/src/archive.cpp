#include "archive.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

#include "cache_dir.hpp"

namespace kjit::cache::detail {

namespace {

constexpr std::string_view kArchiveMagic("KJITARC\0", 8);
constexpr uint32_t kArchiveVersion = 1;
constexpr char kRecordTag = 1;
constexpr char kEndTag = 0;

std::string le(uint64_t v, int n) {
  std::string s(static_cast<size_t>(n), '\0');
  for (int i = 0; i < n; ++i) s[static_cast<size_t>(i)] = static_cast<char>(v >> (8 * i));
  return s;
}

uint64_t from_le(std::string_view s) {
  uint64_t v = 0;
  for (size_t i = 0; i < s.size(); ++i) v |= uint64_t{static_cast<uint8_t>(s[i])} << (8 * i);
  return v;
}

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw std::runtime_error("kjit cache: bad archive " + path + ": " + why);
}

// Reads the body (all but the trailing checksum) sequentially, hashing what it hands out.
class BodyReader {
 public:
  BodyReader(const std::string& path, int fd, uint64_t body_size)
      : path_(path), fd_(fd), left_(body_size) {}

  std::string take(uint64_t n, const char* what) {
    if (n > left_) fail(path_, std::string("truncated (") + what + " runs past the end)");
    std::string out;
    read_raw(n, &out);
    sha_.update(out);
    left_ -= n;
    return out;
  }
  uint64_t take_u64(const char* what) { return from_le(take(8, what)); }
  uint64_t left() const { return left_; }

  void check_checksum() {
    std::string stored;
    read_raw(32, &stored);
    Digest d = sha_.finish();
    if (std::memcmp(d.data(), stored.data(), d.size()) != 0) fail(path_, "checksum mismatch");
  }

 private:
  void read_raw(uint64_t n, std::string* out) {
    out->resize(n);
    if (int err = read_exact(fd_, out->data(), n))
      fail(path_, err == EIO ? "file shrank while reading" : "read error: " + errno_text(err));
  }

  const std::string& path_;
  int fd_;
  uint64_t left_;
  Sha256 sha_;
};

}  // namespace

ArchiveWriter::ArchiveWriter(const std::string& path) : path_(path), temp_(temp_path_for(path)) {
  fd_ = open_fd(temp_, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
  if (!fd_.valid())
    throw std::runtime_error("kjit cache: cannot create " + temp_ + ": " + errno_text(errno));
  // 0644 whatever the umask: an archive is code that someone will import, so no one else may
  // write it (import checks it only against itself), and anyone may read it to ship it.
  if (::fchmod(fd_.get(), 0644) != 0) {
    const int err = errno;
    ::unlink(temp_.c_str());
    throw std::runtime_error("kjit cache: cannot set the mode of " + temp_ + ": " +
                             errno_text(err));
  }
  try {
    write(kArchiveMagic);
    write(le(kArchiveVersion, 4));
  } catch (...) {  // the destructor does not run for a constructor that throws
    ::unlink(temp_.c_str());
    throw;
  }
}

ArchiveWriter::~ArchiveWriter() {
  if (!committed_) ::unlink(temp_.c_str());
}

void ArchiveWriter::write(std::string_view bytes) {
  if (int err = write_all(fd_.get(), bytes))
    throw std::runtime_error("kjit cache: cannot write " + temp_ + ": " + errno_text(err));
  sha_.update(bytes);
}

void ArchiveWriter::add(const Key& key, std::string_view entry_file) {
  write(std::string_view(&kRecordTag, 1));
  write(std::string_view(reinterpret_cast<const char*>(key.bytes.data()), key.bytes.size()));
  write(le(entry_file.size(), 8));
  write(entry_file);
  ++count_;
}

void ArchiveWriter::commit() {
  write(std::string_view(&kEndTag, 1));
  write(le(count_, 8));
  Digest d = sha_.finish();
  if (int err =
          write_all(fd_.get(), std::string_view(reinterpret_cast<const char*>(d.data()), d.size())))
    throw std::runtime_error("kjit cache: cannot write " + temp_ + ": " + errno_text(err));
  if (int err = fd_.close_checked())
    throw std::runtime_error("kjit cache: cannot write " + temp_ + ": " + errno_text(err));
  if (::rename(temp_.c_str(), path_.c_str()) != 0)
    throw std::runtime_error("kjit cache: cannot rename to " + path_ + ": " + errno_text(errno));
  committed_ = true;
}

void (*import_between_passes_hook)() = nullptr;

UniqueFd open_archive(const std::string& path) {
  UniqueFd fd = open_fd(path, O_RDONLY | O_NONBLOCK);
  struct stat st;
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0)
    throw std::runtime_error("kjit cache: cannot open archive " + path + ": " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
  return fd;
}

void read_archive(int fd, const std::string& path,
                  const std::function<void(const Key&, std::string_view entry_file)>& visit) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || ::lseek(fd, 0, SEEK_SET) != 0)
    throw std::runtime_error("kjit cache: cannot read archive " + path + ": " + errno_text(errno));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < kArchiveMagic.size() + 4 + 1 + 8 + 32) fail(path, "too short to be a kjit archive");
  BodyReader in(path, fd, size - 32);
  if (in.take(kArchiveMagic.size(), "magic") != kArchiveMagic) fail(path, "not a kjit archive");
  uint64_t version = from_le(in.take(4, "version"));
  if (version != kArchiveVersion)
    fail(path, "archive format version " + std::to_string(version) + " is not supported");
  uint64_t count = 0;
  for (;;) {
    std::string tag = in.take(1, "record tag");
    if (tag[0] == kEndTag) break;
    if (tag[0] != kRecordTag) fail(path, "unknown record tag");
    Key key;
    std::string raw = in.take(key.bytes.size(), "key");
    std::memcpy(key.bytes.data(), raw.data(), key.bytes.size());
    uint64_t len = in.take_u64("entry length");
    if (len > kMaxEntryBytes)  // no entry is larger: never allocate it
      fail(path, "entry " + key.hex() + " claims " + std::to_string(len) +
                     " bytes, over the 1 GiB limit of an entry");
    std::string entry = in.take(len, "entry");
    visit(key, entry);
    ++count;
  }
  if (in.take_u64("entry count") != count) fail(path, "entry count mismatch");
  if (in.left() != 0) fail(path, "trailing bytes after the end marker");
  in.check_checksum();
}

}  // namespace kjit::cache::detail
