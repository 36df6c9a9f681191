#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>

#include <cstdint>
#include <memory>
#include <string>

#include "kjit/error.hpp"
#include "kjit/ops/linear_gn_min.hpp"
#include "ops.hpp"
#include "runtimes.hpp"
#include "tensors.hpp"

namespace kjit::py {

namespace {

constexpr const char* kOp = "kjit.linear_gn_min";

// kjit.LinearGnMinWeights: a pack, and the token that keeps the runtimes alive while it is
// (its device memory is freed through its runtime when Python drops it).
struct Pack {
  RuntimeUser user;
  ops::LinearGnMinWeights w;
};

struct LgmCall {
  ops::LinearGnMinProblem p;
  TensorArg x, weight, linear_bias, gamma, beta, bias, out, ws;
  bool has_ws = false;
};

void require_matrix(const TensorArg& t, int64_t rows, int64_t cols, const char* what) {
  if (t.ndim != 2 || (rows >= 0 && t.shape[0] != rows) || (cols >= 0 && t.shape[1] != cols))
    bad_arg(kOp, t.name, "has shape " + t.shape_text() + ", must be " + what);
  if (!t.contiguous())
    bad_arg(kOp, t.name,
            "is not contiguous (strides " + t.strides_text() + "): call .contiguous() first");
}

// The result's shape, not only its element count: an [M, N] out would get the [N, M] result.
void require_result_shape(const TensorArg& out, int64_t N, int64_t M) {
  const int64_t want[4] = {1, N, M, 1};
  bool same = out.ndim == 4;
  for (int i = 0; same && i < 4; ++i) same = out.shape[i] == want[i];
  if (!same)
    bad_arg(kOp, out.name,
            "has shape " + out.shape_text() + ", must have the result's [1, N, M, 1] = [1, " +
                std::to_string(N) + ", " + std::to_string(M) + ", 1]");
}

ops::Precision precision_of(int p) {
  if (p < 0 || p > static_cast<int>(ops::Precision::Fp32x3))  // the last Precision
    bad_arg(kOp, "precision", "code " + std::to_string(p) + " names no kjit precision");
  return static_cast<ops::Precision>(p);
}

// Everything a CPU can check, in argument order and then the problem; then the devices. `pack`:
// the weight is prepacked (N from the pack; linear_gn_min checks the rest of it against p).
LgmCall read_call(nb::handle x, nb::handle weight, nb::handle linear_bias, nb::handle gamma,
                  nb::handle beta, nb::handle bias, nb::handle out, nb::handle workspace,
                  int64_t groups, int precision, const ops::LinearGnMinWeights* pack = nullptr) {
  LgmCall c;
  c.p.precision = precision_of(precision);
  const DType in = c.p.precision == ops::Precision::Bf16Inputs ? DType::BF16 : DType::F32;
  const char* in_rule = in == DType::BF16 ? "precision='bf16-inputs'" : "the GEMM's inputs";
  c.x = tensor_arg(kOp, "x", x, false);
  require_matrix(c.x, -1, -1, "[M, K] (batch, in_features)");
  require_dtype(kOp, c.x, in, in_rule);
  c.p.M = c.x.shape[0];
  c.p.K = c.x.shape[1];
  if (pack) {
    c.p.N = pack->N();
  } else {
    c.weight = tensor_arg(kOp, "weight", weight, false);
    require_matrix(c.weight, -1, c.p.K, "[N, K] (out_features, x's in_features)");
    require_dtype(kOp, c.weight, in, in_rule);
    c.p.N = c.weight.shape[0];
  }
  c.p.G = groups;
  TensorArg* vecs[] = {&c.linear_bias, &c.gamma, &c.beta, &c.bias};
  const char* names[] = {"linear_bias", "gamma", "beta", "bias"};
  nb::handle hs[] = {linear_bias, gamma, beta, bias};
  for (int i = 0; i < 4; ++i) {
    *vecs[i] = tensor_arg(kOp, names[i], hs[i], false);
    require_vector(kOp, *vecs[i], c.p.N);
    require_dtype(kOp, *vecs[i], DType::F32, "kjit's GroupNorm and bias parameters are fp32");
  }
  if (!out.is_none()) {
    c.out = tensor_arg(kOp, "out", out, true);
    require_result_shape(c.out, c.p.N, c.p.M);
    require_vector(kOp, c.out, c.p.N * c.p.M);
    require_dtype(kOp, c.out, DType::F32, "the result is fp32");
  }
  if (!workspace.is_none()) {
    c.has_ws = true;
    nb::ndarray<> w;  // raw bytes: any dtype
    if (!nb::try_cast(workspace, w, false)) bad_arg(kOp, "workspace", "must be a writable tensor");
    c.ws.name = "workspace";
    c.ws.data = w.data();
    c.ws.ndim = 1;
    c.ws.shape[0] = static_cast<int64_t>(w.nbytes());
    c.ws.strides[0] = 1;
    c.ws.device_type = w.device_type();
    c.ws.device_id = w.device_id();
  }
  ops::validate(c.p);
  require_cuda(kOp, c.x);
  const int dev = c.x.device_id;
  if (!pack) require_cuda(kOp, c.weight, dev);
  for (const TensorArg* t : {&c.linear_bias, &c.gamma, &c.beta, &c.bias})
    require_cuda(kOp, *t, dev);
  if (!out.is_none()) require_cuda(kOp, c.out, dev);
  if (c.has_ws) require_cuda(kOp, c.ws, dev);
  return c;
}

// Runs a checked call (`pack`: with that prepacked weight instead of c.weight); ops::linear_gn_min
// checks the options, the pointers and the workspace.
void run_call(const LgmCall& c, nb::handle out, const ops::LinearGnMinWeights* pack, double eps,
              bool autotune, uintptr_t stream, nb::handle config) {
  if (out.is_none()) bad_arg(kOp, "out", "is required here (kjit.linear_gn_min allocates it)");
  const auto o = call_options<ops::LinearGnMinOptions>(kOp, eps, autotune, config);
  ops::Workspace ws;
  if (c.has_ws) ws = {c.ws.data, static_cast<size_t>(c.ws.shape[0])};
  auto f = [](const TensorArg& t) { return static_cast<const float*>(t.data); };
  auto* y = static_cast<float*>(c.out.data);
  Runtime& rt = runtime_for(c.x.device_id);
  nb::gil_scoped_release release;  // a first call compiles and picks a GEMM: let Python run
  if (pack)
    ops::linear_gn_min(rt, c.p, c.x.data, *pack, f(c.linear_bias), f(c.gamma), f(c.beta), f(c.bias),
                       y, o, as_stream(stream), ws);
  else
    ops::linear_gn_min(rt, c.p, c.x.data, c.weight.data, f(c.linear_bias), f(c.gamma), f(c.beta),
                       f(c.bias), y, o, as_stream(stream), ws);
}

void linear_gn_min(nb::handle x, nb::handle weight, nb::handle linear_bias, nb::handle gamma,
                   nb::handle beta, nb::handle bias, nb::handle out, nb::handle workspace,
                   int64_t groups, double eps, int precision, bool autotune, uintptr_t stream,
                   nb::handle config) {
  run_call(read_call(x, weight, linear_bias, gamma, beta, bias, out, workspace, groups, precision),
           out, nullptr, eps, autotune, stream, config);
}

// The same call with a prepacked weight.
void linear_gn_min_packed(nb::handle x, const Pack& pack, nb::handle linear_bias, nb::handle gamma,
                          nb::handle beta, nb::handle bias, nb::handle out, nb::handle workspace,
                          int64_t groups, double eps, int precision, bool autotune,
                          uintptr_t stream, nb::handle config) {
  run_call(read_call(x, nb::none(), linear_bias, gamma, beta, bias, out, workspace, groups,
                     precision, &pack.w),
           out, &pack.w, eps, autotune, stream, config);
}

// weight [N, K] float32 split once for `precision` (kjit.prepack_linear_gn_min).
std::unique_ptr<Pack> prepack(nb::handle weight, int precision, uintptr_t stream) {
  constexpr const char* op = "kjit.prepack_linear_gn_min";
  const ops::Precision pr = precision_of(precision);
  const TensorArg w = tensor_arg(op, "weight", weight, false);
  if (w.ndim != 2) bad_arg(op, "weight", "has shape " + w.shape_text() + ", must be [N, K]");
  if (!w.contiguous())
    bad_arg(op, "weight",
            "is not contiguous (strides " + w.strides_text() + "): call .contiguous() first");
  require_dtype(op, w, DType::F32, "the weight is packed from float32");
  ops::validate_prepack(w.shape[0], w.shape[1], pr, static_cast<const float*>(w.data));
  require_cuda(op, w);
  Runtime& rt = runtime_for(w.device_id);
  auto pack = std::make_unique<Pack>();
  nb::gil_scoped_release release;
  pack->w = ops::prepack_linear_gn_min(rt, w.shape[0], w.shape[1], pr,
                                       static_cast<const float*>(w.data), as_stream(stream));
  return pack;
}

// Builds the plan (kernel, cuBLASLt algorithm) and gives `stream` kjit's workspace for it
// (`weight` a tensor or a pack). `out` (or None) is checked as the call checks it, before the
// runtime is made.
std::string prepare(nb::handle x, nb::handle weight, nb::handle linear_bias, nb::handle gamma,
                    nb::handle beta, nb::handle bias, nb::handle out, int64_t groups, double eps,
                    int precision, bool autotune, uintptr_t stream, nb::handle config) {
  const Pack* held = nullptr;
  if (!nb::try_cast(weight, held)) held = nullptr;
  const ops::LinearGnMinWeights* pack = held ? &held->w : nullptr;
  const LgmCall c = read_call(x, weight, linear_bias, gamma, beta, bias, out, nb::none(), groups,
                              precision, pack);
  const auto o = call_options<ops::LinearGnMinOptions>(kOp, eps, autotune, config);
  Runtime& rt = runtime_for(c.x.device_id);
  if (pack) ops::validate_pack(c.p, *pack, rt.context());
  nb::gil_scoped_release release;
  const ops::LinearGnMinInfo info = ops::prepare_linear_gn_min(rt, c.p, o);
  ops::reserve_linear_gn_min_workspace(rt, c.p, as_stream(stream), pack != nullptr);
  return info.describe();  // the config first: what config= takes
}

}  // namespace

void bind_linear_gn_min(nb::module_& m) {
  m.def("linear_gn_min", &linear_gn_min, nb::arg("x").none(), nb::arg("weight").none(),
        nb::arg("linear_bias").none(), nb::arg("gamma").none(), nb::arg("beta").none(),
        nb::arg("bias").none(), nb::arg("out").none(), nb::arg("workspace").none(),
        nb::arg("groups"), nb::arg("eps"), nb::arg("precision"), nb::arg("autotune"),
        nb::arg("stream"), nb::arg("config").none() = nb::none());
  nb::class_<Pack>(m, "LinearGnMinWeights",
                   "A weight split once for a precision (kjit.prepack_linear_gn_min): pass it as "
                   "weight=. Keep it alive while a captured CUDA graph that uses it may replay.",
                   nb::is_final())
      .def_prop_ro("N", [](const Pack& p) { return p.w.N(); })
      .def_prop_ro("K", [](const Pack& p) { return p.w.K(); })
      .def_prop_ro("precision",
                   [](const Pack& p) { return std::string(ops::precision_name(p.w.precision())); })
      .def_prop_ro("_precision_code",
                   [](const Pack& p) { return static_cast<int>(p.w.precision()); })
      .def_prop_ro("nbytes", [](const Pack& p) { return p.w.bytes(); })
      .def("__repr__",
           [](const Pack& p) { return "kjit.LinearGnMinWeights(" + p.w.describe() + ")"; });
  m.def("prepack_linear_gn_min", &prepack, nb::arg("weight").none(), nb::arg("precision"),
        nb::arg("stream"));
  m.def("linear_gn_min_packed", &linear_gn_min_packed, nb::arg("x").none(), nb::arg("pack"),
        nb::arg("linear_bias").none(), nb::arg("gamma").none(), nb::arg("beta").none(),
        nb::arg("bias").none(), nb::arg("out").none(), nb::arg("workspace").none(),
        nb::arg("groups"), nb::arg("eps"), nb::arg("precision"), nb::arg("autotune"),
        nb::arg("stream"), nb::arg("config").none() = nb::none());
  m.def("prepare_linear_gn_min", &prepare, nb::arg("x").none(), nb::arg("weight").none(),
        nb::arg("linear_bias").none(), nb::arg("gamma").none(), nb::arg("beta").none(),
        nb::arg("bias").none(), nb::arg("out").none(), nb::arg("groups"), nb::arg("eps"),
        nb::arg("precision"), nb::arg("autotune"), nb::arg("stream"),
        nb::arg("config").none() = nb::none());
  m.def(
      "linear_gn_min_workspace_size",
      [](int64_t M, int64_t K, int64_t N, int64_t G, int precision, bool packed) {
        ops::LinearGnMinProblem p;
        p.M = M;
        p.K = K;
        p.N = N;
        p.G = G;
        p.precision = precision_of(precision);
        ops::validate(p);
        return ops::linear_gn_min_workspace_size(p, packed);
      },
      nb::arg("M"), nb::arg("K"), nb::arg("N"), nb::arg("G"), nb::arg("precision"),
      nb::arg("packed") = false);
  m.def("parse_precision",
        [](const std::string& name) { return static_cast<int>(ops::parse_precision(name)); });
}

}  // namespace kjit::py
