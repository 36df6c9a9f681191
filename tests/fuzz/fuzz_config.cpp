// libFuzzer target: a config's text read back (kjit::op::ConfigText through each built-in op's
// parse_*_config), which the C ABI, Python's config= and manifests hand untrusted text to. The
// first byte picks the op (GroupNorm, LayerNorm, Linear-GN-min's config, Linear-GN-min's pin
// "<config>; GEMM <algo>" through pin_config_text), the rest is the text.
//
// The documented refusal is kjit::Error with InvalidArgument on field "config"; any other
// exception, a crash or a sanitizer report is a finding. So is a config whose describe() does not
// read back to the same config (what a prepare reports must pin what it ran).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kjit/error.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/ops/layer_norm.hpp"
#include "kjit/ops/linear_gn_min.hpp"

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_config: %s\n", what.c_str());
  std::abort();
}

// parse(text), then the round trip of what it read; refusals must be the documented one.
template <class Parse>
void check(Parse parse, const std::string& text) {
  try {
    const auto c = parse(text);
    const std::string d = c.describe();
    if (!(parse(d) == c)) fail("\"" + d + "\" does not read back to the config it describes");
  } catch (const kjit::Error& e) {
    if (e.code() != kjit::Errc::InvalidArgument || e.field() != "config")
      fail(std::string("refused with another error: ") + e.what());
  } catch (const std::exception& e) {
    fail(std::string("threw a non-kjit exception: ") + e.what());
  }
}

// A Linear-GN-min pin as the options it sets, written back as LinearGnMinInfo::pin() writes it.
struct Pin {
  kjit::ops::LinearGnMinOptions o;
  std::string describe() const {
    return o.config->describe() + (o.gemm ? "; GEMM " + o.gemm->describe() : std::string());
  }
  friend bool operator==(const Pin& a, const Pin& b) {
    return *a.o.config == *b.o.config && a.o.gemm == b.o.gemm;
  }
};

Pin read_pin(const std::string& text) {
  Pin p;
  kjit::ops::pin_config_text(text, &p.o);
  if (!p.o.config) fail("pin_config_text read \"" + text + "\" without setting a config");
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      check(kjit::ops::parse_group_norm_config, text);
      break;
    case 1:
      check(kjit::ops::parse_layer_norm_config, text);
      break;
    case 2:
      check(kjit::ops::parse_gn_min_config, text);
      break;
    default:
      check(read_pin, text);
  }
  return 0;
}
