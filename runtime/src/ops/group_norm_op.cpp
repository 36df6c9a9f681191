// GroupNorm's entry in the op registry (kjit/op/registry.hpp): its manifest fields and its
// specs_for, for kjit-precompile and the other tools.
#include <cctype>

#include "kjit/error.hpp"
#include "kjit/op/registry.hpp"
#include "kjit/ops/group_norm.hpp"

namespace kjit::ops {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

class GroupNormOpProblem : public op::OpProblem {
 public:
  explicit GroupNormOpProblem(const GroupNormProblem& p) : p_(p) {}
  std::string describe() const override { return "group_norm " + p_.describe(); }
  std::vector<Spec> specs_for(const Target& t, bool aligned, bool autotune) const override {
    if (p_.N == 0 || p_.S == 0) return {};  // an empty tensor: the runtime launches nothing
    GroupNormOptions opt;
    opt.autotune = autotune;
    return group_norm_specs_for(p_, t, opt, aligned);
  }

 private:
  GroupNormProblem p_;
};

// The problem's rule as the manifest names its field: N, C and S come from "shape".
[[noreturn]] void rethrow_as_field(const op::Fields& f, const Error& e) {
  f.bad(e.field() == "groups" ? "groups" : "shape", e.what());
}

std::unique_ptr<op::OpProblem> parse(const op::Fields& f) {
  f.only({"dtype", "param_dtype", "layout", "shape", "groups", "activation", "affine", "weight",
          "bias"});
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
  return std::make_unique<GroupNormOpProblem>(p);
}

}  // namespace

op::OpInfo group_norm_op_info() {
  return {"group_norm", "y = act(group_norm(x, groups, weight, bias, eps)), NCHW or NHWC",
          "shape (required: [N, C, *spatial] for nchw, [N, *spatial, C] for nhwc), groups "
          "(required), dtype (f32), param_dtype (= dtype), layout (nchw), activation (silu), "
          "affine (true), weight / bias (= affine)",
          parse};
}

}  // namespace kjit::ops
