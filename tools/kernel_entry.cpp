#include "kernel_entry.hpp"

#include <fcntl.h>

#include <cctype>
#include <cerrno>
#include <cstdint>

#include "kjit/error.hpp"
#include "kjit/record.hpp"
#include "kjit/templates.hpp"
#include "manifest.hpp"
#include "posix_io.hpp"
#include "tool_util.hpp"

namespace kjit::tools {
namespace {

using nlohmann::json;

// A registered header name (TemplateSet's rule) that is also a safe relative path below a
// folder: no empty, "." or ".." component, no leading '/'.
bool header_name_ok(const std::string& n) {
  if (n.empty() || n.size() > 200 || n.front() == '/' || n.back() == '/' ||
      n.find("..") != std::string::npos)  // TemplateSet::add refuses any ".."
    return false;
  for (char c : n)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.' &&
        c != '/')
      return false;
  size_t pos = 0;
  for (;;) {
    const size_t slash = n.find('/', pos);
    const std::string part = n.substr(pos, slash == std::string::npos ? slash : slash - pos);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string::npos) return true;
    pos = slash + 1;
  }
}

bool sha_ok(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// One template argument of "args", "types" or "values" added to `spec`; `field` names it.
void add_arg(kjit::Spec& spec, const json& a, const std::string& field, bool type_ok,
             bool value_ok) {
  try {
    if (a.is_string() && type_ok) {
      spec.type(a.get<std::string>());
    } else if (a.is_boolean() && value_ok) {
      spec.value(a.get<bool>());
    } else if (a.is_number_integer() && value_ok &&
               !(a.is_number_unsigned() && a.get<uint64_t>() > INT64_MAX)) {
      spec.value(a.get<int64_t>());
    } else {
      throw EntryError(field,
                       std::string("must hold ") +
                           (type_ok && value_ok ? "type names (strings), integers or booleans"
                            : type_ok           ? "type names (strings)"
                                                : "integers (-2^63+1 .. 2^63-1) or booleans") +
                           ", got " + shown(a));
    }
  } catch (const kjit::Error& e) {
    throw EntryError(field, e.what());
  }
}

const json& array_field(const json& entry, const char* field) {
  const json& v = entry.at(field);
  if (!v.is_array()) throw EntryError(field, "must be an array, got " + shown(v));
  return v;
}

kjit::Spec spec_of(const json& entry) {
  const json& k = entry.at("kernel");
  const std::string text = k.is_string() ? k.get<std::string>() : std::string();
  const size_t colon = text.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    throw EntryError(
        "kernel",
        "must be \"<header>:<function>\" (e.g. \"app/scale.cuh:scale\"), got " + shown(k));
  const std::string header = text.substr(0, colon);
  if (!header_name_ok(header))
    throw EntryError("kernel", "header '" + header + "' is not a registered template name");
  try {
    kjit::Spec spec(header, text.substr(colon + 1));
    if (entry.contains("args")) {
      if (entry.contains("types") || entry.contains("values"))
        throw EntryError("args", "give \"args\" (in order) or \"types\" and \"values\", not both");
      for (const json& a : array_field(entry, "args")) add_arg(spec, a, "args", true, true);
    } else {
      if (entry.contains("types"))
        for (const json& a : array_field(entry, "types")) add_arg(spec, a, "types", true, false);
      if (entry.contains("values"))
        for (const json& a : array_field(entry, "values")) add_arg(spec, a, "values", false, true);
    }
    return spec;
  } catch (const kjit::Error& e) {
    throw EntryError("kernel", e.what());
  }
}

void check_options(const json& entry) {
  if (!entry.contains("options")) return;
  std::vector<std::string> got;
  for (const json& o : array_field(entry, "options")) {
    if (!o.is_string()) throw EntryError("options", "must hold strings, got " + shown(o));
    got.push_back(o.get<std::string>());
  }
  if (got != kjit::Compiler::options())
    throw EntryError("options", "recorded with NVRTC options " + shown(json(got)) +
                                    ", but this kjit compiles with " +
                                    shown(json(kjit::Compiler::options())) +
                                    ": its cache key would differ (record with this kjit build)");
}

// The regular file `rel` below the folder `root`, every component opened with O_NOFOLLOW.
// Empty optional with *why set otherwise.
// *missing: the name (or a folder on its way) does not exist, which is no error in a bundle.
std::optional<std::string> read_below(const std::string& root, const std::string& rel,
                                      std::string* why, bool* missing) {
  using cache::detail::UniqueFd;
  *missing = false;
  const std::string path = root + "/" + rel;
  UniqueFd dir = cache::detail::open_fd(root, O_RDONLY | O_DIRECTORY);
  if (!dir.valid()) {
    *missing = errno == ENOENT;
    *why = root + ": " + cache::detail::errno_text(errno);
    return std::nullopt;
  }
  size_t pos = 0;
  for (size_t slash; (slash = rel.find('/', pos)) != std::string::npos; pos = slash + 1) {
    UniqueFd sub(::openat(dir.get(), rel.substr(pos, slash - pos).c_str(),
                          O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sub.valid()) {
      const int err = errno;
      *missing = err == ENOENT;
      *why =
          path + ": " +
          (err == ELOOP || err == ENOTDIR ? "a folder on the way is a symbolic link or not a folder"
                                          : cache::detail::errno_text(err));
      return std::nullopt;
    }
    dir = std::move(sub);
  }
  const UniqueFd fd(
      ::openat(dir.get(), rel.substr(pos).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    const int err = errno;
    *missing = err == ENOENT;
    *why = path + ": " +
           (err == ELOOP ? "is a symbolic link (never followed)" : cache::detail::errno_text(err));
    return std::nullopt;
  }
  std::string text;
  if (std::string bad =
          cache::detail::read_regular_file(fd.get(), kMaxHeaderBytes, "a template", &text);
      !bad.empty()) {
    *why = path + ": " + bad;
    return std::nullopt;
  }
  return text;
}

const std::string* builtin_text(const std::string& name) {
  for (const auto& [n, t] : kjit::TemplateSet::builtins())
    if (n == name) return &t;
  return nullptr;
}

}  // namespace

bool is_kernel_entry(const json& entry) {
  return entry.is_object() && entry.contains("kernel");
}

KernelEntry parse_kernel_entry(const json& entry) {
  check_marks(entry);
  for (auto it = entry.begin(); it != entry.end(); ++it)
    if (it.key() != "kernel" && it.key() != "types" && it.key() != "values" && it.key() != "args" &&
        it.key() != "options" && it.key() != "headers")
      throw EntryError(it.key(),
                       "unknown field of a kernel entry (known: kernel, types, values, "
                       "args, options, headers)");
  KernelEntry e{spec_of(entry), {}};
  check_options(entry);
  if (!entry.contains("headers") || !entry.at("headers").is_object())
    throw EntryError("headers",
                     "must be an object {\"<header>\": \"<sha256>\", ...}: the kernel's "
                     "include closure as recorded");
  for (auto it = entry.at("headers").begin(); it != entry.at("headers").end(); ++it) {
    if (!header_name_ok(it.key()))
      throw EntryError("headers", "'" + it.key() + "' is not a registered template name");
    if (!it.value().is_string() || !sha_ok(it.value().get<std::string>()))
      throw EntryError("headers", "header '" + it.key() + "': " + shown(it.value()) +
                                      " is not a SHA-256 (64 lower-case hex digits)");
    e.headers.emplace(it.key(), it.value().get<std::string>());
  }
  if (!e.headers.count(e.spec.header()))
    throw EntryError("headers", "the kernel's own header '" + e.spec.header() + "' is not listed");
  return e;
}

HeaderSource::HeaderSource(std::vector<std::string> bundles, std::string templates)
    : bundles_(std::move(bundles)), templates_(std::move(templates)) {}

const std::string& HeaderSource::text(const std::string& name, const std::string& sha) {
  const std::string& key = sha;
  if (auto it = found_.find(key); it != found_.end()) return it->second;
  std::string tried;  // what each place holds instead, for the error
  auto take = [&](std::optional<std::string> t, const std::string& where) -> bool {
    if (!t) return false;
    const std::string got = kjit::header_sha256(*t);
    if (got == sha) {
      found_.emplace(key, std::move(*t));
      return true;
    }
    tried += "; " + where + " has sha256 " + got;
    return false;
  };
  if (const std::string* b = builtin_text(name); b && take(*b, "kjit's built-in"))
    return found_.at(key);
  for (const std::string& dir : bundles_) {
    std::string why;
    bool missing = false;
    if (take(read_below(dir, sha, &why, &missing), dir + "/" + sha)) return found_.at(key);
    if (!why.empty() && !missing) tried += "; " + why;
  }
  if (!templates_.empty()) {
    std::string why;
    bool missing = false;
    if (take(read_below(templates_, name, &why, &missing), templates_ + "/" + name))
      return found_.at(key);
    if (!why.empty()) tried += "; " + why;
  }
  throw EntryError("headers",
                   "header '" + name + "': no text with the recorded sha256 " + sha +
                       (tried.empty() ? std::string(" (not a built-in, in no bundle") +
                                            (templates_.empty() ? ", and no --templates" : "") + ")"
                                      : tried) +
                       ": the header changed since the recording, or its text is missing (give "
                       "the recording's bundle, <manifest>.d, or --templates DIR with the text "
                       "the app ran)");
}

KernelCompilers::KernelCompilers(kjit::Compiler& base,
                                 std::function<std::unique_ptr<kjit::Compiler>()> make)
    : make_(std::move(make)) {
  worlds_.push_back(World{&base, {}});
}

kjit::Compiler& KernelCompilers::place(const KernelEntry& e, HeaderSource& src) {
  if (e.headers.size() > kMaxEntryHeaders)
    throw EntryError("headers", std::to_string(e.headers.size()) + " headers, more than " +
                                    std::to_string(kMaxEntryHeaders));
  std::map<std::string, const std::string*> texts;
  size_t bytes = 0;
  for (const auto& [name, sha] : e.headers) {
    texts[name] = &src.text(name, sha);
    if ((bytes += texts[name]->size()) > kMaxEntryBytes)
      throw EntryError("headers", "the headers hold more than " +
                                      std::to_string(kMaxEntryBytes >> 20) + " MiB of text");
    if (const std::string* b = builtin_text(name); b && *b == *texts[name])
      continue;  // kjit's own, as embedded
    if (std::string p = include_problem(*texts[name], e.headers); !p.empty())
      throw EntryError("headers", "header '" + name + "': " + p);
  }
  // A world agrees when each header is either registered there with this hash, or not
  // registered and (if a built-in) the built-in has this hash.
  auto agrees = [&](const World& w) {
    for (const auto& [name, sha] : e.headers) {
      if (auto it = w.sha.find(name); it != w.sha.end()) {
        if (it->second != sha) return false;
      } else if (const std::string* b = builtin_text(name); b && kjit::header_sha256(*b) != sha) {
        return false;
      }
    }
    return true;
  };
  World* w = nullptr;
  for (World& cand : worlds_)
    if (agrees(cand)) {
      w = &cand;
      break;
    }
  if (!w) {
    owned_.push_back(make_());
    worlds_.push_back(World{owned_.back().get(), {}});
    w = &worlds_.back();
  }
  for (const auto& [name, sha] : e.headers) {
    if (w->sha.count(name)) continue;
    const std::string* b = builtin_text(name);
    if (b && kjit::header_sha256(*b) == sha) continue;  // already there
    w->compiler->templates().add(name, *texts.at(name));
    w->sha.emplace(name, sha);
  }
  return *w->compiler;
}

std::string include_problem(const std::string& text,
                            const std::map<std::string, std::string>& allowed) {
  std::vector<kjit::TemplateInclude> incs;
  try {
    incs = kjit::template_includes(text);
  } catch (const Error& e) {
    return e.what();
  }
  for (const kjit::TemplateInclude& inc : incs) {
    const std::string at = " (line " + std::to_string(inc.line) + ")";
    if (std::string why = kjit::include_disk_problem(inc); !why.empty()) return why + at;
    // <name>: NVRTC's own headers (no include path reaches the disk); "name": a recorded one.
    if (inc.directive == "include" && !inc.angled && !allowed.count(inc.target) &&
        !builtin_text(inc.target))
      return "it includes \"" + inc.target + "\"" + at +
             ", which is not a header of this recording";
  }
  return "";
}

void KernelCompilers::check_closure(kjit::Compiler& c, const KernelEntry& e) {
  std::map<std::string, std::string> got;
  for (const auto& [name, text] : c.templates().closure(e.spec.header()))
    got.emplace(name, kjit::header_sha256(text));
  for (const auto& [name, sha] : got)
    if (!e.headers.count(name))
      throw EntryError("headers", "header '" + name + "' is included by " + e.spec.header() +
                                      " but not recorded: the recording is not this kernel's "
                                      "closure");
  for (const auto& [name, sha] : e.headers)
    if (got.count(name) && got.at(name) != sha)
      throw EntryError("headers", "header '" + name + "' has sha256 " + got.at(name) +
                                      " here, not the recorded " + sha);
  for (const auto& [name, sha] : e.headers)
    if (!got.count(name))
      throw EntryError("headers", "recorded header '" + name + "' is not included by " +
                                      e.spec.header() + " (directly or not)");
}

}  // namespace kjit::tools
