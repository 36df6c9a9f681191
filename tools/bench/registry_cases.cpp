// Shape-list cases through the op registry: the registry's problem of a case, and a sweep of its
// candidates (OpProblem::candidates) on the generic harness.
#include <memory>

#include "cases.hpp"
#include "kjit/ops/linear_gn_min.hpp"
#include "op_bench.hpp"
#include "op_fields.hpp"

namespace kjit_bench {

// The case as its op's registry entry parses it (the case's own checks first).
std::unique_ptr<kjit::op::OpProblem> registered_problem(const Case& c) {
  nlohmann::json j;
  if (row_norm_op(c.op)) {
    layer_norm_problem(c);
    j = {{"op", c.op}, {"rows", c.shape[0]}, {"width", c.shape[1]}, {"dtype", c.dtype}};
  } else if (c.op == "linear_gn_min") {
    // The registry's problem takes no prepacked weight: fp32x3 splits W in every call.
    const kjit::ops::LinearGnMinProblem p = linear_gn_min_problem(c);
    j = {{"op", c.op}, {"precision", kjit::ops::precision_name(p.precision)},
         {"M", p.M},   {"K", p.K},
         {"N", p.N},   {"groups", p.G}};
  } else {
    throw kjit::Error::invalid("op", "case op '" + c.op + "' has no registry problem here");
  }
  return kjit::op::find_op(c.op).parse(kjit::tools::op_fields(j, c.op));
}

std::string registered_dtype(const Case& c) {
  return c.op == "linear_gn_min" && c.dtype == "fp32x3" ? "fp32x3-percall" : c.dtype;
}

std::vector<nlohmann::json> sweep_registered(kjit::Runtime& rt, CUstream stream, const Case& c,
                                             const Settings& s) {
  std::vector<nlohmann::json> rows = sweep_problem(rt, stream, *registered_problem(c), s);
  for (nlohmann::json& row : rows) {
    row["shape"] = shape_text(c);
    row["dtype"] = registered_dtype(c);
  }
  return rows;
}

}  // namespace kjit_bench
