// Recorder: appends one JSON line per distinct specialization to a recording (kjit/record.hpp),
// safely from many threads and processes, and copies the app's headers into a content-addressed
// bundle beside it. Opened with the cache's trust rules (cache/src/trust.hpp, folder.hpp).
#include "kjit/record.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "cache_dir.hpp"
#include "folder.hpp"
#include "json_text.hpp"
#include "kjit/cache/key.hpp"
#include "kjit/compiler.hpp"
#include "kjit/error.hpp"
#include "kjit/op/record.hpp"
#include "kjit/runtime.hpp"
#include "kjit/templates.hpp"
#include "posix_io.hpp"
#include "trust.hpp"

namespace kjit {
namespace {

using cache::detail::errno_text;
using cache::detail::Folder;
using cache::detail::OpenStatus;
using cache::detail::Trust;
using cache::detail::UniqueFd;
using Closure = std::vector<std::pair<std::string, std::string>>;

thread_local int t_op_builds = 0;  // ProblemScopes alive on this thread

// Lines already in a recording are read at open so that a rerun appends nothing new; a larger
// file (which no real app produces) is only appended to.
constexpr off_t kMaxExistingBytes = off_t{64} << 20;

// A template argument Spec::value wrote: an integer (with "ll" past 32 bits) or true/false, as
// its JSON text; nullopt for a type.
bool value_json(const std::string& arg, std::string* json) {
  if (arg == "true" || arg == "false") {
    *json = arg;
    return true;
  }
  std::string digits = arg;
  if (digits.size() > 2 && digits.compare(digits.size() - 2, 2, "ll") == 0)
    digits.resize(digits.size() - 2);
  const size_t first = !digits.empty() && digits[0] == '-' ? 1 : 0;
  if (digits.size() == first || digits.size() > first + 19) return false;
  for (size_t i = first; i < digits.size(); ++i)
    if (digits[i] < '0' || digits[i] > '9') return false;
  *json = digits;
  return true;
}

std::string json_array(const std::vector<std::string>& json_items) {
  std::string s = "[";
  for (size_t i = 0; i < json_items.size(); ++i) s += (i ? "," : "") + json_items[i];
  return s + "]";
}

// The template arguments in the recording's form: "types" then "values" when every type comes
// before every value (scale<float, 3>), else "args" in order (tile<4, float>).
void add_args(const Spec& spec, detail::JsonObject* o) {
  std::vector<std::string> types, values, all;
  bool ordered = true;
  for (const std::string& a : spec.args()) {
    std::string v;
    if (value_json(a, &v)) {
      values.push_back(v);
      all.push_back(v);
    } else {
      ordered = ordered && values.empty();
      types.push_back(detail::json_quote(a));
      all.push_back(types.back());
    }
  }
  if (ordered)
    o->raw("types", json_array(types)).raw("values", json_array(values));
  else
    o->raw("args", json_array(all));
}

std::string kernel_line_of(const Spec& spec, const Closure& closure,
                           const std::vector<std::string>& shas) {
  detail::JsonObject o;
  o.add("kernel", spec.header() + ":" + spec.function());
  add_args(spec, &o);
  std::vector<std::string> opts;
  for (const std::string& s : Compiler::options()) opts.push_back(detail::json_quote(s));
  o.raw("options", json_array(opts));
  detail::JsonObject headers;
  for (size_t i = 0; i < closure.size(); ++i) headers.add(closure[i].first, shas[i]);
  o.raw("headers", headers.text());
  return o.text();
}

// kjit's built-in header of that name and text: the tools have it, no copy is needed.
bool is_builtin(const std::string& name, const std::string& text) {
  static const std::unordered_map<std::string, const std::string*> builtins = [] {
    std::unordered_map<std::string, const std::string*> m;
    for (const auto& [n, t] : TemplateSet::builtins()) m.emplace(n, &t);
    return m;
  }();
  const auto it = builtins.find(name);
  return it != builtins.end() && *it->second == text;
}

// `dir` and every folder above it: owned by this user or root, and writable by no one else
// unless sticky (/tmp): there others cannot rename or remove the recording, and a file they made
// at its name is refused as theirs.
std::string folder_chain_problem(const Trust& trust, std::string p) {
  for (;;) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) return p + ": " + errno_text(errno);
    if (S_ISLNK(st.st_mode)) return p + " is a symbolic link (swapped in after it was resolved)";
    struct stat as_checked = st;
    if (st.st_mode & S_ISVTX) as_checked.st_mode &= ~static_cast<mode_t>(S_IWGRP | S_IWOTH);
    if (std::string why = trust.folder_problem(as_checked); !why.empty()) return p + " " + why;
    if (p == "/") return {};
    const size_t slash = p.find_last_of('/');
    p = slash == 0 ? "/" : p.substr(0, slash);
  }
}

}  // namespace

struct Recorder::Impl {
  std::string path, name;
  Trust trust;
  Folder folder;  // the recording's folder
  UniqueFd fd;    // the recording, O_APPEND
  Folder bundle;  // <name>.d, made at the first header to copy
  mutable std::mutex mu;
  std::unordered_set<std::string> seen;     // lines in the file
  std::unordered_set<std::string> bundled;  // sha256 of the headers in the bundle
  RecorderStats stats;
  bool warned = false;

  [[noreturn]] void refuse(const std::string& why) const {
    throw Error(Errc::Io, "cannot record to '" + path + "' (KJIT_RECORD): " + why);
  }
  void open();
  void read_existing();
  void fail(const std::string& why);
  void append(const std::string& line);
  // Whether the bundle holds the header afterwards (false: the failure is counted and printed).
  bool copy_header(const std::string& name, const std::string& text, const std::string& sha);
};

void Recorder::Impl::open() {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") refuse("it names a folder, not a file");
  std::string why;
  bool untrusted = false;
  const std::string root = cache::detail::resolve_path(dir, trust, &why, &untrusted);
  if (root.empty()) refuse(why);
  if (std::string p = folder_chain_problem(trust, root); !p.empty()) refuse(p);
  if (Folder::open(root, false, nullptr, &folder, &why) != OpenStatus::Ok) refuse(why);
  // O_NOFOLLOW (open_file): a link planted at the name is refused, never written through.
  fd = folder.open_file(name, O_RDWR | O_APPEND | O_CREAT | O_EXCL, 0600);
  const bool created = fd.valid();
  if (!created && errno == EEXIST) fd = folder.open_file(name, O_RDWR | O_APPEND);
  if (!fd.valid()) {
    const int err = errno;
    refuse(folder.path_of(name) + ": " +
           (err == ELOOP ? "is a symbolic link (a recording is never opened through one)"
                         : errno_text(err)));
  }
  if (created && ::fchmod(fd.get(), 0600) != 0) refuse(path + ": " + errno_text(errno));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) refuse(errno_text(errno));
  if (std::string p = trust.file_problem(st); !p.empty()) refuse(folder.path_of(name) + " " + p);
  read_existing();
}

void Recorder::Impl::read_existing() {
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || st.st_size == 0 || st.st_size > kMaxExistingBytes) return;
  std::string text(static_cast<size_t>(st.st_size), '\0');
  ssize_t n;
  do {
    n = ::pread(fd.get(), text.data(), text.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return;
  text.resize(static_cast<size_t>(n));
  for (size_t pos = 0, nl; (nl = text.find('\n', pos)) != std::string::npos; pos = nl + 1)
    seen.insert(text.substr(pos, nl - pos));  // a torn last line (no newline) is not a line
}

void Recorder::Impl::fail(const std::string& why) {
  ++stats.write_errors;
  if (warned) return;
  warned = true;
  cache::detail::warn("recording " + path + ": " + why + " (later errors are not printed)");
}

void Recorder::Impl::append(const std::string& line) {
  if (!seen.insert(line).second) return;
  std::string out = line + "\n";
  // flock orders appends between processes (threads of this one hold `mu`); one writer at a time
  // also keeps a line whole where a filesystem splits a large O_APPEND write.
  int r;
  do {
    r = ::flock(fd.get(), LOCK_EX);
  } while (r != 0 && errno == EINTR);
  if (r != 0) {
    seen.erase(line);
    fail("cannot lock it: " + errno_text(errno));
    return;
  }
  // A writer killed mid-line left a torn line: end it, so that this line stays whole.
  struct stat st;
  char last = '\n';
  if (::fstat(fd.get(), &st) == 0 && st.st_size > 0 &&
      ::pread(fd.get(), &last, 1, st.st_size - 1) == 1 && last != '\n')
    out.insert(0, "\n");
  const int err = cache::detail::write_all(fd.get(), out);
  ::flock(fd.get(), LOCK_UN);
  if (err != 0) {
    seen.erase(line);
    fail("cannot append to it: " + errno_text(err));
    return;
  }
  ++stats.lines;
}

bool Recorder::Impl::copy_header(const std::string& hname, const std::string& text,
                                 const std::string& sha) {
  if (is_builtin(hname, text) || !bundled.insert(sha).second) return true;
  std::string why;
  if (!bundle.valid() && folder.sub(name + ".d", true, &trust, &bundle, &why) != OpenStatus::Ok) {
    bundled.erase(sha);
    fail("cannot make the bundle folder: " + why);
    return false;
  }
  struct stat st;
  if (::fstatat(bundle.fd(), sha.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
      static_cast<size_t>(st.st_size) == text.size())
    return true;  // another process copied it (the tools check every copy's hash)
  static std::atomic<uint64_t> counter{0};
  const std::string tmp =
      sha + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  UniqueFd f = bundle.create_file(tmp, trust);
  int err = f.valid() ? cache::detail::write_all(f.get(), text) : errno;
  if (err == 0) err = f.close_checked();
  if (err == 0) err = bundle.rename(tmp, sha);
  if (err != 0) {
    bundle.remove_file(tmp);
    bundled.erase(sha);
    fail("cannot copy header " + hname + " to " + bundle.path_of(sha) + ": " + errno_text(err));
    return false;
  }
  return true;
}

Recorder::Recorder(const std::string& path) : impl_(std::make_unique<Impl>()) {
  if (path.empty()) throw Error::invalid("record", "the recording's path is empty");
  impl_->path = path;
  impl_->open();
}

Recorder::~Recorder() = default;

std::string header_sha256(const std::string& text) {
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  for (uint8_t b : cache::sha256(text)) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::string Recorder::kernel_line(const Spec& spec, const Closure& closure) {
  std::vector<std::string> shas;
  for (const auto& h : closure) shas.push_back(header_sha256(h.second));
  return kernel_line_of(spec, closure, shas);
}

void Recorder::kernel(const Spec& spec, const Closure& closure) {
  std::vector<std::string> shas;
  for (const auto& h : closure) shas.push_back(header_sha256(h.second));
  const std::string line = kernel_line_of(spec, closure, shas);
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->seen.count(line)) return;
  // Copies first: a line in the file can always find its headers in the bundle. A copy that
  // failed leaves the line out (and unseen), so that a later load, or process, records it whole.
  bool copied = true;
  for (size_t i = 0; i < closure.size(); ++i)
    copied &= impl_->copy_header(closure[i].first, closure[i].second, shas[i]);
  if (copied) impl_->append(line);
}

void Recorder::kernel(const Spec& spec, const TemplateSet& templates) {
  kernel(spec, templates.closure(spec.header()));
}

void Recorder::problem(const std::string& json_object) {
  if (json_object.size() < 2 || json_object.front() != '{' || json_object.back() != '}' ||
      json_object.find_first_of("\r\n") != std::string::npos)
    throw Error::invalid(
        "problem",
        "a recorded problem must be one JSON object on one line, got '" + json_object + "'");
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->append(json_object);
}

const std::string& Recorder::path() const {
  return impl_->path;
}

std::string Recorder::bundle_dir() const {
  return impl_->path + ".d";
}

RecorderStats Recorder::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

bool Recorder::in_op_build() {
  return t_op_builds > 0;
}

namespace op {

ProblemScope::ProblemScope(bool active) : active_(active) {
  if (active_) ++t_op_builds;
}

ProblemScope::~ProblemScope() {
  if (active_) --t_op_builds;
}

bool recording(Runtime& rt) {
  return rt.compiler().recorder() != nullptr;
}

ProblemScope record_problem(Runtime& rt, const std::function<std::string()>& problem_json,
                            bool aligned, bool autotune) {
  Recorder* r = rt.compiler().recorder();
  if (!r) return ProblemScope(false);
  // A forced config (empty text) or a text that is no one-line JSON object: the op's kernels are
  // recorded as kernel entries instead. Recording never fails the op.
  std::string text = problem_json();
  if (text.size() < 3 || text.front() != '{' || text.back() != '}' ||
      text.find_first_of("\r\n") != std::string::npos)
    return ProblemScope(false);
  // The variant switches, as fields of the entry (the tools take them off before the op parses).
  text.pop_back();
  if (!aligned) text += ",\"aligned\":false";
  if (autotune) text += ",\"autotune\":true";
  try {
    r->problem(text + "}");
  } catch (const Error&) {
    return ProblemScope(false);  // counted by the Recorder; the kernels are recorded one by one
  }
  return ProblemScope(true);
}

}  // namespace op

}  // namespace kjit
