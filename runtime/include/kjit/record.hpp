// Recording what a run compiles (KJIT_RECORD=path, RuntimeOptions::record), so that
// kjit-precompile can compile the same specializations ahead of time, for every target arch, on
// a machine without a GPU (docs/TOOLS.md, "Deploying an app's kernels").
//
// A recording is a manifest in JSON Lines: one complete JSON object per line, appended once per
// distinct specialization. A built-in op's plan adds its problem ({"op": "group_norm", ...}),
// from which kjit-precompile derives the specs for any arch through the op's specs_for; any other
// kernel adds a kernel entry: its template, function, template arguments, compile options and
// the SHA-256 of every header in its include closure. Headers that are not kjit's own built-ins
// are copied, content-addressed, into a bundle folder beside the recording ("<path>.d/<sha256>"),
// so that a build machine without the app's sources reproduces the exact cache key.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kjit/spec.hpp"

namespace kjit {

class TemplateSet;

struct RecorderStats {
  uint64_t lines = 0;         // lines this recorder appended
  uint64_t write_errors = 0;  // appends or bundle copies that failed (the first one is printed)
};

class Recorder {
 public:
  // Opens (or creates, mode 0600) the recording at `path` for appending. The file is opened
  // without following a symlink and must be a regular file owned by this user (or root) and
  // writable by no one else; so must every folder above it, except that a sticky folder (/tmp) is
  // fine. Throws Error(Io) naming the path and the reason otherwise: a recording asked for and
  // silently missing would make every deployment compile at first use. Lines already in the file
  // are not appended again.
  explicit Recorder(const std::string& path);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // A kernel entry for `spec` compiled from `closure` (its header's include closure, as
  // TemplateSet::closure gives it: the texts the cache key covers). Appended once.
  void kernel(const Spec& spec, const std::vector<std::pair<std::string, std::string>>& closure);
  // The same with the closure as `templates` holds it now.
  void kernel(const Spec& spec, const TemplateSet& templates);
  // An op problem: a manifest problem object ({"op": "<name>", <fields>}) as one line of JSON
  // text. Appended once. Throws InvalidArgument for text that is not one JSON object on a line.
  void problem(const std::string& json_object);

  const std::string& path() const;
  std::string bundle_dir() const;  // path() + ".d"
  RecorderStats stats() const;

  // The kernel entry line for `spec` (no newline), as kernel() appends it: for tools and tests.
  static std::string kernel_line(const Spec& spec,
                                 const std::vector<std::pair<std::string, std::string>>& closure);
  // True while this thread builds an op's plan whose problem was recorded (op::record_problem):
  // the kernels it loads meanwhile are the op's, derived again from the problem, so they are not
  // recorded as kernel entries.
  static bool in_op_build();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The SHA-256 of a header's text as a recording names it: 64 lower-case hex digits.
std::string header_sha256(const std::string& text);

}  // namespace kjit
