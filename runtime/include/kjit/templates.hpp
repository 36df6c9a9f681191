// The set of template headers NVRTC sees: kjit's built-ins (embedded at build time) plus any the
// host application registers. Headers reach NVRTC as in-memory files, never from disk.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kjit {

// The text of the template source file at `path`: a regular file (a FIFO or a device is refused,
// never waited on) of at most TemplateSet::kMaxTemplateFileBytes. Throws Io naming the path (and
// `name`, the header it is read for, when given) and the OS's reason; InvalidArgument for a path
// holding a NUL byte. TemplateSet::add_file and
// Python's kjit.kernel(path) read through it.
std::string read_template_file(const std::string& path, const std::string& name = "");

// A directive or operator of a template that names another file: #include, #include_next,
// #import or #embed (written with '#' or '%:'), or __has_include / __has_include_next.
struct TemplateInclude {
  std::string directive;  // "include", "include_next", "import", "embed", "__has_include", ...
  std::string target;     // the name between the quotes or brackets; empty when a macro or
                          // anything but one quoted or bracketed name follows (computed)
  bool angled = false;    // <name> rather than "name"
  int line = 0;           // 1-based, where the directive starts
};

// Every include of `text` as the preprocessor reads it: lines spliced (a backslash before LF or
// CRLF), comments removed, string, character and raw string literals and digit separators
// recognised, including those inside #if 0 and inside raw strings (conservative: never fewer than
// the compiler sees). Throws InvalidArgument naming `name` and the line for text that compilers
// read differently, rather than guess: an unterminated comment or literal, a carriage return not
// followed by a line feed, a backslash followed by blanks at a line's end, the trigraph ??/, a
// byte past ASCII outside a comment or literal. Not found: an operator spelled by token pasting
// (`P(__has_, include)`), which can test whether a file exists but not read it.
std::vector<TemplateInclude> template_includes(const std::string& text,
                                               const std::string& name = "");

// Why NVRTC could read a file from disk through `inc`, a file the cache key would not cover, or
// "" when it cannot: #include_next, #import, #embed and __has_include_next are not supported, and
// an #include or __has_include may not name an absolute path, a path through '..' or a computed
// name. TemplateSet::add refuses what this names; kjit-precompile's recorded headers too.
std::string include_disk_problem(const TemplateInclude& inc);

// template_includes(text, name), having thrown InvalidArgument (field "source", naming `name`, the
// line and include_disk_problem's reason) for the first include NVRTC could read from disk: the
// rule TemplateSet::add applies, for a caller that checks a source before it registers it.
std::vector<TemplateInclude> checked_template_includes(const std::string& text,
                                                       const std::string& name);

class TemplateSet {
 public:
  TemplateSet();  // starts with the built-in templates

  // Register (or replace) a header under `name`, e.g. "myapp/saxpy.cuh". Kernels loaded from the
  // old text stay loaded (a Kernel handle keeps running the old code), but Runtime::kernel loads
  // from the new text afterwards; the disk cache key covers the text, so a changed header never
  // hits a stale binary. Throws InvalidArgument for an empty or unsafe name, a source holding a
  // NUL byte (NVRTC would compile only the text before it), or one that could make NVRTC read a
  // file from disk, whose text the key would not cover: an #include (or __has_include) of an
  // absolute path, of a path with a '..' component or of a name a macro computes, #include_next,
  // #import, #embed, or text template_includes cannot read.
  void add(const std::string& name, std::string source);
  // Same, reading the file now (read_template_file).
  void add_file(const std::string& name, const std::string& path);
  static constexpr long long kMaxTemplateFileBytes = 16ll << 20;

  bool has(const std::string& name) const;
  // Counts add() calls: a cache of loaded kernels keyed by it never returns one built from a
  // header replaced since.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  // The generation at which `name` or a header it reaches (closure()) was last added; 0 when all
  // of them are built-ins never replaced. An add() of an unrelated header leaves it unchanged.
  // Throws NotFound for an unknown name.
  uint64_t closure_generation(const std::string& name) const;
  std::vector<std::string> names() const;

  // `name` and every header it reaches through #include among the registered ones, sorted by
  // name. Throws NotFound for an unknown name.
  std::vector<std::pair<std::string, std::string>> closure(const std::string& name) const;

  // Built-ins as embedded at build time (name, text).
  static const std::vector<std::pair<std::string, std::string>>& builtins();

 private:
  mutable std::shared_mutex mu_;
  // Reads sources_ under mu_ (shared) and visits name's closure; calls fn(name, text, gen).
  template <class Fn>
  void visit_closure(const std::string& name, Fn&& fn) const;
  // A registered header: its text and the names its #include lines reach, read once
  // (template_includes) when it is registered rather than on every closure.
  struct Header {
    std::string text;
    std::vector<std::string> includes;
  };
  static std::shared_ptr<const Header> make_header(std::string text,
                                                   const std::vector<TemplateInclude>& incs);
  std::unordered_map<std::string, std::shared_ptr<const Header>> sources_;
  std::unordered_map<std::string, uint64_t> added_at_;  // generation of each add()ed name
  std::atomic<uint64_t> generation_{0};
};

}  // namespace kjit
