// LayerNorm / RMSNorm cases of the shape list: F.layer_norm(x, [width], weight, bias) and
// F.rms_norm(x, [width], weight), no residual, no activation (what bench.py compares with). The
// op's registry entry gives the bench case (operands, float64 reference); the generic harness
// checks and times it (op_bench.cpp).
#include "cases.hpp"
#include "kjit/ops/layer_norm.hpp"
#include "op_bench.hpp"

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
  nlohmann::json row = run_problem(rt, stream, *registered_problem(c), s);
  row["op"] = c.op;
  row["shape"] = shape_text(c);
  row["dtype"] = c.dtype;
  return row;
}

}  // namespace kjit_bench
