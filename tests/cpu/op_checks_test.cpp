// Errors name the field they are about (Error::field), so that a caller can point at it without
// parsing the message; the op-support checks a host app's op uses give the same errors.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <random>

#include "kjit/op/checks.hpp"
#include "kjit/op/target.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/ops/linear_gn_min.hpp"

namespace {

template <class Fn>
std::string field_of(Fn fn) {
  try {
    fn();
  } catch (const kjit::Error& e) {
    CHECK(e.code() == kjit::Errc::InvalidArgument);
    return e.field();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("problem validation names the field") {
  using namespace kjit::ops;
  GroupNormProblem gn = GroupNormProblem::from_shape({2, 64, 8, 8}, 8, kjit::DType::F32);
  auto with = [&](auto change) {
    GroupNormProblem q = gn;
    change(q);
    return field_of([&] { validate(q); });
  };
  CHECK(with([](GroupNormProblem& q) { q.groups = 7; }) == "groups");
  CHECK(with([](GroupNormProblem& q) { q.groups = 0; }) == "groups");
  CHECK(with([](GroupNormProblem& q) { q.C = 0; }) == "C");
  CHECK(with([](GroupNormProblem& q) { q.N = -1; }) == "N");
  CHECK(with([](GroupNormProblem& q) { q.S = int64_t{1} << 40; }) == "S");
  CHECK(with([](GroupNormProblem& q) { q.layout = static_cast<Layout>(7); }) == "layout");
  CHECK(with([](GroupNormProblem& q) { q.dtype = static_cast<kjit::DType>(9); }) == "dtype");
  float buf[4];
  CHECK(field_of([&] { validate_call(gn, nullptr, buf, buf, buf, 1e-5f); }) == "x");
  CHECK(field_of([&] { validate_call(gn, buf, buf, buf, buf, NAN); }) == "eps");
  CHECK(field_of([&] { validate_call(gn, buf, buf + 1, buf, buf, 1e-5f); }) == "y");  // overlap

  LinearGnMinProblem lgm;
  lgm.M = 4;
  lgm.K = 8;
  lgm.N = 16;
  lgm.G = 4;
  auto lgm_with = [&](auto change) {
    LinearGnMinProblem q = lgm;
    change(q);
    return field_of([&] { validate(q); });
  };
  CHECK(lgm_with([](LinearGnMinProblem& q) { q.M = 0; }) == "M");
  CHECK(lgm_with([](LinearGnMinProblem& q) { q.K = int64_t{1} << 32; }) == "K");
  CHECK(lgm_with([](LinearGnMinProblem& q) { q.G = 3; }) == "G");
  // The call's checks name the operand or option too (found by review: they named nothing).
  alignas(256) float mem[4096];
  const float* f = mem;
  LinearGnMinOptions opt;
  CHECK(field_of([&] { validate_call(lgm, nullptr, f, f, f, f, f, mem, opt); }) == "x");
  CHECK(field_of([&] { validate_call(lgm, f, f, f, f, f, f, mem, opt); }) == "out");  // overlaps
  opt.eps = NAN;
  CHECK(field_of([&] { validate_call(lgm, f, f, f, f, f, f, mem + 1024, opt); }) == "eps");
}

TEST_CASE("op-support checks: pointers, eps, overlap") {
  auto none = [] { return std::string(); };
  int formatted = 0;  // the context is formatted only when a check fails
  auto counted = [&] {
    ++formatted;
    return std::string("ctx");
  };
  alignas(16) char b[64];
  CHECK(field_of([&] { kjit::op::check_pointer("app_op", "src", nullptr, 4, none); }) == "src");
  CHECK(field_of([&] { kjit::op::check_pointer("app_op", "src", b + 2, 4, none); }) == "src");
  CHECK_NOTHROW(kjit::op::check_pointer("app_op", "src", b + 4, 4, counted));
  CHECK(field_of([&] { kjit::op::check_eps("app_op", -1.f, none); }) == "eps");
  CHECK(field_of([&] { kjit::op::check_eps("app_op", INFINITY, none); }) == "eps");
  CHECK_NOTHROW(kjit::op::check_disjoint("app_op", "a", b, 32, "b", b + 32, 32, false, counted));
  CHECK_NOTHROW(kjit::op::check_disjoint("app_op", "a", b, 32, "b", b, 32, true, counted));
  CHECK_NOTHROW(kjit::op::check_eps("app_op", 1e-5f, counted));
  CHECK(formatted == 0);
  CHECK(field_of([&] {
          kjit::op::check_disjoint("app_op", "a", b, 32, "b", b, 32, false, none);
        }) == "b");
  try {
    kjit::op::invalid("app_op", "tile", "tile = 3 must be a power of two", "M=4");
  } catch (const kjit::Error& e) {
    CHECK(std::string(e.what()) == "app_op: tile = 3 must be a power of two (M=4)");
    CHECK(e.field() == "tile");
  }
}

TEST_CASE("Target: archs as NVRTC names them, and plain compute capabilities") {
  CHECK(kjit::Target::for_arch("sm_90a").cc == 90);
  CHECK(kjit::Target::for_arch("compute_86", 84).sm_count == 84);
  CHECK_THROWS_AS(kjit::Target::for_arch("hopper"), kjit::Error);
  CHECK_THROWS_AS(kjit::Target::for_arch("sm_90", 0), kjit::Error);
  CHECK(kjit::Target::for_cc(60).arch == "sm_60");  // configs need no NVRTC support
  CHECK_THROWS_AS(kjit::Target::for_cc(5), kjit::Error);
}

// The inline fast paths may only pass what the rules pass (they send the rest to the rules).
TEST_CASE("op-support checks: what the inline fast paths pass, the rules pass") {
  using kjit::op::clearly_disjoint;
  using kjit::op::overlap_problem;
  std::mt19937_64 rng(42);
  const uintptr_t top = UINTPTR_MAX;
  const uintptr_t edges[] = {0, 1, 2, 3, 4, 15, 16, 4096, top / 2, top - 64, top - 1, top};
  auto pick = [&]() -> uintptr_t {
    const uintptr_t e = edges[rng() % (sizeof(edges) / sizeof(edges[0]))];
    switch (rng() % 3) {
      case 0:
        return e;
      case 1:
        return e + rng() % 64;  // wraps near the top: the rules must still decide
      default:
        return rng();
    }
  };
  int fast = 0;
  for (int i = 0; i < 200000; ++i) {
    const auto* a = reinterpret_cast<const void*>(pick());
    const auto* b = reinterpret_cast<const void*>(pick());
    const size_t na = pick() % 8 == 0 ? pick() : rng() % 256, nb = rng() % 256;
    if (clearly_disjoint(a, na, b, nb)) {
      ++fast;
      CHECK(overlap_problem("a", a, na, "b", b, nb, false).empty());
    }
    const size_t elem = rng() % 9;
    if (kjit::op::clearly_ok_pointer(a, elem))
      CHECK(kjit::op::pointer_problem("p", a, elem).empty());
  }
  CHECK(fast > 1000);  // the fast path did pass cases
  const float eps[] = {0.f, -0.f, 1e-5f, 1e30f, FLT_MAX, INFINITY, -INFINITY, NAN, -1e-5f, 1e-45f};
  for (float e : eps) CHECK(kjit::op::clearly_ok_eps(e) == kjit::op::eps_problem(e).empty());
  // The ends of the address space go to the rules: a range ending exactly at 2^64 is fine there.
  CHECK_FALSE(clearly_disjoint(reinterpret_cast<const void*>(top - 15), 16, nullptr, 1));
  CHECK(overlap_problem("a", reinterpret_cast<const void*>(top - 15), 16, "b", nullptr, 1, false)
            .empty());
}
