#include "kjit/templates.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "embedded_templates.hpp"
#include "kjit/error.hpp"
#include "posix_io.hpp"

namespace kjit {

std::string read_template_file(const std::string& path, const std::string& name) {
  auto fail = [&](const std::string& why) {
    throw Error(Errc::Io, "template file '" + path + "'" +
                              (name.empty() ? "" : " for '" + name + "'") + ": " + why);
  };
  // The OS would read a path with a NUL byte as the shorter one before it: another file.
  if (const size_t nul = path.find('\0'); nul != std::string::npos)
    throw Error::invalid("path",
                         "template file path holds a NUL byte at offset " + std::to_string(nul));
  // O_NONBLOCK: a FIFO planted at the path cannot hang the open; only a regular file is read,
  // and only up to a size no header needs (a device like /dev/zero never ends).
  cache::detail::UniqueFd fd = cache::detail::open_fd(path, O_RDONLY | O_NONBLOCK);
  if (!fd.valid()) fail("cannot open it: " + cache::detail::errno_text(errno));
  std::string text;
  if (std::string why = cache::detail::read_regular_file(
          fd.get(), TemplateSet::kMaxTemplateFileBytes, "a template", &text);
      !why.empty())
    fail(why);
  return text;
}

namespace {

bool safe_header_name(const std::string& n) {
  if (n.empty() || n.size() > 200 || n.front() == '/') return false;
  if (n.find("..") != std::string::npos) return false;
  for (char c : n) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.' || c == '/';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& TemplateSet::builtins() {
  static const std::vector<std::pair<std::string, std::string>> b = [] {
    std::vector<std::pair<std::string, std::string>> v;
    for (size_t i = 0; i < detail::kEmbeddedTemplateCount; ++i)
      v.emplace_back(detail::kEmbeddedTemplates[i].name, detail::kEmbeddedTemplates[i].text);
    return v;
  }();
  return b;
}

std::shared_ptr<const TemplateSet::Header> TemplateSet::make_header(
    std::string text, const std::vector<TemplateInclude>& incs) {
  auto h = std::make_shared<Header>();
  h->text = std::move(text);
  for (const TemplateInclude& inc : incs)
    if (inc.directive == "include" && !inc.target.empty()) h->includes.push_back(inc.target);
  return h;
}

TemplateSet::TemplateSet() {
  // The built-ins are read once per process, not once per TemplateSet.
  static const auto headers = [] {
    std::vector<std::pair<std::string, std::shared_ptr<const Header>>> v;
    for (const auto& [name, text] : builtins())
      v.emplace_back(name, make_header(text, template_includes(text, name)));
    return v;
  }();
  for (const auto& [name, h] : headers) sources_[name] = h;
}

void TemplateSet::add(const std::string& name, std::string source) {
  if (!safe_header_name(name))
    throw Error(Errc::InvalidArgument,
                "template name '" + name +
                    "' is not allowed: use a relative path of letters, digits, '_', '-', '.', '/' "
                    "(no '..', at most 200 characters)");
  // NVRTC reads a C string: it would compile the text before a NUL while the cache key hashes
  // all of it.
  if (const size_t nul = source.find('\0'); nul != std::string::npos)
    throw Error::invalid("source", "template '" + name + "' holds a NUL byte at offset " +
                                       std::to_string(nul) + ": a source is text");
  const std::vector<TemplateInclude> incs = checked_template_includes(source, name);
  auto header = make_header(std::move(source), incs);
  std::unique_lock lock(mu_);
  sources_[name] = std::move(header);
  added_at_[name] = generation_.fetch_add(1, std::memory_order_acq_rel) + 1;
}

void TemplateSet::add_file(const std::string& name, const std::string& path) {
  add(name, read_template_file(path, name));
}

bool TemplateSet::has(const std::string& name) const {
  std::shared_lock lock(mu_);
  return sources_.count(name) != 0;
}

std::vector<std::string> TemplateSet::names() const {
  std::shared_lock lock(mu_);
  std::vector<std::string> v;
  for (const auto& kv : sources_) v.push_back(kv.first);
  std::sort(v.begin(), v.end());
  return v;
}

template <class Fn>
void TemplateSet::visit_closure(const std::string& name, Fn&& fn) const {
  std::shared_lock lock(mu_);
  if (!sources_.count(name))
    throw Error(Errc::NotFound, "unknown template '" + name + "' (register it with add())");
  std::set<std::string> seen;
  std::vector<std::string> todo{name};
  while (!todo.empty()) {
    std::string n = todo.back();
    todo.pop_back();
    auto it = sources_.find(n);
    if (it == sources_.end() || !seen.insert(n).second) continue;  // NVRTC reports missing ones
    for (const std::string& inc : it->second->includes) todo.push_back(inc);
  }
  for (const auto& n : seen) {
    auto at = added_at_.find(n);
    fn(n, sources_.at(n)->text, at == added_at_.end() ? uint64_t{0} : at->second);
  }
}

std::vector<std::pair<std::string, std::string>> TemplateSet::closure(
    const std::string& name) const {
  std::vector<std::pair<std::string, std::string>> out;
  visit_closure(name, [&](const std::string& n, const std::string& text, uint64_t) {
    out.emplace_back(n, text);
  });
  return out;
}

uint64_t TemplateSet::closure_generation(const std::string& name) const {
  uint64_t g = 0;
  visit_closure(name,
                [&](const std::string&, const std::string&, uint64_t at) { g = std::max(g, at); });
  return g;
}

}  // namespace kjit
