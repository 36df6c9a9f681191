// Every built-in op through the registry and the generic harness, plus a host app's op
// registered at run time: parsed from fields, prepared, run and checked against its reference.
#include <doctest/doctest.h>

#include "gpu_env.hpp"
#include "kjit/op/harness.hpp"
#include "kjit/op/registry.hpp"
#include "kjit/ops/linear_gn_min.hpp"

namespace {

using kjit::op::FieldValue;

FieldValue integer(int64_t v) {
  FieldValue f;
  f.kind = FieldValue::Kind::Integer;
  f.integer = v;
  f.shown = std::to_string(v);
  return f;
}
FieldValue text(const std::string& v) {
  FieldValue f;
  f.kind = FieldValue::Kind::Text;
  f.text = v;
  f.shown = v;
  return f;
}
FieldValue flag(bool v) {
  FieldValue f;
  f.kind = FieldValue::Kind::Bool;
  f.flag = v;
  f.shown = v ? "true" : "false";
  return f;
}
FieldValue dims(std::vector<int64_t> v) {
  FieldValue f;
  f.kind = FieldValue::Kind::Integers;
  f.integers = std::move(v);
  return f;
}

void check_problem(const std::string& op, std::map<std::string, FieldValue> fields, bool tune) {
  kjit::Runtime& rt = kjit_test::runtime();
  const auto p = kjit::op::find_op(op).parse(kjit::op::Fields(op, std::move(fields)));
  kjit::Stream s(rt);
  const std::string config = p->prepare(rt, tune, s);
  kjit::op::ProblemBuffers b(rt, *p, 1, 7);
  const kjit::op::CheckResult r = kjit::op::check(rt, *p, b, tune, s);
  INFO(p->describe() << " [" << config << "]: " << r.first_wrong);
  CHECK(r.ok);
  CHECK(r.checked > 0);
}

}  // namespace

TEST_CASE("op registry: built-in problems run through the generic harness and pass") {
  check_problem("group_norm", {{"shape", dims({4, 64, 9, 7})}, {"groups", integer(8)}}, false);
  check_problem("group_norm",
                {{"shape", dims({2, 10, 10, 96})},
                 {"groups", integer(32)},
                 {"layout", text("nhwc")},
                 {"dtype", text("bf16")},
                 {"activation", text("none")}},
                false);
  check_problem("group_norm", {{"shape", dims({3, 32, 40})}, {"groups", integer(4)}}, true);
  check_problem("layer_norm", {{"rows", integer(37)}, {"width", integer(1000)}}, false);
  check_problem("rms_norm", {{"rows", integer(64)}, {"width", integer(3000)}}, true);
  check_problem("layer_norm",
                {{"rows", integer(5)},
                 {"width", integer(4099)},
                 {"dtype", text("bf16")},
                 {"residual", flag(true)},
                 {"activation", text("gelu")}},
                false);
  check_problem("rms_norm",
                {{"rows", integer(300)},
                 {"width", integer(128)},
                 {"dtype", text("f16")},
                 {"param_dtype", text("f32")},
                 {"residual", flag(true)}},
                false);
  check_problem(
      "linear_gn_min",
      {{"M", integer(96)}, {"K", integer(130)}, {"N", integer(64)}, {"groups", integer(8)}}, false);
}

TEST_CASE("op registry: every candidate of a built-in problem runs its own config and passes") {
  kjit::Runtime& rt = kjit_test::runtime();
  kjit::Stream s(rt);
  const std::vector<std::pair<std::string, std::map<std::string, FieldValue>>> problems = {
      {"layer_norm", {{"rows", integer(37)}, {"width", integer(1000)}}},
      {"rms_norm", {{"rows", integer(2)}, {"width", integer(20000)}, {"dtype", text("bf16")}}},
      {"group_norm", {{"shape", dims({2, 64, 9, 7})}, {"groups", integer(8)}}},
      {"linear_gn_min",
       {{"M", integer(96)}, {"K", integer(130)}, {"N", integer(64)}, {"groups", integer(8)}}}};
  for (const auto& [op, fields] : problems) {
    const auto p = kjit::op::find_op(op).parse(kjit::op::Fields(op, fields));
    const auto candidates = p->candidates(kjit::Target::of(rt));
    REQUIRE(candidates.size() > 1);
    kjit::op::ProblemBuffers b(rt, *p, 1, 11);
    for (const kjit::op::Candidate& c : candidates) {
      // autotune = true: a candidate runs its own config all the same, and times nothing.
      const std::string config = c.problem->prepare(rt, true, s);
      const kjit::op::CheckResult r = kjit::op::check(rt, *c.problem, b, true, s);
      INFO(p->describe() << " [" << c.config << "] prepared as [" << config
                         << "]: " << r.first_wrong);
      CHECK(r.ok);
      if (op != "linear_gn_min") {
        CHECK(config == c.config);
        continue;
      }
      // Its prepare() names the pinned config (linear-bias and all: the config settles who adds
      // the Linear's bias), then the GEMM, then that config's kernel.
      kjit::ops::LinearGnMinProblem lp;
      lp.M = 96, lp.K = 130, lp.N = 64, lp.G = 8;
      const std::string kernel =
          kjit::ops::gn_min_spec(lp, kjit::ops::parse_gn_min_config(c.config)).instantiation();
      CHECK(config.rfind(c.config + "; GEMM id=", 0) == 0);
      CHECK(config.find("; kernel " + kernel) != std::string::npos);  // (+ split's broadcast)
      CHECK(config.find("; GEMM from heuristic") != std::string::npos);
    }
  }
}

TEST_CASE("op registry: a wrong kernel fails the harness's check") {
  // group_norm's problem with its output checked against another problem's reference: the
  // harness must see the difference (a harness that passes anything proves nothing).
  kjit::Runtime& rt = kjit_test::runtime();
  const auto& info = kjit::op::find_op("group_norm");
  const auto real = info.parse(
      kjit::op::Fields("group_norm", {{"shape", dims({2, 16, 8, 8})}, {"groups", integer(4)}}));
  const auto other = info.parse(
      kjit::op::Fields("group_norm", {{"shape", dims({2, 16, 8, 8})}, {"groups", integer(8)}}));
  struct Mixed : kjit::op::OpProblem {
    const kjit::op::OpProblem *run_as, *check_as;
    Mixed(const kjit::op::OpProblem* a, const kjit::op::OpProblem* b) : run_as(a), check_as(b) {}
    std::string describe() const override { return "mixed"; }
    std::vector<kjit::Spec> specs_for(const kjit::Target& t, bool a, bool u) const override {
      return run_as->specs_for(t, a, u);
    }
    std::vector<kjit::op::Operand> operands() const override { return run_as->operands(); }
    std::string prepare(kjit::Runtime& r, bool u, CUstream s) const override {
      return run_as->prepare(r, u, s);
    }
    void run(kjit::Runtime& r, const std::vector<void*>& p, bool u, CUstream s) const override {
      run_as->run(r, p, u, s);
    }
    std::vector<kjit::op::Expected> reference(
        const std::vector<std::vector<float>>& in) const override {
      return check_as->reference(in);
    }
  } mixed(real.get(), other.get());
  kjit::Stream s(rt);
  mixed.prepare(rt, false, s);
  kjit::op::ProblemBuffers b(rt, mixed, 1, 3);
  const kjit::op::CheckResult r = kjit::op::check(rt, mixed, b, false, s);
  CHECK_FALSE(r.ok);
  CHECK(r.wrong > 0);
  CHECK_FALSE(r.first_wrong.empty());
}
