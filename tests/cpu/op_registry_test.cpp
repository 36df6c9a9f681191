// The op registry: built-ins registered, a host app's op added, fields read with errors that
// name them, and the registered specs_for equal to the op's own.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kjit/kjit.hpp"
#include "kjit/op/registry.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/ops/layer_norm.hpp"
#include "kjit/ops/linear_gn_min.hpp"
#include "test_util.hpp"

namespace {

using kjit::op::FieldValue;
using Kind = FieldValue::Kind;

FieldValue integer(int64_t v) {
  FieldValue f;
  f.kind = Kind::Integer;
  f.integer = v;
  f.shown = std::to_string(v);
  return f;
}
FieldValue text(const std::string& v) {
  FieldValue f;
  f.kind = Kind::Text;
  f.text = v;
  f.shown = "\"" + v + "\"";
  return f;
}
FieldValue dims(std::vector<int64_t> v) {
  FieldValue f;
  f.kind = Kind::Integers;
  f.integers = std::move(v);
  f.shown = "[...]";
  return f;
}

// The field an error names, or "<none>".
template <class F>
std::string field_of(F&& f) {
  try {
    f();
  } catch (const kjit::Error& e) {
    return e.field();
  }
  return "<none>";
}

// A host app's op: one kernel per problem, from the README's app/scale.cuh.
class ScaleProblem : public kjit::op::OpProblem {
 public:
  explicit ScaleProblem(int64_t k) : k_(k) {}
  std::string describe() const override { return "app.scale k=" + std::to_string(k_); }
  std::vector<kjit::Spec> specs_for(const kjit::Target&, bool, bool) const override {
    kjit::Spec s("app/scale.cuh", "scale");
    s.type(kjit::DType::F32).value(k_);
    return {s};
  }
  std::vector<kjit::op::Operand> operands() const override {
    return {{"x", kjit::DType::F32, 1000, false, 0.f, 1.f},
            {"y", kjit::DType::F32, 1000, true, 0.f, 0.f}};
  }
  std::string prepare(kjit::Runtime& rt, bool, CUstream) const override {
    return rt.kernel(specs_for(kjit::Target{}, true, false).at(0)).instantiation();
  }
  void run(kjit::Runtime& rt, const std::vector<void*>& ptrs, bool, CUstream s) const override {
    kjit::LaunchConfig cfg;
    cfg.grid.x = 4;
    cfg.block.x = 256;
    rt.kernel(specs_for(kjit::Target{}, true, false).at(0))(s, cfg, ptrs[0], ptrs[1], 1000);
  }
  std::vector<kjit::op::Expected> reference(
      const std::vector<std::vector<float>>& in) const override {
    kjit::op::Expected e;
    for (size_t i = 0; i < in[0].size(); ++i) {
      e.index.push_back(static_cast<int64_t>(i));
      e.value.push_back(static_cast<double>(k_) * in[0][i]);
    }
    return {e};
  }

 private:
  int64_t k_;
};

}  // namespace

TEST_CASE("op registry: the built-in ops are there; a host app adds its own once") {
  const auto names = kjit::op::registered_ops();
  CHECK(std::find(names.begin(), names.end(), "group_norm") != names.end());
  CHECK(std::find(names.begin(), names.end(), "linear_gn_min") != names.end());
  CHECK_FALSE(kjit::op::find_op("group_norm").fields.empty());

  kjit::op::OpInfo scale{"app.scale", "y = k * x", "k (required)",
                         [](const kjit::op::Fields& f) -> std::unique_ptr<kjit::op::OpProblem> {
                           f.only({"k"});
                           return std::make_unique<ScaleProblem>(f.integer("k"));
                         }};
  kjit::op::register_op(scale);
  CHECK_KJIT_ERROR(kjit::op::register_op(scale), kjit::Errc::InvalidArgument);
  CHECK_KJIT_ERROR(kjit::op::register_op({"", "", "", scale.parse}), kjit::Errc::InvalidArgument);
  CHECK_KJIT_ERROR(kjit::op::register_op({"app.other", "", "", nullptr}),
                   kjit::Errc::InvalidArgument);
  const auto p =
      kjit::op::find_op("app.scale").parse(kjit::op::Fields("app.scale", {{"k", integer(3)}}));
  CHECK(p->describe() == "app.scale k=3");
  CHECK(p->specs_for(kjit::Target{}, true, false).at(0).instantiation() == "scale<float, 3>");
  CHECK(p->min_bytes() == 8000);
  CHECK(p->reference({{1.f, 2.f}, {}}).at(0).value == std::vector<double>{3.0, 6.0});
  try {
    kjit::op::find_op("app.scal");
    FAIL("found an unregistered op");
  } catch (const kjit::Error& e) {
    CHECK(e.code() == kjit::Errc::NotFound);
    CHECK(std::string(e.what()).find("app.scale") != std::string::npos);  // the known ones
  }
}

TEST_CASE("op registry: fields are read by kind, and every error names its field") {
  const kjit::op::Fields f("t", {{"n", integer(8)}, {"s", text("NHWC")}, {"d", dims({2, 3})}});
  CHECK(f.integer("n") == 8);
  CHECK(f.integer("absent", 5) == 5);
  CHECK(f.text("s", "") == "NHWC");
  CHECK(f.integers("d") == std::vector<int64_t>{2, 3});
  CHECK(f.flag("absent", true));
  CHECK(field_of([&] { f.integer("s"); }) == "s");
  CHECK(field_of([&] { f.integer("missing"); }) == "missing");
  CHECK(field_of([&] { f.flag("n", false); }) == "n");
  CHECK(field_of([&] { f.integers("n"); }) == "n");
  CHECK(field_of([&] { f.dtype("s", kjit::DType::F32); }) == "s");
  CHECK(field_of([&] { f.only({"n", "s"}); }) == "d");
  CHECK(field_of([&] { f.only({"n", "s", "d"}); }) == "<none>");
  FieldValue marked = integer(1);
  marked.problem = "1e400 is out of range";
  const kjit::op::Fields g("t", {{"n", marked}});
  CHECK(field_of([&] { g.integer("n", 3); }) == "n");
}

TEST_CASE("op registry: group_norm's registered specs_for is the op's own") {
  const kjit::op::Fields f("group_norm", {{"shape", dims({8, 256, 24, 24})},
                                          {"groups", integer(32)},
                                          {"dtype", text("bf16")},
                                          {"activation", text("gelu")}});
  const auto p = kjit::op::find_op("group_norm").parse(f);
  kjit::ops::GroupNormProblem want =
      kjit::ops::GroupNormProblem::from_shape({8, 256, 24, 24}, 32, kjit::DType::BF16);
  want.activation = kjit::Activation::GeluErf;
  CHECK(p->describe() == "group_norm " + want.describe());
  for (bool aligned : {true, false})
    for (bool tune : {false, true}) {
      INFO("aligned " << aligned << " autotune " << tune);
      kjit::ops::GroupNormOptions opt;
      opt.autotune = tune;
      const auto a = p->specs_for(kjit::Target{}, aligned, tune);
      const auto b = kjit::ops::group_norm_specs_for(want, kjit::Target{}, opt, aligned);
      REQUIRE(a.size() == b.size());
      for (size_t i = 0; i < a.size(); ++i) CHECK(a[i].instantiation() == b[i].instantiation());
    }
  // The bench case: x, weight, bias, y; the reference checks every element of y.
  const auto ops = p->operands();
  REQUIRE(ops.size() == 4);
  CHECK(ops[0].name == "x");
  CHECK(ops[3].output);
  CHECK(ops[3].elements == 8 * 256 * 24 * 24);
  CHECK(ops[1].dtype == kjit::DType::BF16);  // param_dtype defaults to dtype
  const kjit::op::Fields bad("group_norm", {{"shape", dims({8, 250, 4})}, {"groups", integer(32)}});
  CHECK(field_of([&] { kjit::op::find_op("group_norm").parse(bad); }) == "groups");
}

TEST_CASE("op registry: layer_norm and rms_norm are registered with the op's own specs_for") {
  auto flag = [](bool v) {
    FieldValue f;
    f.kind = Kind::Bool;
    f.flag = v;
    f.shown = v ? "true" : "false";
    return f;
  };
  const auto ln = kjit::op::find_op("layer_norm")
                      .parse(kjit::op::Fields("layer_norm", {{"rows", integer(64)},
                                                             {"width", integer(4096)},
                                                             {"dtype", text("bf16")},
                                                             {"residual", flag(true)}}));
  kjit::ops::LayerNormProblem want =
      kjit::ops::LayerNormProblem::layer_norm(64, 4096, kjit::DType::BF16);
  want.residual = true;
  CHECK(ln->describe() == want.describe());  // "<op> <problem>", the op named once
  CHECK(ln->describe().rfind("layer_norm bf16 rows=64 width=4096", 0) == 0);
  for (bool aligned : {true, false}) {
    const auto a = ln->specs_for(kjit::Target{}, aligned, false);
    const auto b = kjit::ops::layer_norm_specs_for(want, kjit::Target{}, {}, aligned);
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) CHECK(a[i].instantiation() == b[i].instantiation());
  }
  const auto ops = ln->operands();  // x, residual, weight, bias, y, sum
  REQUIRE(ops.size() == 6);
  CHECK(ops[4].name == "y");
  CHECK(ops[5].name == "sum");
  CHECK(ops[5].output);
  // RMSNorm has no bias field; LayerNorm rejects a width it cannot hold, naming the field.
  const auto& rms = kjit::op::find_op("rms_norm");
  CHECK(field_of([&] {
          rms.parse(kjit::op::Fields(
              "rms_norm", {{"rows", integer(1)}, {"width", integer(8)}, {"bias", flag(true)}}));
        }) == "bias");
  CHECK(field_of([&] {
          rms.parse(kjit::op::Fields("rms_norm", {{"rows", integer(1)}, {"width", integer(0)}}));
        }) == "width");
  CHECK(field_of([&] {
          rms.parse(kjit::op::Fields(
              "rms_norm",
              {{"rows", integer(1)}, {"width", integer(8)}, {"activation", text("swish")}}));
        }) == "activation");
  CHECK(rms.parse(kjit::op::Fields("rms_norm", {{"rows", integer(3)}, {"width", integer(5)}}))
            ->operands()
            .size() == 3);  // x, weight, y
}

TEST_CASE(
    "op registry: each built-in op lists autotuning's candidates, each pinned to its config") {
  const kjit::Target t = kjit::Target::for_cc(90);
  // LayerNorm: the op's candidates in its order; a candidate compiles its own config first,
  // whether autotuning is asked for or not, and never the other candidates.
  const auto ln =
      kjit::op::find_op("layer_norm")
          .parse(kjit::op::Fields("layer_norm", {{"rows", integer(1)}, {"width", integer(65536)}}));
  const auto lnp = kjit::ops::LayerNormProblem::layer_norm(1, 65536, kjit::DType::F32);
  const auto ln_cfgs = kjit::ops::layer_norm_candidates(lnp, t, true);
  const auto ln_cands = ln->candidates(t);
  REQUIRE(ln_cands.size() == ln_cfgs.size());
  REQUIRE(ln_cands.size() > 3);
  CHECK(ln_cfgs.front().describe() == kjit::ops::layer_norm_heuristic(lnp, t, true).describe());
  const size_t all = ln->specs_for(t, true, true).size();
  for (size_t i = 0; i < ln_cands.size(); ++i) {
    INFO("candidate " << i << ": " << ln_cands[i].config);
    CHECK(ln_cands[i].config == ln_cfgs[i].describe());
    CHECK(ln_cands[i].problem->describe() == ln->describe());
    const auto pinned = ln_cands[i].problem->specs_for(t, true, false);
    REQUIRE(!pinned.empty());
    CHECK(pinned.front().instantiation() ==
          kjit::ops::layer_norm_spec(lnp, ln_cfgs[i]).instantiation());
    CHECK(pinned.size() < all);
    const auto tuned = ln_cands[i].problem->specs_for(t, true, true);
    REQUIRE(tuned.size() == pinned.size());
    for (size_t k = 0; k < tuned.size(); ++k)
      CHECK(tuned[k].instantiation() == pinned[k].instantiation());
    CHECK(ln_cands[i].problem->candidates(t).size() == ln_cands.size());  // the same problem
  }

  // GroupNorm: a candidate compiles exactly its config's kernels (a split config adds the
  // one-kernel config a capture falls back to).
  const auto gn = kjit::op::find_op("group_norm")
                      .parse(kjit::op::Fields("group_norm", {{"shape", dims({2, 320, 64, 64})},
                                                             {"groups", integer(32)}}));
  auto gnp = kjit::ops::GroupNormProblem::from_shape({2, 320, 64, 64}, 32, kjit::DType::F32);
  gnp.activation = kjit::Activation::SiLU;
  const auto gn_cfgs = kjit::ops::group_norm_candidates(gnp, t, true);
  const auto gn_cands = gn->candidates(t);
  REQUIRE(gn_cands.size() == gn_cfgs.size());
  for (size_t i = 0; i < gn_cands.size(); ++i) {
    INFO("candidate " << i << ": " << gn_cands[i].config);
    CHECK(gn_cands[i].config == gn_cfgs[i].describe());
    const auto want = kjit::ops::group_norm_specs(gnp, gn_cfgs[i]);
    const auto got = gn_cands[i].problem->specs_for(t, true, true);
    REQUIRE(got.size() >= want.size());
    for (size_t k = 0; k < want.size(); ++k)
      CHECK(got[k].instantiation() == want[k].instantiation());
  }
  // An empty tensor has nothing to time.
  CHECK(kjit::op::find_op("group_norm")
            .parse(kjit::op::Fields("group_norm",
                                    {{"shape", dims({0, 64, 8})}, {"groups", integer(8)}}))
            ->candidates(t)
            .empty());

  // Linear-GN-min: the fused kernel's candidates, each compiling only its own config (for either
  // GEMM bias variant), with or without autotuning asked for.
  const auto lgm = kjit::op::find_op("linear_gn_min")
                       .parse(kjit::op::Fields("linear_gn_min", {{"M", integer(1024)},
                                                                 {"K", integer(8192)},
                                                                 {"N", integer(8192)},
                                                                 {"groups", integer(512)}}));
  kjit::ops::LinearGnMinProblem lp;
  lp.M = 1024, lp.K = 8192, lp.N = 8192, lp.G = 512;
  const auto lgm_cfgs = kjit::ops::gn_min_candidates(lp, t, true);
  const auto lgm_cands = lgm->candidates(t);
  REQUIRE(lgm_cands.size() == lgm_cfgs.size());
  REQUIRE(lgm_cands.size() > 1);
  for (size_t i = 0; i < lgm_cands.size(); ++i) {
    INFO("candidate " << i << ": " << lgm_cands[i].config);
    kjit::ops::LinearGnMinOptions opt;
    opt.config = lgm_cfgs[i];
    const auto want = kjit::ops::linear_gn_min_specs_for(lp, t, opt, true);
    for (bool tune : {false, true}) {
      const auto got = lgm_cands[i].problem->specs_for(t, true, tune);
      REQUIRE(got.size() == want.size());
      for (size_t k = 0; k < got.size(); ++k)
        CHECK(got[k].instantiation() == want[k].instantiation());
    }
    for (const kjit::ops::GnMinConfig& c : kjit::ops::linear_gn_min_configs_for(lp, t, opt, true)) {
      kjit::ops::GnMinConfig plain = c;
      plain.linear_bias = lgm_cfgs[i].linear_bias;
      CHECK(plain.describe() == lgm_cfgs[i].describe());  // only the bias variant differs
    }
  }

  // Nor does an empty row-norm problem.
  CHECK(kjit::op::find_op("rms_norm")
            .parse(kjit::op::Fields("rms_norm", {{"rows", integer(0)}, {"width", integer(64)}}))
            ->candidates(t)
            .empty());

  // A host app's op that lists none: kjit-bench --sweep refuses its problems.
  CHECK(ScaleProblem(3).candidates(t).empty());
}

// Each op's "config" field pins its problem as the candidate with that config is pinned: the same
// specializations, and the field stated again in fields_json (what a recording stores).
TEST_CASE("op registry: a problem's config field pins it to that config") {
  const kjit::Target t = kjit::Target::for_cc(90);
  const std::vector<std::pair<std::string, std::map<std::string, FieldValue>>> problems = {
      {"layer_norm", {{"rows", integer(1)}, {"width", integer(65536)}}},
      {"rms_norm", {{"rows", integer(4096)}, {"width", integer(768)}, {"dtype", text("bf16")}}},
      {"group_norm", {{"shape", dims({2, 320, 64, 64})}, {"groups", integer(32)}}},
      {"linear_gn_min",
       {{"M", integer(64)}, {"K", integer(256)}, {"N", integer(1024)}, {"groups", integer(32)}}}};
  for (const auto& entry : problems) {
    const std::string& op = entry.first;  // not a structured binding: lambdas capture it below
    const auto& fields = entry.second;
    const auto plain = kjit::op::find_op(op).parse(kjit::op::Fields(op, fields));
    const auto cands = plain->candidates(t);
    REQUIRE(cands.size() > 1);
    CHECK(plain->fields_json().find("\"config\"") == std::string::npos);
    for (const kjit::op::Candidate& c : cands) {
      INFO(op << " " << c.config);
      auto with = fields;
      with["config"] = text(c.config);
      const auto pinned = kjit::op::find_op(op).parse(kjit::op::Fields(op, with));
      const auto want = c.problem->specs_for(t, true, false);
      for (bool tune : {false, true}) {
        const auto got = pinned->specs_for(t, true, tune);
        REQUIRE(got.size() == want.size());
        for (size_t k = 0; k < got.size(); ++k)
          CHECK(got[k].instantiation() == want[k].instantiation());
      }
      CHECK(pinned->fields_json().find(",\"config\":\"" + c.config + "\"}") != std::string::npos);
      CHECK(c.problem->fields_json() == pinned->fields_json());
    }
    auto bad = fields;
    bad["config"] = text("threads=256 tiles=4");
    CHECK(field_of([&] { kjit::op::find_op(op).parse(kjit::op::Fields(op, bad)); }) == "config");
    bad["config"] = integer(256);
    CHECK(field_of([&] { kjit::op::find_op(op).parse(kjit::op::Fields(op, bad)); }) == "config");
    if (op != "linear_gn_min") continue;
    // Linear-GN-min's text may name the GEMM too (LinearGnMinInfo::pin()): the same kernels
    // (the GEMM compiles none), and the field written back whole.
    const std::string gemm =
        "; GEMM id=21 tile=20 stages=8 splitk=1 reduction=0 swizzle=0 cluster=0";
    auto with = fields;
    with["config"] = text(cands[0].config + gemm);
    const auto pinned = kjit::op::find_op(op).parse(kjit::op::Fields(op, with));
    CHECK(pinned->specs_for(t, true, false).front().instantiation() ==
          cands[0].problem->specs_for(t, true, false).front().instantiation());
    CHECK(pinned->fields_json().find(",\"config\":\"" + cands[0].config + gemm + "\"}") !=
          std::string::npos);
    bad["config"] = text(cands[0].config + "; GEMM id=21");
    CHECK(field_of([&] { kjit::op::find_op(op).parse(kjit::op::Fields(op, bad)); }) == "config");
  }
}
