// LayerNorm's and RMSNorm's entries in the op registry (kjit/op/registry.hpp): their manifest
// fields, their specs_for, and the bench case the generic harness runs.
#include <cctype>
#include <memory>
#include <optional>

#include "json_text.hpp"
#include "kjit/error.hpp"
#include "kjit/op/registry.hpp"
#include "kjit/ops/layer_norm.hpp"
#include "kjit/ops/layer_norm_reference.hpp"
#include "problem_json.hpp"

namespace kjit::ops {
namespace {

class LayerNormOpProblem : public op::OpProblem {
 public:
  explicit LayerNormOpProblem(const LayerNormProblem& p,
                              std::optional<LayerNormConfig> pinned = std::nullopt)
      : p_(p), pinned_(std::move(pinned)) {}
  // The problem's own description starts with the op's name.
  std::string describe() const override { return p_.describe(); }
  std::vector<Spec> specs_for(const Target& t, bool aligned, bool autotune) const override {
    return layer_norm_specs_for(p_, t, options(autotune), aligned);
  }
  std::string fields_json() const override {
    const std::string json = layer_norm_problem_json(p_);
    return pinned_ ? with_config(json, pinned_->describe()) : json;
  }
  std::vector<op::Candidate> candidates(const Target& t) const override {
    std::vector<op::Candidate> out;
    if (p_.rows == 0) return out;  // nothing to time
    for (const LayerNormConfig& c : layer_norm_candidates(p_, t, true))
      out.push_back({c.describe(), std::make_unique<LayerNormOpProblem>(p_, c)});
    return out;
  }

  // x, [residual], [weight], [bias], y, [sum].
  std::vector<op::Operand> operands() const override {
    const int64_t n = p_.rows * p_.width;
    std::vector<op::Operand> out{{"x", p_.dtype, n, false, 0.5f, 2.f}};
    if (p_.residual) out.push_back({"residual", p_.dtype, n, false, 0.f, 1.f});
    if (p_.has_weight) out.push_back({"weight", p_.param_dtype, p_.width, false, 1.f, .5f});
    if (p_.has_bias) out.push_back({"bias", p_.param_dtype, p_.width, false, 0.f, .5f});
    out.push_back({"y", p_.dtype, n, true, 0.f, 0.f});
    if (p_.residual) out.push_back({"sum", p_.dtype, n, true, 0.f, 0.f});
    return out;
  }
  std::string prepare(Runtime& rt, bool autotune, CUstream stream) const override {
    const LayerNormConfig c = prepare_layer_norm(rt, p_, options(autotune));
    // Without it a cooperative config inside a graph capture would run its fallback.
    reserve_layer_norm_workspace(rt, p_, options(autotune), stream);
    return c.describe();
  }
  void run(Runtime& rt, const std::vector<void*>& v, bool autotune,
           CUstream stream) const override {
    const Slots s = slots();
    layer_norm(rt, p_, v[0], at(v, s.residual), v[s.y], at(v, s.sum), at(v, s.weight),
               at(v, s.bias), options(autotune), stream);
  }
  std::vector<op::Expected> reference(const std::vector<std::vector<float>>& in) const override {
    const Slots s = slots();
    auto values = [&](int i) { return i < 0 ? nullptr : in[static_cast<size_t>(i)].data(); };
    const reference::LayerNormResult r = reference::layer_norm(
        p_, in[0], s.residual < 0 ? nullptr : &in[static_cast<size_t>(s.residual)],
        values(s.weight), values(s.bias), LayerNormOptions{}.eps);
    const double tol = p_.dtype == DType::F32 ? 1e-4 : 1e-2;
    std::vector<op::Expected> out{expected(r.y, tol)};
    if (p_.residual) out.push_back(expected({r.sum.begin(), r.sum.end()}, 0));  // exact
    return out;
  }

 private:
  struct Slots {
    int residual = -1, weight = -1, bias = -1, y = 0, sum = -1;
  };
  Slots slots() const {
    Slots s;
    int i = 1;
    if (p_.residual) s.residual = i++;
    if (p_.has_weight) s.weight = i++;
    if (p_.has_bias) s.bias = i++;
    s.y = i++;
    if (p_.residual) s.sum = i;
    return s;
  }
  static void* at(const std::vector<void*>& v, int i) {
    return i < 0 ? nullptr : v[static_cast<size_t>(i)];
  }
  LayerNormOptions options(bool autotune) const {
    LayerNormOptions opt;
    opt.autotune = autotune;
    opt.config = pinned_;  // a forced config wins over autotuning in every op
    return opt;
  }
  static op::Expected expected(std::vector<double> values, double tol) {
    op::Expected e;
    e.value = std::move(values);
    for (size_t i = 0; i < e.value.size(); ++i) e.index.push_back(static_cast<int64_t>(i));
    e.atol = e.rtol = tol;
    return e;
  }
  LayerNormProblem p_;
  std::optional<LayerNormConfig> pinned_;  // a candidate's config (candidates())
};

std::unique_ptr<op::OpProblem> parse(const op::Fields& f, NormKind kind) {
  const bool rms = kind == NormKind::RMSNorm;
  if (rms)
    f.only({"dtype", "param_dtype", "rows", "width", "weight", "residual", "activation", "config"});
  else
    f.only({"dtype", "param_dtype", "rows", "width", "weight", "bias", "affine", "residual",
            "activation", "config"});
  LayerNormProblem p;
  p.kind = kind;
  p.dtype = f.dtype("dtype", DType::F32);
  p.param_dtype = f.dtype("param_dtype", p.dtype);
  p.rows = f.integer("rows");
  p.width = f.integer("width");
  const bool affine = f.flag("affine", true);
  p.has_weight = f.flag("weight", affine);
  p.has_bias = !rms && f.flag("bias", affine);
  p.residual = f.flag("residual", false);
  try {
    p.activation = parse_activation(f.text("activation", "none"));
    validate(p);
  } catch (const Error& e) {
    if (e.code() != Errc::InvalidArgument) throw;
    f.bad(e.field().empty() ? "activation" : e.field(), e.what());
  }
  return std::make_unique<LayerNormOpProblem>(p, pinned_options<LayerNormOptions>(f).config);
}

const char* const kFields =
    "rows, width (required), dtype (f32), param_dtype (= dtype, or f32), weight (true), "
    "residual (false: normalize x + residual and write the sum), activation (none), config "
    "(none: the heuristic's or autotuning's; else a config's text, pinned)";

}  // namespace

std::string layer_norm_problem_json(const LayerNormProblem& p) {
  detail::JsonObject o;
  o.add("op", norm_kind_name(p.kind))
      .add("dtype", dtype_name(p.dtype))
      .add("param_dtype", dtype_name(p.param_dtype))
      .add("rows", p.rows)
      .add("width", p.width)
      .add("weight", p.has_weight);
  if (p.kind == NormKind::LayerNorm) o.add("bias", p.has_bias);  // RMSNorm has no bias field
  return o.add("residual", p.residual).add("activation", activation_name(p.activation)).text();
}

op::OpInfo layer_norm_op_info() {
  return {"layer_norm", "y = act(layer_norm(x [+ residual], [width], weight, bias, eps))",
          std::string(kFields) + ", bias (true), affine (true: weight and bias)",
          [](const op::Fields& f) { return parse(f, NormKind::LayerNorm); }};
}

op::OpInfo rms_norm_op_info() {
  return {"rms_norm", "y = act(rms_norm(x [+ residual], [width], weight, eps))", kFields,
          [](const op::Fields& f) { return parse(f, NormKind::RMSNorm); }};
}

}  // namespace kjit::ops
