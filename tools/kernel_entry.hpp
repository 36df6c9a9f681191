// Kernel entries of a manifest: a host app's own specializations, as a recording
// (kjit/record.hpp) writes them:
//   {"kernel": "app/scale.cuh:scale", "types": ["float"], "values": [3],
//    "options": [...], "headers": {"app/scale.cuh": "<sha256>", "kjit/types.cuh": "<sha256>"}}
// The headers' texts come from kjit's built-ins, the recording's bundle ("<manifest>.d/<sha256>")
// or --templates DIR, each checked against its recorded SHA-256, so that the specialization is
// compiled under exactly the cache key the app's runtime computes.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "kjit/compiler.hpp"
#include "kjit/spec.hpp"
#include "kjit/templates.hpp"

namespace kjit::tools {

// No header comes near this: a larger file in a bundle or templates folder is refused unread (the
// limit TemplateSet::add_file keeps).
constexpr size_t kMaxHeaderBytes = static_cast<size_t>(TemplateSet::kMaxTemplateFileBytes);
// An entry's closure: at most this many headers, and this many bytes of text together (a hostile
// recording could otherwise name one large text under many names).
constexpr size_t kMaxEntryHeaders = 256;
constexpr size_t kMaxEntryBytes = size_t{64} << 20;

// The rule a header text from a recording breaks, or "": every #include, as the preprocessor
// reads it (kjit::template_includes), names one of `allowed` (or a built-in) in quotes, or one of
// NVRTC's own headers in brackets (a relative name: no include path reaches the disk); nothing
// names an absolute path, a '..' or a computed name, and #include_next, #import and #embed are
// refused. NVRTC would otherwise open any path an include names, on the machine that precompiles.
std::string include_problem(const std::string& text,
                            const std::map<std::string, std::string>& allowed);

bool is_kernel_entry(const nlohmann::json& entry);  // an object with a "kernel" field

struct KernelEntry {
  kjit::Spec spec;
  std::map<std::string, std::string> headers;  // the include closure: name -> SHA-256 (hex)
};

// Throws EntryError naming the field for anything malformed: an unknown field, a kernel that is
// not "<header>:<function>", arguments that are not strings (types) or integers/booleans
// (values), options other than this kjit's (the key would differ), a header name or hash that is
// not one, or a closure without the kernel's own header.
KernelEntry parse_kernel_entry(const nlohmann::json& entry);

// Where header texts come from. Everything read is untrusted: regular files only, opened without
// following a symlink, at most kMaxHeaderBytes, and used only when its SHA-256 is the recorded one.
class HeaderSource {
 public:
  // bundles: recordings' bundle folders (those that do not exist are skipped); templates: a
  // folder holding the headers under their registered names ("" for none).
  HeaderSource(std::vector<std::string> bundles, std::string templates);
  // The text of `name` whose SHA-256 is `sha`. Throws EntryError("headers") naming the header,
  // the hash and what each place holds instead.
  const std::string& text(const std::string& name, const std::string& sha);

 private:
  std::vector<std::string> bundles_;
  std::string templates_;
  std::map<std::string, std::string> found_;  // by SHA-256: one copy of each text
};

// Compilers for kernel entries. Each holds one consistent set of header texts: an entry goes to
// the first whose texts agree with its headers (registering those it lacks), else to a new one
// (made by `make`); `base` (the op problems' compiler, built-ins only) is the first.
class KernelCompilers {
 public:
  KernelCompilers(kjit::Compiler& base, std::function<std::unique_ptr<kjit::Compiler>()> make);
  // The compiler for `e`, its headers' texts registered there. Throws EntryError.
  kjit::Compiler& place(const KernelEntry& e, HeaderSource& src);
  // Throws EntryError("headers") unless `c`'s include closure of e's header is exactly the
  // recorded one (call after every entry is placed: a header registered later may be included).
  static void check_closure(kjit::Compiler& c, const KernelEntry& e);

 private:
  struct World {
    kjit::Compiler* compiler;
    std::map<std::string, std::string> sha;  // registered: name -> SHA-256
  };
  std::vector<World> worlds_;
  std::vector<std::unique_ptr<kjit::Compiler>> owned_;
  std::function<std::unique_ptr<kjit::Compiler>()> make_;
};

}  // namespace kjit::tools
