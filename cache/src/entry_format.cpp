#include "entry_format.hpp"

#include <cstring>

#include "sha256.hpp"

namespace kjit::cache {

const std::string* Entry::find(const std::string& name) const {
  for (const auto& kv : metadata)
    if (kv.first == name) return &kv.second;
  return nullptr;
}

namespace detail {

namespace {

void put_u32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

void put_u64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

void put_bytes(std::string* out, std::string_view s) {
  put_u64(out, s.size());
  out->append(s);
}

uint64_t get_le(const char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

// Sequential reader over the body (everything before the checksum). Every read fails cleanly
// instead of running past the end.
class Reader {
 public:
  explicit Reader(std::string_view body) : body_(body) {}
  bool u64(uint64_t* v) {
    if (left() < 8) return false;
    *v = get_le(body_.data() + pos_, 8);
    pos_ += 8;
    return true;
  }
  bool bytes(std::string* out) {
    uint64_t n;
    if (!u64(&n) || n > left()) return false;
    out->assign(body_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  void skip(size_t n) { pos_ += n; }
  size_t left() const { return body_.size() - pos_; }

 private:
  std::string_view body_;
  size_t pos_ = 0;
};

// Header + label length + metadata count + payload length + checksum.
constexpr size_t kMinEntrySize = kEntryHeaderSize + 8 + 8 + 8 + kChecksumSize;
// A pair needs two length fields at least; bounds the count before reserving.
constexpr size_t kMinPairSize = 16;

ParseStatus parse_fields(Reader* r, Entry* out) {
  Entry e;
  uint64_t count;
  if (!r->bytes(&e.label) || !r->u64(&count) || count > r->left() / kMinPairSize)
    return ParseStatus::BadLength;
  e.metadata.resize(count);
  for (auto& kv : e.metadata)
    if (!r->bytes(&kv.first) || !r->bytes(&kv.second)) return ParseStatus::BadLength;
  if (!r->bytes(&e.payload)) return ParseStatus::BadLength;
  // Trailing bytes mean the lengths disagree with the file size: not something we wrote.
  if (r->left() != 0) return ParseStatus::BadLength;
  if (out) *out = std::move(e);
  return ParseStatus::Ok;
}

}  // namespace

const char* describe(ParseStatus s) {
  switch (s) {
    case ParseStatus::Ok:
      return "ok";
    case ParseStatus::TooShort:
      return "truncated entry";
    case ParseStatus::BadMagic:
      return "bad magic (not a kjit cache entry)";
    case ParseStatus::BadVersion:
      return "unsupported entry format version";
    case ParseStatus::BadChecksum:
      return "checksum mismatch";
    case ParseStatus::KeyMismatch:
      return "stored key does not match the file name";
    case ParseStatus::BadLength:
      return "field length runs past the end";
  }
  return "unknown";
}

std::string serialize_entry(const Key& key, const Entry& entry) {
  size_t size = kMinEntrySize + entry.label.size() + entry.payload.size();
  for (const auto& kv : entry.metadata) size += kMinPairSize + kv.first.size() + kv.second.size();
  std::string out;
  out.reserve(size);
  out.append(kEntryMagic);
  put_u32(&out, kEntryFormatVersion);
  out.append(reinterpret_cast<const char*>(key.bytes.data()), key.bytes.size());
  put_bytes(&out, entry.label);
  put_u64(&out, entry.metadata.size());
  for (const auto& kv : entry.metadata) {
    put_bytes(&out, kv.first);
    put_bytes(&out, kv.second);
  }
  put_bytes(&out, entry.payload);
  Sha256 sha;
  sha.update(out);
  Digest d = sha.finish();
  out.append(reinterpret_cast<const char*>(d.data()), d.size());
  return out;
}

ParseStatus check_entry_header(std::string_view head, const Key* expected) {
  if (head.size() < kEntryHeaderSize) return ParseStatus::TooShort;
  if (head.substr(0, kEntryMagic.size()) != kEntryMagic) return ParseStatus::BadMagic;
  // Any other version, older or newer, is a miss: the runtime recompiles and overwrites it.
  if (get_le(head.data() + kEntryVersionOffset, 4) != kEntryFormatVersion)
    return ParseStatus::BadVersion;
  if (expected && std::memcmp(head.data() + kEntryKeyOffset, expected->bytes.data(),
                              expected->bytes.size()) != 0)
    return ParseStatus::KeyMismatch;
  return ParseStatus::Ok;
}

ParseStatus parse_entry(std::string_view file, const Key* expected, bool verify_checksum,
                        Key* key_out, Entry* out) {
  if (file.size() < kMinEntrySize) return ParseStatus::TooShort;
  // The key is compared after the checksum: a damaged key is reported as damage.
  if (ParseStatus s = check_entry_header(file, nullptr); s != ParseStatus::Ok) return s;
  std::string_view body = file.substr(0, file.size() - kChecksumSize);
  if (verify_checksum) {
    Sha256 sha;
    sha.update(body);
    Digest d = sha.finish();
    if (std::memcmp(d.data(), file.data() + body.size(), d.size()) != 0)
      return ParseStatus::BadChecksum;
  }
  Key stored;
  std::memcpy(stored.bytes.data(), file.data() + kEntryKeyOffset, stored.bytes.size());
  if (expected && stored != *expected) return ParseStatus::KeyMismatch;
  Reader r(body);
  r.skip(kEntryHeaderSize);
  ParseStatus s = parse_fields(&r, out);
  if (s == ParseStatus::Ok && key_out) *key_out = stored;
  return s;
}

}  // namespace detail
}  // namespace kjit::cache
