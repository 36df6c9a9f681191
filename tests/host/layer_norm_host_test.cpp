// LayerNorm / RMSNorm on the fake driver: a call once planned allocates nothing, launches its
// plan's kernel once, with the config's grid and cluster and the caller's operands; in place and
// unaligned calls get their own plans.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "alloc_counter.hpp"
#include "host_env.hpp"
#include "kjit/ops/layer_norm.hpp"

namespace {

using kjit::DType;
using kjit::ops::LayerNormConfig;
using kjit::ops::LayerNormProblem;

struct Operands {
  void *x, *r, *y, *s, *w, *b;
};

Operands operands(const LayerNormProblem& p) {
  using kjit_host::operand;
  return {operand(0),
          p.residual ? operand(1) : nullptr,
          operand(2),
          p.residual ? operand(3) : nullptr,
          p.has_weight ? operand(4) : nullptr,
          p.has_bias ? operand(5) : nullptr};
}

void call(kjit::Runtime& rt, const LayerNormProblem& p, const Operands& o, CUstream stream) {
  kjit::ops::layer_norm(rt, p, o.x, o.r, o.y, o.s, o.w, o.b, {}, stream);
}

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// The launch a call with config c makes: its grid, block, cluster and arguments.
void check_launch(const LayerNormProblem& p, const LayerNormConfig& c, const Operands& o,
                  const kjit_fake_launch& l) {
  const int64_t teams = c.threads / c.team;
  const int64_t per_row = int64_t{c.cluster} * c.replicas * c.coop;
  CHECK(l.grid[0] == (p.rows + teams - 1) / teams * per_row);
  CHECK(l.block[0] == static_cast<unsigned>(c.threads));
  CHECK(l.cluster[0] == static_cast<unsigned>(c.cluster));
  CHECK(l.cooperative == (c.coop > 1 ? 1 : 0));
  REQUIRE(l.params == 13);  // x, r, y, sum, w, b, eps, width, rows, trigger, part, bar, coop
  const void* ptrs[] = {o.x, o.r, o.y, o.s, o.w, o.b};
  for (int i = 0; i < 6; ++i) CHECK(l.param_bits[i] == kjit_host::bits_of(ptrs[i]));
  CHECK(l.param_bits[6] == float_bits(kjit::ops::LayerNormOptions{}.eps));
  CHECK(l.param_bits[7] == static_cast<uint64_t>(p.width));
  CHECK(l.param_bits[8] == static_cast<uint64_t>(p.rows));
  CHECK(l.param_bits[12] == static_cast<uint64_t>(c.coop));
}

std::vector<LayerNormProblem> problems() {
  std::vector<LayerNormProblem> out;
  out.push_back(LayerNormProblem::layer_norm(1, 65536, DType::F32));  // a held cluster
  out.push_back(LayerNormProblem::layer_norm(4096, 768, DType::BF16));
  LayerNormProblem rms = LayerNormProblem::rms_norm(16384, 4096, DType::BF16);
  rms.residual = true;
  out.push_back(rms);
  LayerNormProblem act = LayerNormProblem::layer_norm(32768, 128, DType::F16);
  act.activation = kjit::Activation::SiLU;
  act.param_dtype = DType::F32;
  out.push_back(act);
  out.push_back(LayerNormProblem::layer_norm(3, 1048577, DType::F32));  // longer than clusters hold
  out.push_back(LayerNormProblem::rms_norm(2, 3000000, DType::BF16));   // cooperative
  return out;
}

}  // namespace

TEST_CASE("layer_norm on the fake driver: a planned call allocates nothing and launches once") {
  kjit::Runtime& rt = kjit_host::runtime();
  kjit::Stream stream(rt);
  for (const LayerNormProblem& p : problems()) {
    CAPTURE(p.describe());
    const LayerNormConfig c = kjit::ops::prepare_layer_norm(rt, p);
    CAPTURE(c.describe());
    kjit::ops::reserve_layer_norm_workspace(rt, p, {}, stream);
    const Operands o = operands(p);
    call(rt, p, o, stream);  // the workspace lease, the first time on this stream
    const uint64_t before = kjit_host::fake().launches();
    {
      kjit_host::CountAllocations allocations;
      for (int i = 0; i < 100; ++i) call(rt, p, o, stream);
      if (kjit_host::CountAllocations::counting()) CHECK(allocations.count() == 0);
    }
    CHECK(kjit_host::fake().launches() - before == 100);
    check_launch(p, c, o, kjit_host::last_launch());

    // In place: its own plan (no replicas), built by prepare_layer_norm, so nothing allocates.
    Operands in_place = o;
    in_place.y = in_place.x;
    call(rt, p, in_place, stream);
    {
      kjit_host::CountAllocations allocations;
      call(rt, p, in_place, stream);
      if (kjit_host::CountAllocations::counting()) CHECK(allocations.count() == 0);
    }
    check_launch(p, kjit::ops::without_replicas(c), in_place, kjit_host::last_launch());
  }
}

TEST_CASE("layer_norm on the fake driver: unaligned operands run an unaligned plan") {
  kjit::Runtime& rt = kjit_host::runtime();
  kjit::Stream stream(rt);
  const LayerNormProblem p = LayerNormProblem::layer_norm(64, 1000, DType::BF16);
  Operands o = operands(p);
  o.x = static_cast<char*>(o.x) + 2;  // one bf16 element off: 2-byte aligned only
  call(rt, p, o, stream);
  const kjit_fake_launch unaligned = kjit_host::last_launch();
  call(rt, p, operands(p), stream);
  const kjit_fake_launch aligned = kjit_host::last_launch();
  CHECK(unaligned.param_bits[0] == kjit_host::bits_of(o.x));
  CHECK(std::string(unaligned.kernel) != std::string(aligned.kernel));
}

TEST_CASE("the allocation counter counts the calling thread's allocations") {
  if (!kjit_host::CountAllocations::counting()) return;
  kjit_host::CountAllocations allocations;
  std::vector<int> v(100);
  std::string s(100, 'x');
  CHECK(allocations.count() == 2);
}
