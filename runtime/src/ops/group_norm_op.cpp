// GroupNorm's entry in the op registry (kjit/op/registry.hpp): its manifest fields and its
// specs_for, for kjit-precompile and the other tools.
#include <cctype>
#include <memory>
#include <optional>

#include "json_text.hpp"
#include "kjit/error.hpp"
#include "kjit/op/registry.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/reference.hpp"
#include "problem_json.hpp"

namespace kjit::ops {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

class GroupNormOpProblem : public op::OpProblem {
 public:
  explicit GroupNormOpProblem(const GroupNormProblem& p,
                              std::optional<GroupNormConfig> pinned = std::nullopt)
      : p_(p), pinned_(std::move(pinned)) {}
  std::string describe() const override { return "group_norm " + p_.describe(); }
  std::vector<Spec> specs_for(const Target& t, bool aligned, bool autotune) const override {
    if (p_.N == 0 || p_.S == 0) return {};  // an empty tensor: the runtime launches nothing
    return group_norm_specs_for(p_, t, options(autotune), aligned);
  }
  std::string fields_json() const override {
    const std::string json = group_norm_problem_json(p_);
    return pinned_ ? with_config(json, pinned_->describe()) : json;
  }
  std::vector<op::Candidate> candidates(const Target& t) const override {
    std::vector<op::Candidate> out;
    if (p_.N == 0 || p_.S == 0) return out;  // nothing to time
    for (const GroupNormConfig& c : group_norm_candidates(p_, t, true))
      out.push_back({c.describe(), std::make_unique<GroupNormOpProblem>(p_, c)});
    return out;
  }

  // x, [weight], [bias], y.
  std::vector<op::Operand> operands() const override {
    const int64_t n = p_.N * p_.C * p_.S;
    std::vector<op::Operand> out{{"x", p_.dtype, n, false, 1.f, 2.f}};
    if (p_.has_weight) out.push_back({"weight", p_.param_dtype, p_.C, false, 1.f, .5f});
    if (p_.has_bias) out.push_back({"bias", p_.param_dtype, p_.C, false, 0.f, .5f});
    out.push_back({"y", p_.dtype, n, true, 0.f, 0.f});
    return out;
  }
  std::string prepare(Runtime& rt, bool autotune, CUstream stream) const override {
    const GroupNormConfig c = prepare_group_norm(rt, p_, options(autotune));
    // Without it a split config inside a graph capture would run its one-kernel fallback.
    reserve_group_norm_workspace(rt, p_, options(autotune), stream);
    return c.describe();
  }
  void run(Runtime& rt, const std::vector<void*>& ptrs, bool autotune,
           CUstream stream) const override {
    const void* w = p_.has_weight ? ptrs[1] : nullptr;
    const void* b = p_.has_bias ? ptrs[p_.has_weight ? 2 : 1] : nullptr;
    group_norm(rt, p_, ptrs.front(), ptrs.back(), w, b, options(autotune), stream);
  }
  std::vector<op::Expected> reference(const std::vector<std::vector<float>>& in) const override {
    const float* w = p_.has_weight ? in[1].data() : nullptr;
    const float* b = p_.has_bias ? in[p_.has_weight ? 2 : 1].data() : nullptr;
    op::Expected e;
    e.value = kjit::reference::group_norm(p_, in.front(), w, b, options(false).eps);
    e.index.resize(e.value.size());
    for (size_t i = 0; i < e.index.size(); ++i) e.index[i] = static_cast<int64_t>(i);
    e.atol = e.rtol = p_.dtype == DType::F32 ? 1e-4 : 1e-2;
    return {e};
  }

 private:
  GroupNormOptions options(bool autotune) const {
    GroupNormOptions opt;
    opt.autotune = autotune;
    opt.config = pinned_;  // a forced config wins over autotuning in every op
    return opt;
  }
  GroupNormProblem p_;
  std::optional<GroupNormConfig> pinned_;  // a candidate's config (candidates())
};

// The problem's rule as the manifest names its field: N, C and S come from "shape".
[[noreturn]] void rethrow_as_field(const op::Fields& f, const Error& e) {
  f.bad(e.field() == "groups" ? "groups" : "shape", e.what());
}

std::unique_ptr<op::OpProblem> parse(const op::Fields& f) {
  f.only({"dtype", "param_dtype", "layout", "shape", "groups", "activation", "affine", "weight",
          "bias", "config"});
  const DType dtype = f.dtype("dtype", DType::F32);
  const DType param_dtype = f.dtype("param_dtype", dtype);
  Layout layout;
  Activation act;
  try {
    layout = parse_layout(lower(f.text("layout", "nchw")));
  } catch (const Error& e) {
    f.bad("layout", e.what());
  }
  const std::vector<int64_t> shape = f.integers("shape");
  const int64_t groups = f.integer("groups");
  try {
    act = parse_activation(f.text("activation", "silu"));
  } catch (const Error& e) {
    f.bad("activation", e.what());
  }
  const bool affine = f.flag("affine", true);
  const bool weight = f.flag("weight", affine), bias = f.flag("bias", affine);
  if (shape.size() < 2)
    f.bad("shape", "needs at least 2 dims (N, C), got " + std::to_string(shape.size()));
  GroupNormProblem p;
  try {
    p = GroupNormProblem::from_shape(shape, groups, dtype, layout);
  } catch (const Error& e) {
    f.bad("shape", e.what());
  }
  p.param_dtype = param_dtype;
  p.activation = act;
  p.has_weight = weight;
  p.has_bias = bias;
  if (groups <= 0) f.bad("groups", "must be > 0, got " + std::to_string(groups));
  if (p.C > 0 && p.C % groups != 0)
    f.bad("groups",
          "C = " + std::to_string(p.C) + " is not divisible by groups = " + std::to_string(groups));
  try {
    validate(p);
  } catch (const Error& e) {
    rethrow_as_field(f, e);
  }
  return std::make_unique<GroupNormOpProblem>(p, pinned_options<GroupNormOptions>(f).config);
}

}  // namespace

std::string group_norm_problem_json(const GroupNormProblem& p) {
  // The spatial dims as one (S): from_shape multiplies them, so [N, C, S] is the same problem.
  const bool nhwc = p.layout == Layout::NHWC;
  const std::string shape = "[" + std::to_string(p.N) + "," + std::to_string(nhwc ? p.S : p.C) +
                            "," + std::to_string(nhwc ? p.C : p.S) + "]";
  return detail::JsonObject()
      .add("op", "group_norm")
      .add("dtype", dtype_name(p.dtype))
      .add("param_dtype", dtype_name(p.param_dtype))
      .add("layout", layout_name(p.layout))
      .raw("shape", shape)
      .add("groups", p.groups)
      .add("activation", activation_name(p.activation))
      .add("weight", p.has_weight)
      .add("bias", p.has_bias)
      .text();
}

op::OpInfo group_norm_op_info() {
  return {"group_norm", "y = act(group_norm(x, groups, weight, bias, eps)), NCHW or NHWC",
          "shape (required: [N, C, *spatial] for nchw, [N, *spatial, C] for nhwc), groups "
          "(required), dtype (f32), param_dtype (= dtype), layout (nchw), activation (silu), "
          "affine (true), weight / bias (= affine), config (none: the heuristic's or "
          "autotuning's; else a config's text, pinned)",
          parse};
}

}  // namespace kjit::ops
