// Graph captures on the fake driver: what a capture may and may not do on kjit's host path.
#include <doctest/doctest.h>

#include <string>

#include "host_env.hpp"
#include "kjit/ops/layer_norm.hpp"

namespace {

using kjit::DType;
using kjit::ops::LayerNormProblem;
using kjit_host::operand;

void call(kjit::Runtime& rt, const LayerNormProblem& p, CUstream stream) {
  kjit::ops::layer_norm(rt, p, operand(0), nullptr, operand(1), nullptr, operand(2), operand(3), {},
                        stream);
}

}  // namespace

TEST_CASE("layer_norm in a capture: a plan not prepared is a CaptureCompile naming the remedy") {
  kjit::Runtime& rt = kjit_host::runtime();
  kjit::Stream stream(rt);
  const LayerNormProblem p = LayerNormProblem::layer_norm(300, 1234, DType::F32);
  const uint64_t loads = kjit_host::fake().module_loads();
  try {
    kjit::Graph g(rt, stream, [&] { call(rt, p, stream); });
    FAIL("the capture compiled");
  } catch (const kjit::Error& e) {
    CHECK(e.code() == kjit::Errc::CaptureCompile);
    CHECK(std::string(e.what()).find("prepare_layer_norm") != std::string::npos);
  }
  CHECK(kjit_host::fake().module_loads() == loads);
  // The failed capture was ended: the stream takes work, and a prepared plan captures.
  kjit::ops::prepare_layer_norm(rt, p);
  kjit::Graph g(rt, stream, [&] { call(rt, p, stream); });
  const kjit_fake_launch captured = kjit_host::last_launch();
  REQUIRE(g.kernel_names().size() == 1);
  CHECK(g.kernel_names()[0] == captured.kernel);
  const uint64_t replays = kjit_host::fake().graph_launches();
  g.launch(stream);
  CHECK(kjit_host::fake().graph_launches() == replays + 1);
}

TEST_CASE("layer_norm in a capture: a cooperative plan without its workspace runs its fallback") {
  kjit::Runtime& rt = kjit_host::runtime();
  const LayerNormProblem p = LayerNormProblem::rms_norm(2, 3000001, DType::F32);
  const auto c = kjit::ops::prepare_layer_norm(rt, p);
  REQUIRE(c.coop > 1);
  std::string fallback;
  {
    kjit::Stream fresh(rt);  // no workspace yet: a capture may not allocate one
    const int64_t allocations = kjit_host::fake().live_allocations();
    kjit::Graph g(rt, fresh, [&] { call(rt, p, fresh); });
    CHECK(kjit_host::fake().live_allocations() == allocations);
    const kjit_fake_launch l = kjit_host::last_launch();
    CHECK(l.cooperative == 0);
    CHECK(l.param_bits[10] == 0);  // no partials
    fallback = l.kernel;
  }
  kjit::Stream reserved(rt);
  CHECK(kjit::ops::reserve_layer_norm_workspace(rt, p, {}, reserved) > 0);
  kjit::Graph g(rt, reserved, [&] { call(rt, p, reserved); });
  const kjit_fake_launch l = kjit_host::last_launch();
  CHECK(l.cooperative == 1);
  CHECK(l.grid[0] == 2u * static_cast<unsigned>(c.coop));
  CHECK(l.param_bits[10] != 0);
  CHECK(fallback != l.kernel);
}
