// libFuzzer target: a config's text read back (kjit::op::ConfigText through each built-in op's
// parse_*_config), which the C ABI, Python's config= and manifests hand untrusted text to. The
// first byte picks the op (GroupNorm, LayerNorm, Linear-GN-min), the rest is the text.
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      check(kjit::ops::parse_group_norm_config, text);
      break;
    case 1:
      check(kjit::ops::parse_layer_norm_config, text);
      break;
    default:
      check(kjit::ops::parse_gn_min_config, text);
  }
  return 0;
}
