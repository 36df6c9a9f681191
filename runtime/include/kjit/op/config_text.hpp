// Op support: reading a config back from the text its describe() writes ("threads=256 team=32
// vec=4 iters=1 cluster=1 stream"), so that what prepare(), a sweep or autotuning reports can be
// pinned again from a manifest, Python or the C ABI. The text is words separated by single or
// repeated blanks: `key=value` with a non-negative decimal integer, or a bare flag word; each key
// and flag at most once, in any order. Every rule broken is an Error::invalid on field "config"
// naming the op, the word and the rule.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

namespace kjit::op {

class ConfigText {
 public:
  // Splits `text` into words; throws for an empty text, a control character, a word that is
  // neither `key=value` nor a flag, a value that is no integer in [0, 2^31), or a word given
  // twice. `op` names the op in messages ("layer_norm config").
  ConfigText(std::string op, const std::string& text);

  // The value of `key`, which must be present and in [lo, hi].
  int integer(const std::string& key, int lo, int hi);
  // The value of `key` if present (then in [lo, hi]), else `fallback`.
  int integer(const std::string& key, int fallback, int lo, int hi);
  // Whether the flag `word` is present.
  bool flag(const std::string& word);
  // Throws for any word no integer() or flag() call read (a typo must not fall back to a
  // default), naming it and the words the op knows (`known`, for the message).
  void finish(const std::string& known) const;

  [[noreturn]] void bad(const std::string& rule) const;

 private:
  std::string op_, text_;
  std::map<std::string, int> values_;
  std::set<std::string> flags_;
  std::set<std::string> read_;
};

}  // namespace kjit::op
