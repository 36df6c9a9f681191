// A few JSON writing helpers for the runtime (which does not link a JSON library): the recording's
// lines and the ops' manifest problems are small fixed shapes written by hand.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace kjit::detail {

// `s` as a JSON string literal: quotes, backslash and control bytes escaped (other bytes as is).
inline std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// An object written field by field: JsonObject().add("op", "x").add("M", 8).text().
class JsonObject {
 public:
  JsonObject& add(const std::string& key, const std::string& value) {
    return raw(key, json_quote(value));
  }
  JsonObject& add(const std::string& key, const char* value) {
    return add(key, std::string(value));
  }
  JsonObject& add(const std::string& key, int64_t value) { return raw(key, std::to_string(value)); }
  JsonObject& add(const std::string& key, int value) { return add(key, int64_t{value}); }
  JsonObject& add(const std::string& key, bool value) { return raw(key, value ? "true" : "false"); }
  // `json` is already JSON text (an array, an object).
  JsonObject& raw(const std::string& key, const std::string& json) {
    text_ += text_.empty() ? "{" : ",";
    text_ += json_quote(key) + ":" + json;
    return *this;
  }
  std::string text() const { return text_.empty() ? "{}" : text_ + "}"; }

 private:
  std::string text_;
};

}  // namespace kjit::detail
