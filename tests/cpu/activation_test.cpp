#include <doctest/doctest.h>

#include <cmath>

#include "compile_probe.hpp"
#include "kjit/activation.hpp"
#include "kjit/kjit.hpp"
#include "test_util.hpp"

namespace {
constexpr kjit::Activation kAll[] = {kjit::Activation::None, kjit::Activation::SiLU,
                                     kjit::Activation::GeluTanh, kjit::Activation::GeluErf,
                                     kjit::Activation::ReLU};
}

TEST_CASE("activation: names round-trip; anything else names itself and the choices") {
  for (kjit::Activation a : kAll) CHECK(kjit::parse_activation(kjit::activation_name(a)) == a);
  CHECK(kjit::parse_activation("GELU_erf") == kjit::Activation::GeluErf);
  CHECK(kjit::parse_activation("SiLU") == kjit::Activation::SiLU);
  try {
    kjit::parse_activation("swish");
    FAIL("accepted swish");
  } catch (const kjit::Error& e) {
    CHECK(e.code() == kjit::Errc::InvalidArgument);
    CHECK(e.field() == "activation");
    CHECK(std::string(e.what()).find("'swish'") != std::string::npos);
    CHECK(std::string(e.what()).find("gelu_tanh") != std::string::npos);
  }
  CHECK_KJIT_ERROR(kjit::activation_name(static_cast<kjit::Activation>(99)),
                   kjit::Errc::InvalidArgument);
}

TEST_CASE("activation: the float64 reference is PyTorch's formula") {
  using kjit::Activation;
  CHECK(kjit::activation_ref(Activation::None, -2.5) == -2.5);
  CHECK(kjit::activation_ref(Activation::ReLU, -2.5) == 0.0);
  CHECK(kjit::activation_ref(Activation::ReLU, 3.0) == 3.0);
  CHECK(std::isnan(kjit::activation_ref(Activation::ReLU, NAN)));
  CHECK(kjit::activation_ref(Activation::SiLU, 1.0) == doctest::Approx(0.7310585786300049));
  // torch.nn.functional.gelu(torch.tensor(1.0, dtype=torch.float64)) and approximate="tanh"
  CHECK(kjit::activation_ref(Activation::GeluErf, 1.0) == doctest::Approx(0.8413447460685429));
  CHECK(kjit::activation_ref(Activation::GeluTanh, 1.0) == doctest::Approx(0.8411919906082768));
  CHECK(kjit::activation_ref(Activation::GeluErf, -3.0) == doctest::Approx(-0.0040496977));
  for (kjit::Activation a : kAll) {
    CHECK(std::isnan(kjit::activation_ref(a, NAN)));
    // The slope bound holds on a fine grid (tolerances scale by it).
    for (double z = -8; z < 8; z += 1.0 / 64) {
      const double d = (kjit::activation_ref(a, z + 1e-6) - kjit::activation_ref(a, z)) / 1e-6;
      CHECK(std::fabs(d) <= kjit::activation_max_slope(a) + 1e-3);
    }
  }
}

TEST_CASE("activation: every policy compiles for every dtype") {
  kjit_test::CompileProbe probe;
  for (kjit::Activation a : kAll)
    for (kjit::DType t : {kjit::DType::F32, kjit::DType::F16, kjit::DType::BF16}) {
      kjit::Spec s("kjit/test_kernels.cuh", "kjit::test_activation");
      s.type(t).type(kjit::activation_policy(a));
      INFO(s.instantiation());
      CHECK_FALSE(probe.compile(s, "sm_90").binary.empty());
    }
  MESSAGE(probe.summary("activation kernels"));
}
