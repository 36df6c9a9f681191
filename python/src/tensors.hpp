// Tensors from Python through DLPack (nb::ndarray): what an op reads of one argument, checked
// before anything touches the device, with errors that name the op and the argument.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "kjit/dtype.hpp"
#include "kjit/error.hpp"

namespace kjit::py {

namespace nb = nanobind;

// The most dimensions an argument may have (PyTorch's own limit is 64; no kjit op needs more).
constexpr int kMaxDims = 16;

// One tensor argument, as DLPack describes it (strides in elements).
struct TensorArg {
  const char* name = "";
  void* data = nullptr;
  DType dtype = DType::F32;
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
  int device_type = 0;  // DLPack's: 1 CPU, 2 CUDA, ...
  int device_id = 0;
  int64_t numel() const;       // fits int64 (tensor_arg refuses shapes whose count does not)
  bool contiguous() const;     // row-major dense (dimensions of size 1 may have any stride)
  bool channels_last() const;  // dense in the order N, dims 2.., C (PyTorch's channels_last)
  std::string shape_text() const;
  std::string strides_text() const;
};

// Reads `h` (anything DLPack or the buffer protocol exports) as argument `name` of op `op`:
// InvalidArgument naming both for something that is no tensor, a dtype kjit has no kernels for
// (float32, float16, bfloat16 only) or more than kMaxDims dimensions. `writable`: an output,
// which a read-only export (e.g. a JAX array) cannot be. The device is not checked here (see
// require_cuda), so that every rule a CPU machine can check is checked first.
TensorArg tensor_arg(const char* op, const char* name, nb::handle h, bool writable);

// The device pointer of any tensor (any dtype, any layout: user kernel argument `what`[index]),
// which must be CUDA device memory on `device`; InvalidArgument naming the argument otherwise.
void* device_pointer(const char* op, const char* what, size_t index, nb::handle h, int device);
// InvalidArgument unless t is CUDA device memory on `device` (the device of the op's first
// tensor; -1: any CUDA device).
void require_cuda(const char* op, const TensorArg& t, int device = -1);
// InvalidArgument unless t has dtype d.
void require_dtype(const char* op, const TensorArg& t, DType d, const char* rule);
// InvalidArgument unless t has `n` elements in one dense run (any shape, e.g. [N] or [1, N, 1, 1]).
void require_vector(const char* op, const TensorArg& t, int64_t n);
// InvalidArgument unless out has x's shape and the same layout rule holds for it.
void require_same_shape(const char* op, const TensorArg& x, const TensorArg& out);
// eps as the ops take it: InvalidArgument unless finite, >= 0 and within float32's range (checked
// before the device, and before a conversion that would be undefined beyond that range).
float eps_arg(const char* op, double eps);
// config= as the ops take it: None (the heuristic's or autotuning's) or a str, the config's text
// (each op reads it with its parse_*_config, which names a bad word); anything else is an
// ArgumentTypeError naming config.
// The view lives as long as the str (the call's argument): nothing is copied on the hot path.
std::optional<std::string_view> config_arg(const char* op, nanobind::handle config);
// A call's options from its Python arguments, one rule for every op: eps (eps_arg), autotune,
// and config= (config_arg) read by the op's kjit::ops::pin_config_text (found beside Options).
template <class Options>
Options call_options(const char* op, double eps, bool autotune, nanobind::handle config) {
  Options o;
  o.eps = eps_arg(op, eps);
  o.autotune = autotune;
  if (auto text = config_arg(op, config)) pin_config_text(*text, &o);
  return o;
}
// An InvalidArgument about argument `field` of `op`: "<op>: <field> <rule>".
[[noreturn]] void bad_arg(const char* op, const char* field, const std::string& rule);
// The same for an argument of the wrong type (a list where a tensor goes): Python sees a
// kjit.ArgumentTypeError, both an InvalidArgumentError and a TypeError (errors.cpp).
struct WrongType : Error {
  explicit WrongType(Error e) : Error(std::move(e)) {}
};
[[noreturn]] void bad_type(const char* op, const char* field, const std::string& rule);

}  // namespace kjit::py
