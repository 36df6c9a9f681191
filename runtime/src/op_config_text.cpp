#include <cstdint>
#include <string>
#include <vector>

#include "kjit/error.hpp"
#include "kjit/op/config_text.hpp"

namespace kjit::op {
namespace {

// A key or flag: lower-case letters, digits and '-', starting with a letter (what every op's
// describe() writes). Anything else is refused rather than guessed at.
bool is_name(const std::string& s) {
  if (s.empty() || s[0] < 'a' || s[0] > 'z') return false;
  for (char ch : s)
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-')) return false;
  return true;
}

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  for (char ch : text) {
    if (ch == ' ') {
      if (!word.empty()) words.push_back(std::move(word));
      word.clear();
    } else {
      word += ch;
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

// Quoted for a message, cut where it would swamp it, other than printable ASCII shown as '?'.
std::string shown(const std::string& s) {
  constexpr size_t kMax = 160;
  std::string out = s.size() > kMax ? s.substr(0, kMax) + "..." : s;
  for (char& ch : out)
    if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) >= 0x7f) ch = '?';
  return "\"" + out + "\"";
}

}  // namespace

ConfigText::ConfigText(std::string op, const std::string& text) : op_(std::move(op)), text_(text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const auto ch = static_cast<unsigned char>(text[i]);
    if (ch < 0x20 || ch >= 0x7f)
      bad("byte " + std::to_string(ch) + " at offset " + std::to_string(i) +
          " is not a printable ASCII character");
  }
  const std::vector<std::string> words = split_words(text);
  if (words.empty()) bad("the text is empty (expected words such as threads=256)");
  for (const std::string& w : words) {
    const size_t eq = w.find('=');
    const std::string key = w.substr(0, eq);
    if (!is_name(key))
      bad("word " + shown(w) + " must be key=value or a flag: lower-case letters, digits and '-'");
    if (values_.count(key) || flags_.count(key)) bad(shown(key) + " is given twice");
    if (eq == std::string::npos) {
      flags_.insert(key);
      continue;
    }
    const std::string value = w.substr(eq + 1);
    int64_t v = 0;
    bool ok = !value.empty() && value.size() <= 10;
    for (char ch : value) {
      ok = ok && ch >= '0' && ch <= '9';
      if (ok) v = v * 10 + (ch - '0');
    }
    if (!ok || v > INT32_MAX)
      bad("word " + shown(w) + ": the value must be a decimal integer in [0, 2^31)");
    values_[key] = static_cast<int>(v);
  }
}

int ConfigText::integer(const std::string& key, int lo, int hi) {
  if (!values_.count(key) && !flags_.count(key)) bad(key + "=<integer> is missing");
  return integer(key, 0, lo, hi);
}

int ConfigText::integer(const std::string& key, int fallback, int lo, int hi) {
  const auto it = values_.find(key);
  if (it == values_.end()) {
    if (flags_.count(key)) bad(shown(key) + " needs a value: " + key + "=<integer>");
    return fallback;
  }
  read_.insert(key);
  if (it->second < lo || it->second > hi)
    bad(key + " = " + std::to_string(it->second) + " must be in [" + std::to_string(lo) + ", " +
        std::to_string(hi) + "]");
  return it->second;
}

bool ConfigText::flag(const std::string& word) {
  if (values_.count(word)) bad(shown(word) + " is a flag and takes no value");
  if (!flags_.count(word)) return false;
  read_.insert(word);
  return true;
}

void ConfigText::finish(const std::string& known) const {
  for (const auto& kv : values_)
    if (!read_.count(kv.first)) bad("unknown key " + shown(kv.first) + " (known: " + known + ")");
  for (const std::string& f : flags_)
    if (!read_.count(f)) bad("unknown word " + shown(f) + " (known: " + known + ")");
}

void ConfigText::bad(const std::string& rule) const {
  throw Error::invalid("config", op_ + " config: " + rule + " in " + shown(text_));
}

}  // namespace kjit::op
