// LayerNorm / RMSNorm cases of the shape list: F.layer_norm(x, [width], weight, bias) and
// F.rms_norm(x, [width], weight), no residual, no activation (what bench.py compares with). The
// op's registry entry gives the bench case (operands, float64 reference); the generic harness
// checks and times it (op_bench.cpp).
#include <iterator>
#include <memory>

#include "cases.hpp"
#include "kjit/ops/layer_norm.hpp"
#include "op_bench.hpp"
#include "op_fields.hpp"

namespace kjit_bench {

using kjit::ops::LayerNormProblem;

kjit::ops::LayerNormProblem layer_norm_problem(const Case& c) {
  if (c.shape.size() != 2)
    throw kjit::Error::invalid("shape", c.op + " needs shape [rows, width], got " +
                                            std::to_string(c.shape.size()) + " dims");
  const kjit::DType t = kjit::parse_dtype(c.dtype);
  return c.op == "rms_norm" ? LayerNormProblem::rms_norm(c.shape[0], c.shape[1], t)
                            : LayerNormProblem::layer_norm(c.shape[0], c.shape[1], t);
}

nlohmann::json run_layer_norm(kjit::Runtime& rt, CUstream stream, const Case& c,
                              const Settings& s) {
  layer_norm_problem(c);  // the case's own checks
  const nlohmann::json j = {
      {"op", c.op}, {"rows", c.shape[0]}, {"width", c.shape[1]}, {"dtype", c.dtype}};
  const auto p = kjit::op::find_op(c.op).parse(kjit::tools::op_fields(j, c.op));
  nlohmann::json row = run_problem(rt, stream, *p, s);
  row["op"] = c.op;
  row["shape"] = shape_text(c);
  row["dtype"] = c.dtype;
  return row;
}

namespace {

// The registry's problem with one config pinned: the harness checks and times that config (the
// operands, bytes and float64 reference stay the op's own).
class PinnedNorm : public kjit::op::OpProblem {
 public:
  PinnedNorm(const kjit::op::OpProblem& op, const LayerNormProblem& p,
             const kjit::ops::LayerNormConfig& c)
      : op_(op), p_(p) {
    opt_.config = c;
    // Where each operand sits among the op's, by name (-1: the problem has none).
    const std::vector<kjit::op::Operand> ops = op_.operands();
    for (size_t i = 0; i < ops.size(); ++i)
      for (size_t k = 0; k < std::size(kNames); ++k)
        if (ops[i].name == kNames[k]) slot_[k] = static_cast<int>(i);
  }
  std::string describe() const override { return op_.describe(); }
  std::vector<kjit::Spec> specs_for(const kjit::Target& t, bool aligned, bool) const override {
    return kjit::ops::layer_norm_specs_for(p_, t, opt_, aligned);
  }
  std::vector<kjit::op::Operand> operands() const override { return op_.operands(); }
  std::string prepare(kjit::Runtime& rt, bool, CUstream) const override {
    return kjit::ops::prepare_layer_norm(rt, p_, opt_).describe();
  }
  void run(kjit::Runtime& rt, const std::vector<void*>& v, bool, CUstream stream) const override {
    auto at = [&](int k) { return slot_[k] < 0 ? nullptr : v[static_cast<size_t>(slot_[k])]; };
    kjit::ops::layer_norm(rt, p_, at(0), at(1), at(4), at(5), at(2), at(3), opt_, stream);
  }
  std::vector<kjit::op::Expected> reference(
      const std::vector<std::vector<float>>& in) const override {
    return op_.reference(in);
  }
  double min_bytes() const override { return op_.min_bytes(); }

 private:
  static constexpr const char* kNames[] = {"x", "residual", "weight", "bias", "y", "sum"};
  const kjit::op::OpProblem& op_;
  LayerNormProblem p_;
  kjit::ops::LayerNormOptions opt_;
  int slot_[6] = {-1, -1, -1, -1, -1, -1};
};

}  // namespace

std::vector<nlohmann::json> sweep_layer_norm(kjit::Runtime& rt, CUstream stream, const Case& c,
                                             const Settings& s) {
  const LayerNormProblem p = layer_norm_problem(c);
  const nlohmann::json j = {
      {"op", c.op}, {"rows", c.shape[0]}, {"width", c.shape[1]}, {"dtype", c.dtype}};
  const std::unique_ptr<kjit::op::OpProblem> op =
      kjit::op::find_op(c.op).parse(kjit::tools::op_fields(j, c.op));
  kjit::op::ProblemBuffers b(rt, *op, kjit::op::ProblemBuffers::sets_for(*op, s.rotate_bytes), 42);
  std::vector<nlohmann::json> rows;
  for (const auto& cfg : kjit::ops::layer_norm_candidates(p, kjit::Target::of(rt), true)) {
    if (cfg.describe().find(s.sweep_filter) == std::string::npos) continue;
    try {
      nlohmann::json row = run_problem(rt, stream, PinnedNorm(*op, p, cfg), s, b);
      row["shape"] = shape_text(c);
      rows.push_back(std::move(row));
    } catch (const kjit::Error& e) {
      rows.push_back({{"shape", shape_text(c)}, {"config", cfg.describe()}, {"error", e.what()}});
    }
  }
  return rows;
}

}  // namespace kjit_bench
