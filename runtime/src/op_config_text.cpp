#include "kjit/op/config_text.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "kjit/error.hpp"

namespace kjit::op {
namespace {

// A key or flag: lower-case letters, digits and '-', starting with a letter (what every op's
// describe() writes). Anything else is refused rather than guessed at.
bool is_name(std::string_view s) {
  if (s.empty() || s[0] < 'a' || s[0] > 'z') return false;
  for (char ch : s)
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-')) return false;
  return true;
}

// A decimal integer as describe() writes one: digits, no '+', no leading zero, magnitude below
// 2^31; a '-' before a nonzero value (only keys whose range takes it accept one: integer()).
bool read_integer(std::string_view s, int* out) {
  const bool negative = !s.empty() && s[0] == '-';
  if (negative) s.remove_prefix(1);
  if (s.empty() || s.size() > 10 || (s.size() > 1 && s[0] == '0')) return false;
  if (negative && s == "0") return false;
  int64_t v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return false;
    v = v * 10 + (ch - '0');
  }
  if (v > INT32_MAX) return false;
  *out = static_cast<int>(negative ? -v : v);
  return true;
}

// Quoted for a message, cut where it would swamp it, other than printable ASCII shown as '?'.
std::string shown(std::string_view s) {
  constexpr size_t kMax = 160;
  std::string out(s.substr(0, kMax));
  if (s.size() > kMax) out += "...";
  for (char& ch : out)
    if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) >= 0x7f) ch = '?';
  return "\"" + out + "\"";
}

}  // namespace

ConfigText::ConfigText(const char* op, std::string_view text) : op_(op), text_(text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const auto ch = static_cast<unsigned char>(text[i]);
    if (ch < 0x20 || ch >= 0x7f)
      bad("byte " + std::to_string(ch) + " at offset " + std::to_string(i) +
          " is not a printable ASCII character");
  }
  for (size_t i = 0; i < text.size();) {
    if (text[i] == ' ') {
      ++i;
      continue;
    }
    const size_t end = std::min(text.find(' ', i), text.size());
    const std::string_view w = text.substr(i, end - i);
    i = end;
    const size_t eq = w.find('=');
    Word word;
    word.name = w.substr(0, eq);
    if (!is_name(word.name))
      bad("word " + shown(w) + " must be key=value or a flag: lower-case letters, digits and '-'");
    if (find(word.name)) bad(shown(word.name) + " is given twice");
    word.is_flag = eq == std::string_view::npos;
    if (!word.is_flag && !read_integer(w.substr(eq + 1), &word.value))
      bad("word " + shown(w) +
          ": the value must be a decimal integer in [0, 2^31), without a sign or a leading zero" +
          " (a '-' only before a nonzero value, where the key takes one)");
    if (count_ == kMaxWords) bad("more than " + std::to_string(kMaxWords) + " words");
    words_[count_++] = word;
  }
  if (count_ == 0) bad("the text is empty (expected words such as threads=256)");
}

ConfigText::Word* ConfigText::find(std::string_view name) {
  for (size_t i = 0; i < count_; ++i)
    if (words_[i].name == name) return &words_[i];
  return nullptr;
}

int ConfigText::integer(std::string_view key, int lo, int hi) {
  if (!find(key)) bad(std::string(key) + "=<integer> is missing");
  return integer(key, 0, lo, hi);
}

int ConfigText::integer(std::string_view key, int fallback, int lo, int hi) {
  Word* w = find(key);
  if (!w) return fallback;
  if (w->is_flag) bad(shown(key) + " needs a value: " + std::string(key) + "=<integer>");
  w->read = true;
  if (w->value < 0 && lo >= 0)  // the rule every key without negative values states
    bad("word " + shown(std::string(key) + "=" + std::to_string(w->value)) +
        ": the value must be a decimal integer in [0, 2^31), without a sign or a leading zero");
  if (w->value < lo || w->value > hi)
    bad(std::string(key) + " = " + std::to_string(w->value) + " must be in [" + std::to_string(lo) +
        ", " + std::to_string(hi) + "]");
  return w->value;
}

bool ConfigText::flag(std::string_view word) {
  Word* w = find(word);
  if (!w) return false;
  if (!w->is_flag) bad(shown(word) + " is a flag and takes no value");
  w->read = true;
  return true;
}

void ConfigText::finish(const char* known) const {
  for (size_t i = 0; i < count_; ++i)
    if (!words_[i].read)
      bad(std::string(words_[i].is_flag ? "unknown word " : "unknown key ") +
          shown(words_[i].name) + " (known: " + known + ")");
}

void ConfigText::bad(const std::string& rule) const {
  refuse(op_, text_, rule);
}

void ConfigText::refuse(const char* op, std::string_view text, const std::string& rule) {
  throw Error::invalid("config", std::string(op) + " config: " + rule + " in " + shown(text));
}

}  // namespace kjit::op
