// The op registry: built-ins registered, a host app's op added, fields read with errors that
// name them, and the registered specs_for equal to the op's own.
#include <doctest/doctest.h>

#include "kjit/kjit.hpp"
#include "kjit/op/registry.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/ops/layer_norm.hpp"
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
  CHECK(ln->describe() == "layer_norm " + want.describe());
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
