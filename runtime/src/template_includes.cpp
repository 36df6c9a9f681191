// kjit::template_includes: what a template includes, read as the preprocessor reads it. The disk
// cache key covers only registered headers, and a recording's replay may compile only the headers
// it recorded: a scan that skipped a line the compiler sees as a directive would let NVRTC read a
// file from disk. So every construct that spans lines (splices, block comments, raw strings) is
// recognised exactly as C++17 defines it, and text compilers disagree on is refused.
#include <cctype>
#include <string>
#include <vector>

#include "kjit/error.hpp"
#include "kjit/templates.hpp"

namespace kjit {
namespace {

// Bytes of an identifier or pp-number. (Bytes past ASCII are refused outside comments and
// literals: NVRTC reads none as part of an identifier, so `éR"(` opens a raw string there.)
bool ident_byte(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

class Scan {
 public:
  Scan(const std::string& text, const std::string& name) : name_(name) { splice(text); }

  std::vector<TemplateInclude> includes() {
    strip();
    std::vector<TemplateInclude> out;
    for (size_t pos = 0; pos < code_.size();) {
      size_t eol = code_.find('\n', pos);
      if (eol == std::string::npos) eol = code_.size();
      directive(pos, eol, &out);
      has_include(pos, eol, &out);
      pos = eol + 1;
    }
    return out;
  }

 private:
  [[noreturn]] void unclear(int line, const std::string& why) const {
    throw Error::invalid("source", "template" +
                                       (name_.empty() ? std::string() : " '" + name_ + "'") +
                                       ", line " + std::to_string(line) + ": " + why +
                                       " (kjit reads a template's includes as the compiler does, "
                                       "and refuses text compilers read differently)");
  }

  // Phases 1-2: CRLF read as LF, backslash-newline splices removed; line_[k] is where kept byte k
  // stood.
  void splice(const std::string& in) {
    int line = 1;
    for (size_t i = 0; i < in.size(); ++i) {
      const char c = in[i];
      if (c == '\r') {
        if (i + 1 < in.size() && in[i + 1] == '\n') continue;
        unclear(line, "a carriage return not followed by a line feed");
      }
      if (c == '?' && in.compare(i, 3, "?\?/") == 0) unclear(line, "the trigraph ?\?/");
      if (c == '\\') {
        size_t k = i + 1;
        while (k < in.size() && (in[k] == ' ' || in[k] == '\t' || in[k] == '\f' || in[k] == '\v'))
          ++k;
        const bool crlf = in.compare(k, 2, "\r\n") == 0;
        if (k < in.size() && (in[k] == '\n' || crlf)) {
          if (k != i + 1) unclear(line, "a backslash followed by blanks at the end of the line");
          i = crlf ? k + 1 : k;
          ++line;
          continue;
        }
      }
      text_ += c;
      line_.push_back(line);
      if (c == '\n') ++line;
    }
  }

  int line_at(size_t k) const { return line_.empty() ? 1 : line_[std::min(k, line_.size() - 1)]; }
  int code_line(size_t k) const {
    return code_line_.empty() ? 1 : code_line_[std::min(k, code_line_.size() - 1)];
  }
  // Appends text_[from, from + n) to code_ (or one char standing for text_[at]), with its lines.
  void put(size_t from, size_t n) {
    for (size_t k = 0; k < n; ++k) {
      code_ += text_[from + k];
      code_line_.push_back(line_at(from + k));
    }
  }
  void put_char(char c, size_t at) {
    code_ += c;
    code_line_.push_back(line_at(at));
  }

  // Phase 3: a comment becomes one space, even one spanning lines (`#/*` newline `*/include` is
  // an #include), literals are kept as written.
  void strip() {
    const std::string& t = text_;
    for (size_t i = 0; i < t.size();) {
      if (t.compare(i, 2, "//") == 0) {
        put_char(' ', i);
        while (i < t.size() && t[i] != '\n') ++i;
      } else if (t.compare(i, 2, "/*") == 0) {
        const size_t end = t.find("*/", i + 2);
        if (end == std::string::npos) unclear(line_at(i), "an unterminated comment");
        put_char(' ', i);
        i = end + 2;
      } else if (static_cast<unsigned char>(t[i]) >= 0x80) {
        unclear(line_at(i), "a byte past ASCII outside a comment or literal");
      } else if (ident_byte(t[i])) {
        i = word(i);
      } else if (t[i] == '"' || t[i] == '\'') {
        i = quoted(i);
      } else {
        put(i++, 1);
      }
    }
  }

  // An identifier or a pp-number from i (digit separators and exponent signs included), then a
  // raw string if the identifier is exactly one of C++17's raw string prefixes.
  size_t word(size_t i) {
    const std::string& t = text_;
    const bool number = std::isdigit(static_cast<unsigned char>(t[i])) != 0;
    size_t k = i;
    while (k < t.size()) {
      if (ident_byte(t[k]) || (number && t[k] == '.')) {
        ++k;
      } else if (number && t[k] == '\'' && k + 1 < t.size() && ident_byte(t[k + 1])) {
        k += 2;
      } else if (number && (t[k] == '+' || t[k] == '-') &&
                 (t[k - 1] == 'e' || t[k - 1] == 'E' || t[k - 1] == 'p' || t[k - 1] == 'P')) {
        ++k;
      } else {
        break;
      }
    }
    const std::string w = t.substr(i, k - i);
    put(i, k - i);
    const bool raw_prefix = w == "R" || w == "LR" || w == "uR" || w == "UR" || w == "u8R";
    return raw_prefix && k < t.size() && t[k] == '"' ? raw(k) : k;
  }

  // A raw string whose opening quote is at q: kept as written, newlines and all.
  size_t raw(size_t q) {
    const std::string& t = text_;
    const size_t open = t.find('(', q + 1);
    if (open == std::string::npos || open - q - 1 > 16)
      unclear(line_at(q), "a raw string without a delimiter of at most 16 characters");
    const std::string delim = t.substr(q + 1, open - q - 1);
    // Characters C++ forbids in a delimiter: where NVRTC reports the string and reads on is not
    // worth guessing.
    if (delim.find_first_of(" )\\\t\v\f\n") != std::string::npos)
      unclear(line_at(q), "a raw string delimiter holding a blank, ')' or a backslash");
    const std::string close = ")" + delim + "\"";
    const size_t end = t.find(close, open + 1);
    if (end == std::string::npos) unclear(line_at(q), "an unterminated raw string");
    put(q, end + close.size() - q);
    return end + close.size();
  }

  // A string or character literal from its quote at i, which must end on its line.
  size_t quoted(size_t i) {
    const std::string& t = text_;
    const char q = t[i];
    size_t k = i + 1;
    while (k < t.size() && t[k] != q && t[k] != '\n') k += t[k] == '\\' ? 2 : 1;
    if (k >= t.size() || t[k] != q) unclear(line_at(i), "an unterminated string or character");
    put(i, k + 1 - i);
    return k + 1;
  }

  // The name after `at` (blanks first): "x" or <x> alone up to `end`, else computed (empty).
  void target(size_t at, size_t end, bool whole_line, TemplateInclude* inc) const {
    const std::string& c = code_;
    at = c.find_first_not_of(" \t\f\v", at);
    if (at == std::string::npos || at >= end || (c[at] != '"' && c[at] != '<')) return;
    const size_t close = c.find(c[at] == '"' ? '"' : '>', at + 1);
    if (close == std::string::npos || close >= end) return;
    const size_t after = c.find_first_not_of(" \t\f\v", close + 1);
    const bool alone =
        after == std::string::npos || after >= end || (!whole_line && c[after] == ')');
    if (!alone) return;
    inc->target = c.substr(at + 1, close - at - 1);
    inc->angled = c[at] == '<';
  }

  // A line whose first token is '#' or '%:' followed by a file-naming directive.
  void directive(size_t pos, size_t eol, std::vector<TemplateInclude>* out) const {
    const std::string& c = code_;
    size_t k = c.find_first_not_of(" \t\f\v", pos);
    if (k == std::string::npos || k >= eol) return;
    if (c[k] == '#') {
      k += 1;
    } else if (c.compare(k, 2, "%:") == 0) {
      k += 2;
    } else {
      return;
    }
    k = c.find_first_not_of(" \t\f\v", k);
    if (k == std::string::npos || k >= eol) return;
    size_t e = k;
    while (e < eol && ident_byte(c[e])) ++e;
    const std::string w = c.substr(k, e - k);
    if (w != "include" && w != "include_next" && w != "import" && w != "embed") return;
    TemplateInclude inc{w, "", false, code_line(k)};
    target(e, eol, true, &inc);
    out->push_back(inc);
  }

  // __has_include(...) and __has_include_next(...) anywhere on the line.
  void has_include(size_t pos, size_t eol, std::vector<TemplateInclude>* out) const {
    const std::string& c = code_;
    for (size_t k = c.find("__has_include", pos); k < eol; k = c.find("__has_include", k + 1)) {
      size_t e = k;
      while (e < eol && ident_byte(c[e])) ++e;
      const std::string w = c.substr(k, e - k);
      if (w != "__has_include" && w != "__has_include_next") continue;
      TemplateInclude inc{w, "", false, code_line(k)};
      const size_t paren = c.find_first_not_of(" \t\f\v", e);
      if (paren != std::string::npos && paren < eol && c[paren] == '(')
        target(paren + 1, eol, false, &inc);
      out->push_back(inc);
    }
  }

  const std::string& name_;
  std::string text_, code_;
  std::vector<int> line_, code_line_;
};

}  // namespace

std::vector<TemplateInclude> template_includes(const std::string& text, const std::string& name) {
  return Scan(text, name).includes();
}

std::string include_disk_problem(const TemplateInclude& inc) {
  const bool has = inc.directive.rfind("__has_include", 0) == 0;
  const std::string what = (has ? "" : "#") + inc.directive;
  if (inc.directive != "include" && inc.directive != "__has_include")
    return what + " is not supported";
  if (inc.target.empty()) return what + " names no single \"file\" or <file> (a macro, say)";
  if (inc.target.front() == '/') return what + " names the absolute path '" + inc.target + "'";
  if (("/" + inc.target + "/").find("/../") != std::string::npos)
    return what + " names '" + inc.target + "', a path through '..'";
  return "";
}

std::vector<TemplateInclude> checked_template_includes(const std::string& text,
                                                       const std::string& name) {
  // NVRTC would read such a file from disk, and the key would not cover its text. (A relative
  // name nobody registered stays NVRTC's error: with no include paths and -no-source-include it
  // never looks for one on disk.)
  std::vector<TemplateInclude> incs = template_includes(text, name);
  for (const TemplateInclude& inc : incs)
    if (std::string why = include_disk_problem(inc); !why.empty())
      throw Error::invalid("source", "template '" + name + "', line " + std::to_string(inc.line) +
                                         ": " + why +
                                         ": NVRTC gets only registered headers (TemplateSet::add), "
                                         "the ones the cache key covers");
  return incs;
}

}  // namespace kjit
