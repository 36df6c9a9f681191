// The built-in ops the registry starts with: one line per op (kjit/op/registry.hpp).
#include "kjit/op/registry.hpp"

namespace kjit {
namespace ops {
op::OpInfo group_norm_op_info();
op::OpInfo linear_gn_min_op_info();
op::OpInfo layer_norm_op_info();
op::OpInfo rms_norm_op_info();
}  // namespace ops

const std::vector<op::OpInfo>& op::builtin_ops() {
  static const std::vector<OpInfo> ops = {
      ops::group_norm_op_info(),
      ops::linear_gn_min_op_info(),
      ops::layer_norm_op_info(),
      ops::rms_norm_op_info(),
  };
  return ops;
}

}  // namespace kjit
