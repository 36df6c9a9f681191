// Driver failures on kjit's host path (the fake driver's kjit_fake_fail): each is an Error that
// names the call and the driver's error, leaves nothing behind (no module, no allocation, no
// plan), and the next call succeeds. A cooperative grid the device refuses runs its fallback.
#include <doctest/doctest.h>

#include <string>

#include "error_text.hpp"
#include "host_env.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/ops/layer_norm.hpp"

namespace {

using kjit::DType;
using kjit::ops::LayerNormProblem;
using kjit_host::operand;

void call(kjit::Runtime& rt, const LayerNormProblem& p, CUstream stream) {
  kjit::ops::layer_norm(rt, p, operand(0), nullptr, operand(1), nullptr, operand(2),
                        p.has_bias ? operand(3) : nullptr, {}, stream);
}

// The Error a call raises (Errc::Cuda expected), as its message; "" when it raised none.
template <class Fn>
std::string cuda_error_of(Fn fn) {
  return kjit_test::error_text(fn, kjit::Errc::Cuda);
}

bool contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("a refused launch is an Error(Cuda) naming the kernel and the reason; the next works") {
  kjit::Runtime& rt = kjit_host::runtime();
  kjit::Stream stream(rt);
  const LayerNormProblem p = LayerNormProblem::layer_norm(64, 512, DType::F32);
  call(rt, p, stream);
  REQUIRE(kjit_host::fake().fail("cuLaunchKernelEx", 1, CUDA_ERROR_ILLEGAL_ADDRESS));
  const std::string what = cuda_error_of([&] { call(rt, p, stream); });
  CHECK(contains(what, "CUDA_ERROR_ILLEGAL_ADDRESS"));
  CHECK(contains(what, "row_norm"));
  const uint64_t launches = kjit_host::fake().launches();
  call(rt, p, stream);
  CHECK(kjit_host::fake().launches() == launches + 1);
}

TEST_CASE("a module that fails to load leaves no module and no plan; the next call loads it") {
  kjit::Runtime rt;  // its own plans: this problem's is built here, not by another case
  kjit::Stream stream(rt);
  for (const char* entry : {"cuModuleLoadData", "cuFuncGetAttribute"}) {
    const std::string name = entry;
    CAPTURE(name);
    const LayerNormProblem p =
        LayerNormProblem::layer_norm(5, entry[2] == 'M' ? 1111 : 1113, DType::BF16);
    const int64_t live = kjit_host::fake().live_modules();
    REQUIRE(kjit_host::fake().fail(entry, 1, CUDA_ERROR_OUT_OF_MEMORY));
    const std::string what = cuda_error_of([&] { call(rt, p, stream); });
    CHECK(contains(what, entry));
    CHECK(contains(what, "CUDA_ERROR_OUT_OF_MEMORY"));
    CHECK(kjit_host::fake().live_modules() == live);  // unloaded again where it had loaded
    const uint64_t loads = kjit_host::fake().module_loads();
    const uint64_t launches = kjit_host::fake().launches();
    call(rt, p, stream);  // the plan is built afresh
    CHECK(kjit_host::fake().module_loads() == loads + 1);
    CHECK(kjit_host::fake().live_modules() == live + 1);
    CHECK(kjit_host::fake().launches() == launches + 1);
  }
}

TEST_CASE("a workspace that cannot be allocated is an Error; nothing is kept; the next call runs") {
  kjit::Runtime rt;
  const LayerNormProblem p = LayerNormProblem::rms_norm(2, 3000002, DType::F32);
  REQUIRE(kjit::ops::prepare_layer_norm(rt, p).coop > 1);
  kjit::Stream stream(rt);  // no workspace yet: the first call allocates it
  const int64_t blocks = kjit_host::fake().live_allocations();
  REQUIRE(kjit_host::fake().fail("cuMemAlloc", 1, CUDA_ERROR_OUT_OF_MEMORY));
  const std::string what = cuda_error_of([&] { call(rt, p, stream); });
  CHECK(contains(what, "CUDA_ERROR_OUT_OF_MEMORY"));
  CHECK(contains(what, "cuMemAlloc"));
  CHECK(kjit_host::fake().live_allocations() == blocks);
  call(rt, p, stream);
  CHECK(kjit_host::last_launch().cooperative == 1);
  CHECK(kjit_host::fake().live_allocations() > blocks);
}

TEST_CASE(
    "a cooperative grid the device refuses (an MPS limit) runs the plan's fallback for good") {
  kjit::Runtime rt;
  const LayerNormProblem p = LayerNormProblem::layer_norm(3, 2000003, DType::BF16);
  REQUIRE(kjit::ops::prepare_layer_norm(rt, p).coop > 1);
  kjit::Stream stream(rt);
  kjit::ops::reserve_layer_norm_workspace(rt, p, {}, stream);
  REQUIRE(kjit_host::fake().fail("cuLaunchKernelEx", 1, CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE));
  uint64_t launches = kjit_host::fake().launches();
  call(rt, p, stream);  // refused, then the fallback: one launch reached the stream
  CHECK(kjit_host::fake().launches() == launches + 1);
  const kjit_fake_launch fallback = kjit_host::last_launch();
  CHECK(fallback.cooperative == 0);
  launches = kjit_host::fake().launches();
  call(rt, p, stream);  // straight to the fallback
  CHECK(kjit_host::fake().launches() == launches + 1);
  CHECK(std::string(kjit_host::last_launch().kernel) == fallback.kernel);
}

TEST_CASE("group_norm: a cooperative grid the device refuses runs the plan's fallback for good") {
  kjit::Runtime rt;
  const auto p = kjit::ops::GroupNormProblem::from_shape({1, 128, 256, 256}, 32, DType::F32);
  REQUIRE(kjit::ops::prepare_group_norm(rt, p).cooperative());
  kjit::Stream stream(rt);
  kjit::ops::reserve_group_norm_workspace(rt, p, {}, stream);
  auto gn = [&] {
    kjit::ops::group_norm(rt, p, operand(0), operand(1), operand(2), operand(3), {}, stream);
  };
  REQUIRE(kjit_host::fake().fail("cuLaunchKernelEx", 1, CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE));
  uint64_t launches = kjit_host::fake().launches();
  gn();
  const uint64_t fallback_launches = kjit_host::fake().launches() - launches;
  CHECK(fallback_launches >= 1);
  const kjit_fake_launch fallback = kjit_host::last_launch();
  CHECK(fallback.cooperative == 0);
  launches = kjit_host::fake().launches();
  gn();
  CHECK(kjit_host::fake().launches() - launches == fallback_launches);
  CHECK(std::string(kjit_host::last_launch().kernel) == fallback.kernel);
}
