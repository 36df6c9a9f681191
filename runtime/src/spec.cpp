#include "kjit/spec.hpp"

#include "kjit/error.hpp"

namespace kjit {
namespace {

// A C++ type name may hold identifiers, ::, <>, commas, spaces and digits; anything else
// (quotes, semicolons, braces, newlines) would let a "type" inject code into the NVRTC source.
bool plausible_type_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == ':' || c == '<' || c == '>' || c == ',' || c == ' ' || c == '*';
    if (!ok) return false;
  }
  return true;
}

bool plausible_identifier(const std::string& s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == ':';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

Spec::Spec(std::string header, std::string function)
    : header_(std::move(header)), function_(std::move(function)) {
  if (header_.empty()) throw Error(Errc::InvalidArgument, "Spec: template header name is empty");
  if (!plausible_identifier(function_))
    throw Error(Errc::InvalidArgument,
                "Spec: function name '" + function_ + "' is not a (qualified) C++ identifier");
}

Spec& Spec::value(int64_t v) {
  // INT64_MIN has no literal form; anything else prints as a plain decimal literal.
  if (v == INT64_MIN) throw Error(Errc::InvalidArgument, "Spec: value INT64_MIN is not supported");
  std::string s = std::to_string(v);
  if (v > 2147483647 || v < -2147483647) s += "ll";
  args_.push_back(std::move(s));
  return *this;
}

Spec& Spec::value(bool v) {
  args_.push_back(v ? "true" : "false");
  return *this;
}

Spec& Spec::type(DType t) {
  args_.push_back(dtype_cxx(t));
  return *this;
}

Spec& Spec::type(std::string cxx) {
  if (!plausible_type_name(cxx))
    throw Error(Errc::InvalidArgument,
                "Spec: type name '" + cxx + "' has characters a C++ type name cannot have");
  args_.push_back(std::move(cxx));
  return *this;
}

std::string Spec::instantiation() const {
  if (args_.empty()) return function_;
  std::string s = function_ + "<";
  for (size_t i = 0; i < args_.size(); ++i) {
    if (i) s += ", ";
    s += args_[i];
  }
  // "a<b<c>>" is fine in C++17, but keep a space so nested types read clearly in logs.
  s += s.back() == '>' ? " >" : ">";
  return s;
}

}  // namespace kjit
