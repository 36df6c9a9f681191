// Op support: reading a config back from the text its describe() writes ("threads=256 team=32
// vec=4 iters=1 cluster=1 stream"), so that what prepare(), a sweep or autotuning reports can be
// pinned again from a manifest, Python or the C ABI. The text is words separated by single or
// repeated blanks: `key=value` with a decimal integer (no '+', no leading zero) of magnitude below
// 2^31, negative ('-') only for a key whose range takes it (cuBLASLt's split-k of -1), or a
// bare flag word; each key and flag at most once, in any order. Every rule broken is an
// Error::invalid on field "config" naming the op, the word and the rule. Reading a good text
// allocates nothing (a pinned call parses its config on every call); only a refusal formats.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace kjit::op {

class ConfigText {
 public:
  // At most this many words: more than any config has.
  static constexpr size_t kMaxWords = 32;

  // Splits `text` (which must outlive this object) into words; throws for an empty text, a
  // control or non-ASCII byte, a word that is neither `key=value` nor a flag, a value that is no
  // integer in [0, 2^31), a word given twice, or more than kMaxWords words. `op` (a literal)
  // names the op in messages ("layer_norm").
  ConfigText(const char* op, std::string_view text);

  // The value of `key`, which must be present and in [lo, hi].
  int integer(std::string_view key, int lo, int hi);
  // The value of `key` if present (then in [lo, hi]), else `fallback`.
  int integer(std::string_view key, int fallback, int lo, int hi);
  // Whether the flag `word` is present.
  bool flag(std::string_view word);
  // Throws for any word no integer() or flag() call read (a typo must not fall back to a
  // default), naming it and the words the op knows (`known`, for the message).
  void finish(const char* known) const;

  [[noreturn]] void bad(const std::string& rule) const;
  // The same refusal for a text no ConfigText was made of (e.g. a config text of several parts,
  // each read by its own ConfigText): "<op> config: <rule> in \"<text>\"".
  [[noreturn]] static void refuse(const char* op, std::string_view text, const std::string& rule);

 private:
  struct Word {
    std::string_view name;
    int value = 0;
    bool is_flag = false;
    bool read = false;
  };
  Word* find(std::string_view name);

  const char* op_;
  std::string_view text_;
  std::array<Word, kMaxWords> words_{};
  size_t count_ = 0;
};

}  // namespace kjit::op
