// Any change to what produced a binary must give a different key: never a stale hit.
#include <doctest/doctest.h>

#include <map>

#include "cache/test_util.hpp"

using namespace kjit::cache;
using namespace kjit_test;

namespace {

using Fields = std::map<std::string, std::string>;

Key key_for(const Fields& f) {
  KeyBuilder b;
  for (const auto& kv : f) b.add(kv.first, kv.second);
  return b.finish();
}

std::string describe(const Fields& f) {
  std::string s;
  for (const auto& kv : f) s += kv.first + "=" + kv.second + ";";
  return s;
}

}  // namespace

TEST_CASE("changing NVRTC version, arch, options or template source never hits a stale entry") {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  const Fields base = {{"format", "1"},
                       {"kjit", "0.1.0"},
                       {"nvrtc", "13.0.88"},
                       {"arch", "sm_90"},
                       {"options", "-O3"},
                       {"instantiation", "groupnorm<float,32>"},
                       {"source", "template <class T, int G> __global__ void groupnorm() {}"}};
  REQUIRE(cache.put(key_for(base), entry_of(describe(base))));

  std::vector<Fields> variants;
  auto vary = [&](const char* field, const char* value) {
    Fields f = base;
    f[field] = value;
    variants.push_back(f);
  };
  vary("nvrtc", "13.0.89");
  vary("nvrtc", "12.8.93");
  vary("arch", "sm_90a");
  vary("arch", "sm_80");
  vary("options", "-O3 -lineinfo");
  vary("options", "");
  vary("instantiation", "groupnorm<__half,32>");
  vary("source", "template <class T, int G> __global__ void groupnorm() { }");
  vary("kjit", "0.1.1");
  vary("format", "2");

  for (const auto& f : variants) {
    bool made = false;
    Entry e = cache.get_or_make(
        key_for(f), [&] { return entry_of(describe(f)); }, &made);
    CHECK_MESSAGE(made, describe(f));
    CHECK(e.payload == describe(f));
  }
  // Each variant and the original now have their own entry.
  for (const auto& f : variants) CHECK(cache.get(key_for(f))->payload == describe(f));
  CHECK(cache.get(key_for(base))->payload == describe(base));
  CHECK(cache.list(true).size() == variants.size() + 1);
  CHECK(cache.stats().corrupt == 0);
}
