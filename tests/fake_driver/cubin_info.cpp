#include "cubin_info.hpp"

#include <cstdint>
#include <cstring>

namespace kjit_fake {
namespace {

template <class T>
T read_at(const unsigned char* p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof(T));
  return v;
}

struct Section {
  std::string name;
  uint32_t type = 0, info = 0;  // a .text.<kernel>'s info is its kernel's symbol index
  uint64_t offset = 0, size = 0;
};

constexpr uint32_t kNoBits = 8;         // SHT_NOBITS: .nv.shared.* take no room in the file
constexpr uint8_t kFormatSval = 4;      // EIFMT_SVAL: a 16-bit size, then that many bytes
constexpr uint8_t kAttrMaxThreads = 5;  // EIATTR_MAX_THREADS: x, y, z (u32 each)
constexpr uint8_t kAttrParamInfo = 23;  // EIATTR_KPARAM_INFO
constexpr uint8_t kAttrRegCount = 47;   // EIATTR_REGCOUNT: symbol index, registers (u32 each)

// The section headers, with their names; empty when the headers do not fit the image.
std::vector<Section> sections(const unsigned char* b, size_t bytes, uint64_t shoff,
                              uint16_t shentsize, uint16_t shnum, uint16_t shstrndx) {
  std::vector<Section> out(shnum);
  for (uint16_t i = 0; i < shnum; ++i) {
    const size_t h = shoff + size_t{i} * shentsize;
    out[i].name = std::to_string(read_at<uint32_t>(b, h));  // an offset until named below
    out[i].type = read_at<uint32_t>(b, h + 4);
    out[i].offset = read_at<uint64_t>(b, h + 24);
    out[i].size = read_at<uint64_t>(b, h + 32);
    out[i].info = read_at<uint32_t>(b, h + 44);
    if (out[i].type != kNoBits && (out[i].offset > bytes || out[i].size > bytes - out[i].offset))
      return {};
  }
  if (shstrndx >= shnum || out[shstrndx].type == kNoBits) return {};
  const Section& names = out[shstrndx];
  for (Section& s : out) {
    const uint64_t at = std::stoull(s.name);
    if (at >= names.size) return {};
    const char* p = reinterpret_cast<const char*>(b + names.offset + at);
    s.name.assign(p, strnlen(p, names.size - at));
  }
  return out;
}

// Calls f(attr, value, len) for each EIATTR_*-with-a-size record of an .nv.info section; false
// when the records overrun the section or f refuses one.
template <class F>
bool each_record(const unsigned char* p, size_t n, F f) {
  for (size_t i = 0; i + 4 <= n;) {
    const uint8_t format = p[i], attr = p[i + 1];
    if (format != kFormatSval) {
      i += 4;  // EIFMT_NVAL / BVAL / HVAL: the value (if any) fits the next two bytes
      continue;
    }
    const uint16_t len = read_at<uint16_t>(p, i + 2);
    if (i + 4 + len > n || !f(attr, p + i + 4, len)) return false;
    i += 4 + len;
  }
  return true;
}

// A kernel's .nv.info.<name>: its parameters (EIATTR_KPARAM_INFO records: index u32, ordinal
// u16, offset u16, flags u32 whose bits 18..31 are the size) and its __launch_bounds__.
bool read_kernel_records(const unsigned char* p, size_t n, KernelInfo* k) {
  const bool ok = each_record(p, n, [k](uint8_t attr, const unsigned char* v, uint16_t len) {
    if (attr == kAttrMaxThreads) {
      if (len < 12) return false;
      uint64_t t = 1;
      for (size_t at = 0; at < 12; at += 4) {
        const uint32_t d = read_at<uint32_t>(v, at);
        if (d == 0 || d > 1024) return false;
        t *= d;
      }
      if (t > 1024) return false;
      k->max_threads = static_cast<int>(t);
    } else if (attr == kAttrParamInfo) {
      if (len < 12) return false;
      const uint16_t ordinal = read_at<uint16_t>(v, 4), offset = read_at<uint16_t>(v, 6);
      const uint32_t flags = read_at<uint32_t>(v, 8);
      if (ordinal >= 4096) return false;
      if (k->param_sizes.size() <= ordinal) {
        k->param_sizes.resize(ordinal + 1u, 0);
        k->param_offsets.resize(ordinal + 1u, 0);
      }
      k->param_sizes[ordinal] = (flags >> 18) & 0x3fff;
      k->param_offsets[ordinal] = offset;
    }
    return true;
  });
  if (!ok) return false;
  for (size_t s : k->param_sizes)
    if (s == 0) return false;  // an ordinal without a record
  return true;
}

// The module-wide .nv.info: registers per thread of each kernel, by the kernel's symbol index.
bool read_reg_counts(const unsigned char* p, size_t n, std::map<uint32_t, int>* regs) {
  return each_record(p, n, [regs](uint8_t attr, const unsigned char* v, uint16_t len) {
    if (attr != kAttrRegCount) return true;
    if (len < 8) return false;
    const uint32_t count = read_at<uint32_t>(v, 4);
    if (count > 255) return false;
    (*regs)[read_at<uint32_t>(v, 0)] = static_cast<int>(count);
    return true;
  });
}

// Each kernel's registers: its .text.<name> names its symbol, which the module-wide .nv.info's
// EIATTR_REGCOUNT records count registers for. A kernel with no count is a malformed cubin.
bool read_registers(const unsigned char* b, const std::vector<Section>& secs, CubinInfo* info,
                    std::string* why) {
  std::map<uint32_t, int> regs;
  for (const Section& s : secs)
    if (s.name == ".nv.info" && s.type != kNoBits &&
        !read_reg_counts(b + s.offset, s.size, &regs)) {
      *why = "malformed register counts in .nv.info";
      return false;
    }
  const std::string text_prefix = ".text.";
  for (const Section& s : secs)
    if (s.name.rfind(text_prefix, 0) == 0) {
      auto k = info->kernels.find(s.name.substr(text_prefix.size()));
      auto r = regs.find(s.info & 0xffffff);  // older cubins keep the count in the top byte
      if (k != info->kernels.end() && r != regs.end()) k->second.regs = r->second;
    }
  for (const auto& [name, k] : info->kernels)
    if (k.regs < 0) {
      *why = "no register count for " + name;
      return false;
    }
  return true;
}

}  // namespace

std::optional<CubinInfo> read_cubin(const void* image, std::string* why) {
  const auto* b = static_cast<const unsigned char*>(image);
  if (!b ||
      std::memcmp(b,
                  "\x7f"
                  "ELF",
                  4) != 0 ||
      b[4] != 2 || b[5] != 1) {
    *why = "not a 64-bit little-endian ELF image";
    return std::nullopt;
  }
  const uint64_t shoff = read_at<uint64_t>(b, 0x28);
  const uint16_t shentsize = read_at<uint16_t>(b, 0x3a), shnum = read_at<uint16_t>(b, 0x3c);
  const uint16_t shstrndx = read_at<uint16_t>(b, 0x3e);
  if (shentsize != 64 || shnum == 0 || shoff > (uint64_t{1} << 32)) {
    *why = "ELF section headers out of range";
    return std::nullopt;
  }
  CubinInfo info;
  info.image_bytes = shoff + size_t{shnum} * shentsize;
  // Sections may lie past the headers: the image ends after the last of either.
  for (uint16_t i = 0; i < shnum; ++i) {
    const size_t h = shoff + size_t{i} * shentsize;
    const uint64_t offset = read_at<uint64_t>(b, h + 24), size = read_at<uint64_t>(b, h + 32);
    if (read_at<uint32_t>(b, h + 4) != kNoBits && offset + size > info.image_bytes)
      info.image_bytes = offset + size;
  }
  const std::vector<Section> secs =
      sections(b, info.image_bytes, shoff, shentsize, shnum, shstrndx);
  if (secs.empty()) {
    *why = "ELF section headers or names out of range";
    return std::nullopt;
  }
  const std::string info_prefix = ".nv.info.", shared_prefix = ".nv.shared.";
  for (const Section& s : secs)
    if (s.name.rfind(info_prefix, 0) == 0 && s.type != kNoBits) {
      KernelInfo& k = info.kernels[s.name.substr(info_prefix.size())];
      if (!read_kernel_records(b + s.offset, s.size, &k)) {
        *why = "malformed parameter or launch-bounds records in " + s.name;
        return std::nullopt;
      }
    }
  if (!read_registers(b, secs, &info, why)) return std::nullopt;
  for (const Section& s : secs)
    if (s.name.rfind(shared_prefix, 0) == 0) {
      auto it = info.kernels.find(s.name.substr(shared_prefix.size()));
      if (it != info.kernels.end()) it->second.static_smem = s.size;
    }
  return info;
}

}  // namespace kjit_fake
