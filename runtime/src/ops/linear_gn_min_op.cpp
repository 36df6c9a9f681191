// Linear -> GroupNorm -> min -> + bias's entry in the op registry (kjit/op/registry.hpp). The
// cuBLASLt GEMM needs no NVRTC compile; specs_for names the fused kernel's specializations, and
// `aligned` is the output pointer's 16-byte alignment (x, weight and the biases only change the
// GEMM's algorithm).
#include <cctype>
#include <cmath>
#include <memory>
#include <optional>

#include "json_text.hpp"
#include "kjit/error.hpp"
#include "kjit/op/registry.hpp"
#include "kjit/ops/linear_gn_min.hpp"
#include "kjit/reference.hpp"
#include "problem_json.hpp"

namespace kjit::ops {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

class LinearGnMinOpProblem : public op::OpProblem {
 public:
  LinearGnMinOpProblem(const LinearGnMinProblem& p, LinearBiasAdd bias_add,
                       std::optional<GnMinConfig> pinned = std::nullopt,
                       std::optional<GemmAlgo> gemm = std::nullopt)
      : p_(p), bias_add_(bias_add), pinned_(std::move(pinned)), gemm_(gemm) {}
  std::string describe() const override { return "linear_gn_min " + p_.describe(); }
  std::vector<Spec> specs_for(const Target& t, bool aligned, bool autotune) const override {
    return linear_gn_min_specs_for(p_, t, options(autotune), aligned);
  }
  std::string fields_json() const override {
    const std::string json = linear_gn_min_problem_json(p_, bias_add_);
    if (!pinned_) return json;
    return with_config(json, pinned_->describe() + (gemm_ ? "; GEMM " + gemm_->describe() : ""));
  }
  // The fused kernel's candidates, each after the heuristic's GEMM (autotuning also times the
  // GEMM's algorithms and, for bias_add auto, who adds the bias). Described with the bias
  // variant an untuned plan builds first (the plan follows its GEMM: prepare() says which ran).
  std::vector<op::Candidate> candidates(const Target& t) const override {
    const bool adds_bias = linear_gn_min_kernel_adds_bias(bias_add_, false, p_.precision).front();
    std::vector<op::Candidate> out;
    for (GnMinConfig c : gn_min_candidates(p_, t, true)) {
      c.linear_bias = adds_bias;
      // A pinned GEMM stays pinned in every candidate (a sweep times the kernel's configs on it).
      out.push_back(
          {c.describe(), std::make_unique<LinearGnMinOpProblem>(p_, bias_add_, c, gemm_)});
    }
    return out;
  }

  // x, weight, linear_bias, gamma, beta, bias, out; nn.Linear's init scale keeps Y = O(1).
  std::vector<op::Operand> operands() const override {
    const DType ab = p_.precision == Precision::Bf16Inputs ? DType::BF16 : DType::F32;
    const float ws = 1.f / std::sqrt(static_cast<float>(p_.K));
    return {{"x", ab, p_.M * p_.K, false, 0.f, 1.f},
            {"weight", ab, p_.N * p_.K, false, 0.f, ws},
            {"linear_bias", ab, p_.N, false, 0.f, ws},
            {"gamma", DType::F32, p_.N, false, 1.f, .5f},
            {"beta", DType::F32, p_.N, false, 0.f, .5f},
            {"bias", DType::F32, p_.N, false, 0.f, 1.f},
            {"out", DType::F32, p_.M * p_.N, true, 0.f, 0.f}};
  }
  std::string prepare(Runtime& rt, bool autotune, CUstream stream) const override {
    const LinearGnMinInfo info = prepare_linear_gn_min(rt, p_, options(autotune));
    reserve_linear_gn_min_workspace(rt, p_, stream);
    return info.describe();  // pin() first: what a problem's "config" field takes
  }
  void run(Runtime& rt, const std::vector<void*>& v, bool autotune,
           CUstream stream) const override {
    auto f = [&](size_t i) { return static_cast<const float*>(v[i]); };
    linear_gn_min(rt, p_, v[0], v[1], f(2), f(3), f(4), f(5), static_cast<float*>(v[6]),
                  options(autotune), stream);
  }
  // Four rows (first, last, middle, third): the float64 GEMM of every row would take minutes.
  std::vector<op::Expected> reference(const std::vector<std::vector<float>>& in) const override {
    const std::vector<int64_t> rows = {0, p_.M - 1, p_.M / 2, p_.M / 3};
    const std::vector<double> mins =
        kjit::reference::linear_gn_min_rows(p_, in[0].data(), in[1].data(), in[2].data(),
                                            in[3].data(), in[4].data(), options(false).eps, rows);
    op::Expected e;
    for (size_t r = 0; r < rows.size(); ++r)
      for (int64_t c = 0; c < p_.N; ++c) {
        e.index.push_back(c * p_.M + rows[r]);  // out is [N, M]
        e.value.push_back(mins[r] + in[5][static_cast<size_t>(c)]);
      }
    // Split precision is held to strict FP32's bound (docs/OPS.md, "Split precision").
    const bool fp32_class = p_.precision == Precision::Fp32 || p_.precision == Precision::Fp32x3;
    e.atol = fp32_class ? 1e-4 : 5e-3;
    e.rtol = 0;
    return {e};
  }

 private:
  LinearGnMinOptions options(bool autotune) const {
    LinearGnMinOptions opt;
    opt.bias_add = bias_add_;
    opt.autotune = autotune;
    opt.config = pinned_;  // a forced config wins over autotuning in every op
    opt.gemm = gemm_;
    return opt;
  }
  LinearGnMinProblem p_;
  LinearBiasAdd bias_add_;
  std::optional<GnMinConfig> pinned_;  // a candidate's config (candidates()), or "config"'s
  std::optional<GemmAlgo> gemm_;       // "config"'s "; GEMM <algo>"
};

Precision precision_field(const op::Fields& f, DType dtype) {
  const bool bf16 = dtype == DType::BF16;
  const std::string prec = lower(f.text("precision", bf16 ? "bf16-inputs" : "fp32"));
  Precision p = Precision::Fp32;
  try {
    p = parse_precision(prec);
  } catch (const Error& e) {
    f.bad("precision", e.what());
  }
  if (bf16 != (p == Precision::Bf16Inputs))
    f.bad("precision", "'" + prec + "' does not go with dtype " + dtype_name(dtype) +
                           " (bf16 inputs are precision bf16-inputs)");
  return p;
}

std::unique_ptr<op::OpProblem> parse(const op::Fields& f) {
  f.only({"dtype", "precision", "M", "K", "N", "groups", "bias_add", "config"});
  LinearBiasAdd bias_add = LinearBiasAdd::Auto;
  try {
    bias_add = parse_bias_add(lower(f.text("bias_add", "auto")));
  } catch (const Error& e) {
    f.bad("bias_add", e.what());
  }
  const DType dtype = f.dtype("dtype", DType::F32);
  if (dtype != DType::F32 && dtype != DType::BF16)
    f.bad("dtype", std::string("'") + dtype_name(dtype) +
                       "' is not f32 or bf16 (bf16: x and weight given as bf16)");
  LinearGnMinProblem p;
  p.precision = precision_field(f, dtype);
  p.M = f.integer("M");
  p.K = f.integer("K");
  p.N = f.integer("N");
  p.G = f.integer("groups");
  for (const auto& [name, v] :
       {std::pair<const char*, int64_t>{"M", p.M}, {"K", p.K}, {"N", p.N}, {"groups", p.G}})
    if (v < 1) f.bad(name, "must be >= 1, got " + std::to_string(v));
  if (p.N % p.G != 0)
    f.bad("groups",
          "N = " + std::to_string(p.N) + " is not divisible by groups = " + std::to_string(p.G));
  LinearGnMinOptions opt;
  opt.bias_add = bias_add;
  try {
    validate(p, opt);  // the op's own rules, also those of bias_add for the precision
  } catch (const Error& e) {
    f.bad(e.field() == "G" ? "groups" : e.field(), e.what());  // G is the manifest's "groups"
  }
  // The config, and its GEMM when the text names one.
  const auto pinned = pinned_options<LinearGnMinOptions>(f);
  return std::make_unique<LinearGnMinOpProblem>(p, bias_add, pinned.config, pinned.gemm);
}

}  // namespace

std::string linear_gn_min_problem_json(const LinearGnMinProblem& p, LinearBiasAdd bias_add) {
  const bool bf16 = p.precision == Precision::Bf16Inputs;  // the manifest's dtype bf16
  return detail::JsonObject()
      .add("op", "linear_gn_min")
      .add("dtype", bf16 ? "bf16" : "f32")
      .add("precision", precision_name(p.precision))
      .add("M", p.M)
      .add("K", p.K)
      .add("N", p.N)
      .add("groups", p.G)
      .add("bias_add", bias_add_name(bias_add))
      .text();
}

op::OpInfo linear_gn_min_op_info() {
  return {"linear_gn_min", "out = min(group_norm(x W^T + linear_bias), dim=1) + bias",
          "M, K, N, groups (required), dtype (f32; bf16: x and weight given as bf16), precision "
          "(fp32, tf32, bf16-inputs or fp32x3), bias_add (auto, epilogue or kernel), config "
          "(none: the heuristic's or autotuning's; else the fused kernel's config text, pinned)",
          parse};
}

}  // namespace kjit::ops
