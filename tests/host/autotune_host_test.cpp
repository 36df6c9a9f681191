// Autotuning on the fake driver, whose events time each kernel by a cost of its own: the first
// runtime times the candidates and stores the winner; a new runtime on the same cache finds it
// and launches nothing to choose.
#include <doctest/doctest.h>

#include <algorithm>

#include "host_env.hpp"
#include "kjit/ops/layer_norm.hpp"
#include "test_util.hpp"

TEST_CASE("autotuning: timed once; a new runtime reuses the stored choice with no launch") {
  kjit_test::TempDir dir;
  kjit::RuntimeOptions o;
  o.cache.dir = dir.path;
  kjit::ops::LayerNormOptions opt;
  opt.autotune = true;
  const auto p = kjit::ops::LayerNormProblem::layer_norm(4096, 768, kjit::DType::BF16);
  const auto candidates =
      kjit::ops::layer_norm_candidates(p, kjit::Target::of(kjit_host::runtime()), true);
  REQUIRE(candidates.size() > 2);
  uint64_t before = kjit_host::fake().launches();
  kjit::ops::LayerNormConfig tuned;
  {
    kjit::Runtime rt(o);
    tuned = kjit::ops::prepare_layer_norm(rt, p, opt);
  }
  CHECK(kjit_host::fake().launches() - before >= candidates.size());  // each timed
  CHECK(std::any_of(candidates.begin(), candidates.end(),
                    [&](const auto& c) { return c.describe() == tuned.describe(); }));
  before = kjit_host::fake().launches();
  kjit::ops::LayerNormConfig reused;
  {
    kjit::Runtime rt(o);
    reused = kjit::ops::prepare_layer_norm(rt, p, opt);
  }
  CHECK(kjit_host::fake().launches() == before);
  CHECK(reused.describe() == tuned.describe());
}
