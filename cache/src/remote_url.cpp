// redis://[[user]:password@]host[:port][/db], with clear errors that never quote the password.
// No error quotes any part of the URL: a mistyped URL moves the password into another part (a
// forgotten host makes "redis://default:hunter2" a host and a port; "/0?password=..." is a
// database), so a part is named and its rule given, never shown.
#include <cctype>
#include <stdexcept>
#include <string>
#include <string_view>

#include "kjit/cache/remote_cache.hpp"

namespace kjit::cache {
namespace {

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("KJIT_REMOTE_CACHE: " + what +
                              " (the form is redis://[[user]:password@]host[:port][/db])");
}

bool all_digits(std::string_view s) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding (RFC 3986), so that a password may hold any byte but a control character.
// `what` names the part in errors; the text itself is never quoted.
std::string decode(std::string_view s, const char* what) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      const bool two = i + 2 < s.size();
      const int hi = two ? hex_value(s[i + 1]) : -1;
      const int lo = two ? hex_value(s[i + 2]) : -1;
      if (hi < 0 || lo < 0)
        bad(std::string("the ") + what + " holds a '%' not followed by two hex digits");
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (c == '/' || c == '?' || c == '#' || c == '@' || c == ':' || c == '[' || c == ']') {
      bad(std::string("the ") + what + " holds one of / ? # @ : [ ], which must be written " +
          "percent-encoded (%2F %3F %23 %40 %3A %5B %5D)");
    }
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      bad(std::string("the ") + what + " holds a control character");
    out += c;
  }
  return out;
}

void parse_host_port(std::string_view hp, RemoteUrl* u) {
  std::string_view port;
  if (!hp.empty() && hp[0] == '[') {  // [IPv6]
    const size_t close = hp.find(']');
    if (close == std::string_view::npos) bad("an IPv6 host has no closing ']'");
    u->host = std::string(hp.substr(1, close - 1));
    std::string_view rest = hp.substr(close + 1);
    if (!rest.empty() && rest[0] != ':') bad("text after the IPv6 host's ']' is not ':port'");
    if (!rest.empty()) port = rest.substr(1);
    for (char c : u->host)
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.')
        bad("the IPv6 host holds a character other than hex digits, ':' and '.'");
  } else {
    const size_t colon = hp.rfind(':');
    u->host = std::string(hp.substr(0, colon));
    if (colon != std::string_view::npos) port = hp.substr(colon + 1);
    for (char c : u->host)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_')
        bad("the host holds a character other than letters, digits, '-', '.' and '_'");
  }
  if (u->host.empty()) bad("the host is empty");
  if (u->host.size() > 253) bad("the host is longer than 253 characters");
  if (hp.find(':') != std::string_view::npos && hp[0] != '[' && port.empty())
    bad("the port after ':' is empty");
  if (!port.empty()) {
    if (!all_digits(port) || std::stoi(std::string(port)) < 1 ||
        std::stoi(std::string(port)) > 65535)
      bad("the port is not a number from 1 to 65535");
    u->port = std::stoi(std::string(port));
  }
}

}  // namespace

RemoteUrl RemoteUrl::parse(const std::string& url) {
  RemoteUrl u;
  std::string_view s(url);
  if (s.rfind("redis://", 0) == 0) {
    s.remove_prefix(8);
  } else if (s.rfind("rediss://", 0) == 0) {
    // Debian 12's hiredis 0.14 has no TLS; integrity never depends on the link (every value is
    // signed), but a password would cross it in the clear, so rediss:// is refused, not downgraded.
    bad("rediss:// (TLS) needs a hiredis built with TLS (1.0 and later); this kjit was built "
        "with one that has none: use redis:// on a private network, or a TLS proxy such as "
        "stunnel");
  } else {
    bad("the scheme is not redis://");
  }
  // The credentials end at the last '@' (nothing after them may hold one), so that a raw '/' in a
  // password is reported as such rather than taken for the start of the database.
  const size_t at = s.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view userinfo = s.substr(0, at);
    const size_t colon = userinfo.find(':');
    if (colon == std::string_view::npos)
      bad("the part before '@' has no ':' (write :password@ or user:password@)");
    u.user = decode(userinfo.substr(0, colon), "user name");
    u.password = decode(userinfo.substr(colon + 1), "password");
    if (u.password.empty()) bad("the password before '@' is empty");
    s.remove_prefix(at + 1);
  }
  const size_t slash = s.find('/');
  const std::string_view authority = s.substr(0, slash);
  const std::string_view path =
      slash == std::string_view::npos ? std::string_view() : s.substr(slash + 1);
  parse_host_port(authority, &u);
  if (!path.empty()) {
    if (!all_digits(path))
      bad("the database after '/' is not a number (a query such as ?password= is not read)");
    u.db = std::stoi(std::string(path));
  }
  return u;
}

std::string RemoteUrl::redacted() const {
  std::string s = tls ? "rediss://" : "redis://";
  if (!password.empty()) s += user + ":***@";
  const bool v6 = host.find(':') != std::string::npos;
  s += (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port) + "/" + std::to_string(db);
  return s;
}

}  // namespace kjit::cache
