#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>

#include "kjit/error.hpp"
#include "kjit/ops/group_norm.hpp"
#include "ops.hpp"
#include "runtimes.hpp"
#include "tensors.hpp"

namespace kjit::py {

namespace {

constexpr const char* kOp = "kjit.group_norm";

struct GnCall {
  ops::GroupNormProblem p;
  TensorArg x, out, weight, bias;
};

Activation activation_of(int a) {
  if (a < 0 || a > static_cast<int>(Activation::ReLU))
    bad_arg(kOp, "activation", "code " + std::to_string(a) + " names no kjit activation");
  return static_cast<Activation>(a);
}

// The layout from x's strides: contiguous is NCHW, PyTorch's channels_last (any rank) is NHWC.
ops::Layout layout_of(const TensorArg& x) {
  if (x.contiguous()) return ops::Layout::NCHW;
  if (x.channels_last()) return ops::Layout::NHWC;
  bad_arg(kOp, x.name,
          "is neither contiguous (NCHW) nor channels_last (NHWC): strides " + x.strides_text() +
              " for shape " + x.shape_text() + "; call .contiguous() first");
}

void read_params(GnCall& c, nb::handle weight, nb::handle bias) {
  const int64_t C = c.p.C;
  c.p.has_weight = !weight.is_none();
  c.p.has_bias = !bias.is_none();
  if (c.p.has_weight) {
    c.weight = tensor_arg(kOp, "weight", weight, false);
    require_vector(kOp, c.weight, C);
    c.p.param_dtype = c.weight.dtype;
  }
  if (c.p.has_bias) {
    c.bias = tensor_arg(kOp, "bias", bias, false);
    require_vector(kOp, c.bias, C);
    if (c.p.has_weight && c.bias.dtype != c.weight.dtype)
      bad_arg(kOp, "bias", "must have weight's dtype (kjit reads both as one parameter dtype)");
    c.p.param_dtype = c.bias.dtype;
  }
  if (!c.p.has_weight && !c.p.has_bias) c.p.param_dtype = c.p.dtype;
}

// Everything a CPU can check, in order: x, out, weight and bias, the problem; then the devices.
GnCall read_call(nb::handle x, nb::handle out, nb::handle weight, nb::handle bias, int64_t groups,
                 int activation) {
  GnCall c;
  c.x = tensor_arg(kOp, "x", x, false);
  if (c.x.ndim < 2)
    bad_arg(kOp, "x", "has shape " + c.x.shape_text() + "; GroupNorm needs [N, C, *] (>= 2 dims)");
  c.p.dtype = c.x.dtype;
  c.p.layout = layout_of(c.x);
  c.p.N = c.x.shape[0];
  c.p.C = c.x.shape[1];
  c.p.S = 1;
  for (int i = 2; i < c.x.ndim; ++i)  // only an empty x can get here with an overflow
    if (__builtin_mul_overflow(c.p.S, c.x.shape[i], &c.p.S))
      bad_arg(kOp, "x", "has shape " + c.x.shape_text() + ": its spatial size overflows 64 bits");
  c.p.groups = groups;
  c.p.activation = activation_of(activation);
  if (!out.is_none()) {
    c.out = tensor_arg(kOp, "out", out, true);
    require_same_shape(kOp, c.x, c.out);
    const bool same_layout =
        c.p.layout == ops::Layout::NCHW ? c.out.contiguous() : c.out.channels_last();
    if (!same_layout)
      bad_arg(kOp, "out",
              std::string("must have x's layout (") + ops::layout_name(c.p.layout) + "): strides " +
                  c.out.strides_text());
  }
  read_params(c, weight, bias);
  ops::validate(c.p);
  require_cuda(kOp, c.x);
  const int dev = c.x.device_id;
  if (!out.is_none()) require_cuda(kOp, c.out, dev);
  if (c.p.has_weight) require_cuda(kOp, c.weight, dev);
  if (c.p.has_bias) require_cuda(kOp, c.bias, dev);
  return c;
}

void group_norm(nb::handle x, nb::handle out, nb::handle weight, nb::handle bias, int64_t groups,
                double eps, int activation, bool autotune, uintptr_t stream, nb::handle config) {
  const GnCall c = read_call(x, out, weight, bias, groups, activation);
  if (out.is_none()) bad_arg(kOp, "out", "is required here (kjit.group_norm allocates it)");
  const auto o = call_options<ops::GroupNormOptions>(kOp, eps, autotune, config);
  // An empty tensor (PyTorch's data pointer is then null) is nothing to do, as in F.group_norm.
  // A pinned config must still fit the problem, as the C++ and C calls check it (prepare builds
  // nothing for an empty problem).
  if (c.x.numel() == 0) {
    if (o.config) ops::prepare_group_norm(runtime_for(c.x.device_id), c.p, o);
    return;
  }
  Runtime& rt = runtime_for(c.x.device_id);  // ops::group_norm checks eps and the pointers
  nb::gil_scoped_release release;            // a first call compiles: let other Python threads run
  ops::group_norm(rt, c.p, c.x.data, c.out.data, c.weight.data, c.bias.data, o, as_stream(stream));
}

// Compiles and loads what a call like this launches, and gives `stream` the workspace its plan
// needs, so that a call captured into a CUDA graph on that stream compiles and allocates nothing.
// `out` (or None) is checked as the call checks it, before the runtime is made.
std::string prepare(nb::handle x, nb::handle out, nb::handle weight, nb::handle bias,
                    int64_t groups, double eps, int activation, bool autotune, uintptr_t stream,
                    nb::handle config) {
  const GnCall c = read_call(x, out, weight, bias, groups, activation);
  const auto o = call_options<ops::GroupNormOptions>(kOp, eps, autotune, config);
  ops::validate_call(c.p, c.x.data, c.x.data, c.weight.data, c.bias.data, o.eps);
  Runtime& rt = runtime_for(c.x.device_id);
  nb::gil_scoped_release release;  // NVRTC and autotuning take long: let other threads run
  const ops::GroupNormConfig cfg = ops::prepare_group_norm(rt, c.p, o);
  ops::reserve_group_norm_workspace(rt, c.p, o, as_stream(stream));
  return cfg.describe();
}

}  // namespace

void bind_group_norm(nb::module_& m) {
  m.def("group_norm", &group_norm, nb::arg("x").none(), nb::arg("out").none(),
        nb::arg("weight").none(), nb::arg("bias").none(), nb::arg("groups"), nb::arg("eps"),
        nb::arg("activation"), nb::arg("autotune"), nb::arg("stream"),
        nb::arg("config").none() = nb::none());
  m.def("prepare_group_norm", &prepare, nb::arg("x").none(), nb::arg("out").none(),
        nb::arg("weight").none(), nb::arg("bias").none(), nb::arg("groups"), nb::arg("eps"),
        nb::arg("activation"), nb::arg("autotune"), nb::arg("stream"),
        nb::arg("config").none() = nb::none());
  m.def("parse_activation",
        [](const std::string& name) { return static_cast<int>(parse_activation(name)); });
}

}  // namespace kjit::py
