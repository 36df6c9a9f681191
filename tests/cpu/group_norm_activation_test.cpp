// GroupNorm's activation as a policy type: every activation is a valid problem that names
// itself, reaches each kernel family's template as its policy, and compiles in every dtype.
#include <doctest/doctest.h>

#include <iterator>
#include <string>

#include "compile_probe.hpp"
#include "group_norm_families.hpp"
#include "kjit/kjit.hpp"
#include "test_util.hpp"

using kjit::ops::Activation;
using kjit::ops::GroupNormProblem;

namespace {
constexpr Activation kAll[] = {Activation::None, Activation::SiLU, Activation::GeluTanh,
                               Activation::GeluErf, Activation::ReLU};
constexpr kjit::DType kTypes[] = {kjit::DType::F32, kjit::DType::F16, kjit::DType::BF16};
}  // namespace

TEST_CASE("group_norm activation: every activation validates and is named by describe()") {
  GroupNormProblem p = GroupNormProblem::from_shape({2, 8, 4}, 2, kjit::DType::F32);
  const std::string base = "f32 NCHW N=2 C=8 S=4 G=2";
  const std::pair<Activation, const char*> names[] = {{Activation::None, ""},
                                                      {Activation::SiLU, " silu"},
                                                      {Activation::GeluTanh, " gelu_tanh"},
                                                      {Activation::GeluErf, " gelu"},
                                                      {Activation::ReLU, " relu"}};
  for (const auto& [a, text] : names) {
    p.activation = a;
    kjit::ops::validate(p);
    CHECK(p.describe() == base + text + " w b");
  }
  // A cast integer outside the enum is named (describe() says it too, rather than throwing).
  p.activation = static_cast<Activation>(5);
  CHECK(p.describe() == base + " activation=5 w b");
  try {
    kjit::ops::validate(p);
    FAIL("activation 5 accepted");
  } catch (const kjit::Error& e) {
    CHECK(e.field() == "activation");
    CHECK(std::string(e.what()).find(
              "activation = 5 must be None, SiLU, GeluTanh, GeluErf or ReLU") != std::string::npos);
  }
}

// Each family's config (tests/support/group_norm_families.hpp) with every activation, the dtype
// rotating so that every activation also meets every dtype (in three families each; the GPU test
// runs the whole product): the policy reaches each kernel the config launches (the split pair's
// statistics kernel takes none), and each compiles for sm_90.
TEST_CASE("group_norm activation: every activation compiles in every dtype and kernel family") {
  kjit_test::CompileProbe probe;
  const auto& families = kjit_test::gn_families();
  for (size_t fi = 0; fi < families.size(); ++fi) {
    const kjit_test::GnFamily& f = families[fi];
    for (size_t ai = 0; ai < std::size(kAll); ++ai) {
      const Activation a = kAll[ai];
      const kjit::DType t = kTypes[(fi + ai) % std::size(kTypes)];
      const GroupNormProblem p = kjit_test::gn_family_problem(f, t, a);
      CAPTURE(f.name);
      CAPTURE(p.describe());
      const auto c = kjit_test::gn_family_config(f, p, 90);
      REQUIRE(c.has_value());
      for (const kjit::Spec& s : kjit::ops::group_norm_specs(p, *c)) {
        CAPTURE(s.instantiation());
        const bool stats_only = s.instantiation().rfind("kjit::gn_partials<", 0) == 0;
        CHECK((s.instantiation().find(kjit::activation_policy(a)) != std::string::npos) !=
              stats_only);
        CHECK_FALSE(probe.compile(s, "sm_90").binary.empty());
      }
    }
  }
  MESSAGE(probe.summary("GroupNorm kernels (family x activation)"));
  CHECK(probe.count() >= 9 * 5);
}
