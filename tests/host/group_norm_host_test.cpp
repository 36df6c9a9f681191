// GroupNorm and the C ABI on the fake driver: planned calls allocate nothing and launch the same
// kernels every time.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "alloc_counter.hpp"
#include "host_env.hpp"
#include "kjit/c_api.h"
#include "kjit/ops/group_norm.hpp"

namespace {

using kjit::DType;
using kjit::ops::GroupNormProblem;

std::vector<GroupNormProblem> problems() {
  std::vector<GroupNormProblem> out;
  out.push_back(GroupNormProblem::from_shape({8, 64, 32, 32}, 32, DType::F32));
  out.push_back(GroupNormProblem::from_shape({2, 512, 64, 64}, 32, DType::BF16));
  out.push_back(
      GroupNormProblem::from_shape({1, 128, 256, 256}, 32, DType::F16, kjit::ops::Layout::NHWC));
  out.push_back(GroupNormProblem::from_shape({32, 2560, 8, 8}, 32, DType::F32));
  return out;
}

}  // namespace

TEST_CASE("group_norm on the fake driver: a planned call allocates nothing") {
  kjit::Runtime& rt = kjit_host::runtime();
  kjit::Stream stream(rt);
  using kjit_host::operand;
  for (const GroupNormProblem& p : problems()) {
    CAPTURE(p.describe());
    const auto c = kjit::ops::prepare_group_norm(rt, p);
    CAPTURE(c.describe());
    kjit::ops::reserve_group_norm_workspace(rt, p, {}, stream);
    auto call = [&] {
      kjit::ops::group_norm(rt, p, operand(0), operand(1), operand(2), operand(3), {}, stream);
    };
    uint64_t before = kjit_host::fake().launches();
    call();
    const uint64_t per_call = kjit_host::fake().launches() - before;
    CHECK(per_call >= 1);
    before = kjit_host::fake().launches();
    {
      kjit_host::CountAllocations allocations;
      for (int i = 0; i < 50; ++i) call();
      if (kjit_host::CountAllocations::counting()) CHECK(allocations.count() == 0);
    }
    CHECK(kjit_host::fake().launches() - before == 50 * per_call);
    const kjit_fake_launch l = kjit_host::last_launch();
    CHECK(l.param_bits[0] == kjit_host::bits_of(operand(0)));
  }
}

TEST_CASE("the C ABI on the fake driver: a planned call allocates nothing") {
  using kjit_host::operand;
  kjit::Stream stream(kjit_host::runtime());
  void* s = stream.get();
  auto ln = [&] {
    return kjit_layer_norm("layer_norm", "bf16", nullptr, 4096, 768, KJIT_ACTIVATION_NONE,
                           operand(0), nullptr, operand(1), nullptr, operand(2), operand(3), 1e-5f,
                           s, 0, nullptr);
  };
  auto gn = [&] {
    return kjit_group_norm("f32", "nchw", 8, 64, 1024, 32, KJIT_ACTIVATION_SILU, operand(0),
                           operand(1), operand(2), operand(3), 1e-5f, s, 0, nullptr);
  };
  REQUIRE_MESSAGE(ln() == KJIT_OK, kjit_last_error());
  REQUIRE_MESSAGE(gn() == KJIT_OK, kjit_last_error());
  const uint64_t before = kjit_host::fake().launches();
  kjit_host::CountAllocations allocations;
  for (int i = 0; i < 50; ++i) {
    CHECK(ln() == KJIT_OK);
    CHECK(gn() == KJIT_OK);
  }
  if (kjit_host::CountAllocations::counting()) CHECK(allocations.count() == 0);
  CHECK(kjit_host::fake().launches() - before >= 100);
}

TEST_CASE("the allocation counter sees allocations inside libkjit_c.so") {
  if (!kjit_host::CountAllocations::counting()) return;
  kjit_host::CountAllocations allocations;
  // An error's message is built on the heap, in the C library's own copy of kjit.
  CHECK(kjit_layer_norm("layer_norm", "f64", nullptr, 1, 1, 0, nullptr, nullptr, nullptr, nullptr,
                        nullptr, nullptr, 1e-5f, nullptr, 0, nullptr) != KJIT_OK);
  CHECK(allocations.count() > 0);
}
