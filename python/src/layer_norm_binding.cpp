#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>

#include "kjit/error.hpp"
#include "kjit/ops/layer_norm.hpp"
#include "ops.hpp"
#include "runtimes.hpp"
#include "tensors.hpp"

namespace kjit::py {

namespace {

struct LnCall {
  const char* op = "";
  ops::LayerNormProblem p;
  TensorArg x, residual, out, sum, weight, bias;
};

void require_dense(const char* op, const TensorArg& t) {
  if (!t.contiguous())
    bad_arg(op, t.name,
            "is not contiguous (strides " + t.strides_text() + " for shape " + t.shape_text() +
                "): call .contiguous() first");
}

// x's shape, dtype and layout for residual, out and sum.
TensorArg like_x(const LnCall& c, const char* name, nb::handle h, bool writable) {
  TensorArg t = tensor_arg(c.op, name, h, writable);
  require_same_shape(c.op, c.x, t);
  require_dense(c.op, t);
  return t;
}

TensorArg param(const LnCall& c, const char* name, nb::handle h) {
  TensorArg t = tensor_arg(c.op, name, h, false);
  require_vector(c.op, t, c.p.width);
  return t;
}

// Everything a CPU can check (x, residual, out, sum, weight, bias, the problem); then devices.
LnCall read_call(int kind, nb::handle x, nb::handle residual, nb::handle out, nb::handle sum,
                 nb::handle weight, nb::handle bias, int activation) {
  LnCall c;
  if (kind != 0 && kind != 1) throw Error::invalid("kind", "kjit: norm kind code must be 0 or 1");
  c.p.kind = kind == 0 ? ops::NormKind::LayerNorm : ops::NormKind::RMSNorm;
  c.op = kind == 0 ? "kjit.layer_norm" : "kjit.rms_norm";
  if (activation < 0 || activation > static_cast<int>(Activation::ReLU))
    bad_arg(c.op, "activation", "code " + std::to_string(activation) + " names no activation");
  c.p.activation = static_cast<Activation>(activation);
  c.x = tensor_arg(c.op, "x", x, false);
  if (c.x.ndim < 1) bad_arg(c.op, "x", "is a scalar; the norm needs a last dimension");
  require_dense(c.op, c.x);
  c.p.dtype = c.x.dtype;
  c.p.width = c.x.shape[c.x.ndim - 1];
  c.p.rows = c.p.width == 0 ? 0 : c.x.numel() / c.p.width;
  c.p.residual = !residual.is_none();
  if (c.p.residual) c.residual = like_x(c, "residual", residual, false);
  if (!out.is_none()) c.out = like_x(c, "out", out, true);
  // sum receives x + residual; without a residual nothing would write it (the C ABI refuses it).
  // Named as the Python argument it comes from (sum_out=).
  if (!sum.is_none() && !c.p.residual)
    bad_arg(c.op, "sum_out",
            "is given without a residual: it receives x + residual, so it needs one");
  if (!sum.is_none()) c.sum = like_x(c, "sum_out", sum, true);
  c.p.has_weight = !weight.is_none();
  c.p.has_bias = !bias.is_none();
  c.p.param_dtype = c.p.dtype;
  if (c.p.has_weight) c.weight = param(c, "weight", weight);
  if (c.p.has_bias) c.bias = param(c, "bias", bias);
  if (c.p.has_weight && c.p.has_bias && c.weight.dtype != c.bias.dtype)
    bad_arg(c.op, "bias", "must have weight's dtype (kjit reads both as one parameter dtype)");
  if (c.p.has_weight)
    c.p.param_dtype = c.weight.dtype;
  else if (c.p.has_bias)
    c.p.param_dtype = c.bias.dtype;
  ops::validate(c.p);
  require_cuda(c.op, c.x);
  const int dev = c.x.device_id;
  if (c.p.residual) require_cuda(c.op, c.residual, dev);
  if (!out.is_none()) require_cuda(c.op, c.out, dev);
  if (!sum.is_none()) require_cuda(c.op, c.sum, dev);
  if (c.p.has_weight) require_cuda(c.op, c.weight, dev);
  if (c.p.has_bias) require_cuda(c.op, c.bias, dev);
  return c;
}

void layer_norm(int kind, nb::handle x, nb::handle residual, nb::handle out, nb::handle sum,
                nb::handle weight, nb::handle bias, double eps, int activation, bool autotune,
                uintptr_t stream, nb::handle config) {
  const LnCall c = read_call(kind, x, residual, out, sum, weight, bias, activation);
  if (out.is_none()) bad_arg(c.op, "out", "is required here (the Python function allocates it)");
  if (c.p.residual && sum.is_none())
    bad_arg(c.op, "sum_out", "is required with a residual (the Python function allocates it)");
  const auto o = call_options<ops::LayerNormOptions>(c.op, eps, autotune, config);
  // An empty tensor (PyTorch's data pointer is then null) is nothing to do, as in F.layer_norm.
  // A pinned config must still fit the problem, as the C++ and C calls check it (prepare builds
  // nothing for no rows; read_call refused a width of 0).
  if (c.x.numel() == 0) {
    if (o.config) ops::prepare_layer_norm(runtime_for(c.x.device_id), c.p, o);
    return;
  }
  Runtime& rt = runtime_for(c.x.device_id);  // ops::layer_norm checks eps and the pointers
  nb::gil_scoped_release release;            // a first call compiles: let other Python threads run
  ops::layer_norm(rt, c.p, c.x.data, c.residual.data, c.out.data, c.sum.data, c.weight.data,
                  c.bias.data, o, as_stream(stream));
}

// Compiles and loads what a call like this launches, and gives `stream` the workspace its plan
// needs (a cooperative one), so that a call captured into a CUDA graph on that stream compiles
// and allocates nothing. `out` and `sum` (or None) are checked as the call checks them, before
// the runtime is made.
std::string prepare(int kind, nb::handle x, nb::handle residual, nb::handle out, nb::handle sum,
                    nb::handle weight, nb::handle bias, double eps, int activation, bool autotune,
                    uintptr_t stream, nb::handle config) {
  const LnCall c = read_call(kind, x, residual, out, sum, weight, bias, activation);
  const auto o = call_options<ops::LayerNormOptions>(c.op, eps, autotune, config);
  Runtime& rt = runtime_for(c.x.device_id);
  nb::gil_scoped_release release;
  const ops::LayerNormConfig cfg = ops::prepare_layer_norm(rt, c.p, o);
  ops::reserve_layer_norm_workspace(rt, c.p, o, as_stream(stream));
  return cfg.describe();
}

}  // namespace

void bind_layer_norm(nb::module_& m) {
  m.def("layer_norm", &layer_norm, nb::arg("kind"), nb::arg("x").none(), nb::arg("residual").none(),
        nb::arg("out").none(), nb::arg("sum").none(), nb::arg("weight").none(),
        nb::arg("bias").none(), nb::arg("eps"), nb::arg("activation"), nb::arg("autotune"),
        nb::arg("stream"), nb::arg("config").none() = nb::none());
  m.def("prepare_layer_norm", &prepare, nb::arg("kind"), nb::arg("x").none(),
        nb::arg("residual").none(), nb::arg("out").none(), nb::arg("sum").none(),
        nb::arg("weight").none(), nb::arg("bias").none(), nb::arg("eps"), nb::arg("activation"),
        nb::arg("autotune"), nb::arg("stream"), nb::arg("config").none() = nb::none());
}

}  // namespace kjit::py
