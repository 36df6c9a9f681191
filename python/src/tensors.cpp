#include "tensors.hpp"

#include <cstdio>
#include <limits>

#include "kjit/error.hpp"

namespace kjit::py {

namespace {

const char* dl_device_name(int type) {
  switch (type) {
    case 1:
      return "cpu";
    case 2:
      return "cuda";
    case 3:
      return "cuda_host (pinned host memory)";
    case 13:
      return "cuda_managed";
    default:
      return "a non-CUDA device";
  }
}

std::string dtype_text(nb::dlpack::dtype d) {
  const auto code = static_cast<nb::dlpack::dtype_code>(d.code);
  std::string base = code == nb::dlpack::dtype_code::Float    ? "float"
                     : code == nb::dlpack::dtype_code::Bfloat ? "bfloat"
                     : code == nb::dlpack::dtype_code::Int    ? "int"
                     : code == nb::dlpack::dtype_code::UInt   ? "uint"
                     : code == nb::dlpack::dtype_code::Bool   ? "bool"
                     : code == nb::dlpack::dtype_code::Complex
                         ? "complex"
                         : "code " + std::to_string(d.code) + " ";
  std::string s = base + std::to_string(d.bits);
  if (d.lanes != 1) s += "x" + std::to_string(d.lanes);
  return s;
}

bool to_dtype(nb::dlpack::dtype d, DType* out) {
  if (d.lanes != 1) return false;
  const auto code = static_cast<nb::dlpack::dtype_code>(d.code);
  if (code == nb::dlpack::dtype_code::Float && d.bits == 32)
    *out = DType::F32;
  else if (code == nb::dlpack::dtype_code::Float && d.bits == 16)
    *out = DType::F16;
  else if (code == nb::dlpack::dtype_code::Bfloat && d.bits == 16)
    *out = DType::BF16;
  else
    return false;
  return true;
}

const char* py_dtype_name(DType d) {
  return d == DType::F32 ? "float32" : d == DType::F16 ? "float16" : "bfloat16";
}

std::string list_text(const int64_t* v, int n) {
  std::string s = "[";
  for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Dense in the dimension order `order` (outermost first): each stride is the product of the
// sizes inside it; a dimension of size 1 may have any stride (PyTorch leaves those arbitrary), and
// a tensor without elements is dense in every order (numpy exports it with zero strides).
bool dense_in_order(const TensorArg& t, const int* order) {
  if (t.numel() == 0) return true;
  int64_t expect = 1;
  for (int k = t.ndim - 1; k >= 0; --k) {
    const int d = order[k];
    if (t.shape[d] != 1 && t.strides[d] != expect) return false;
    expect *= t.shape[d];
  }
  return true;
}

// Copies a's description into t. A producer's export is not trusted: a shape array that is
// missing, a negative size or an element count past 64 bits is refused, and missing strides
// mean row-major (the DLPack rule).
template <class Array>
void fill(const char* op, TensorArg& t, const Array& a) {
  t.data = const_cast<void*>(static_cast<const void*>(a.data()));
  t.ndim = static_cast<int>(a.ndim());
  if (t.ndim > 0 && a.shape_ptr() == nullptr)
    bad_arg(op, t.name, "is a malformed DLPack export (no shape for its dimensions)");
  for (int i = 0; i < t.ndim; ++i) t.shape[i] = static_cast<int64_t>(a.shape(i));
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0) bad_arg(op, t.name, "has shape " + t.shape_text() + ": a negative size");
    if (__builtin_mul_overflow(n, t.shape[i], &n))
      bad_arg(op, t.name, "has shape " + t.shape_text() + ": its element count overflows 64 bits");
  }
  int64_t step = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    t.strides[i] = a.stride_ptr() ? a.stride(i) : step;
    step *= t.shape[i] ? t.shape[i] : 1;
  }
  t.device_type = a.device_type();
  t.device_id = a.device_id();
}

}  // namespace

void bad_arg(const char* op, const char* field, const std::string& rule) {
  throw Error::invalid(field, std::string(op) + ": " + field + " " + rule);
}

void bad_type(const char* op, const char* field, const std::string& rule) {
  throw WrongType(Error::invalid(field, std::string(op) + ": " + field + " " + rule));
}

TensorArg tensor_arg(const char* op, const char* name, nb::handle h, bool writable) {
  TensorArg t;
  t.name = name;
  nb::dlpack::dtype dt{};
  size_t ndim = 0;
  // No conversion: an argument is used where it lies, never copied behind the caller's back.
  if (writable) {
    nb::ndarray<> a;
    if (!nb::try_cast(h, a, false))
      bad_arg(op, name,
              "must be a writable tensor (DLPack; a read-only export, e.g. a JAX array, cannot "
              "be written), not " +
                  std::string(nb::type_name(h.type()).c_str()));
    ndim = a.ndim();
    dt = a.dtype();
    if (ndim <= kMaxDims) fill(op, t, a);
  } else {
    nb::ndarray<nb::ro> a;
    if (!nb::try_cast(h, a, false))
      bad_type(op, name,
               "must be a tensor (DLPack), not " + std::string(nb::type_name(h.type()).c_str()));
    ndim = a.ndim();
    dt = a.dtype();
    if (ndim <= kMaxDims) fill(op, t, a);
  }
  if (ndim > kMaxDims)
    bad_arg(op, name,
            "has " + std::to_string(ndim) + " dimensions; kjit takes at most " +
                std::to_string(kMaxDims));
  if (!to_dtype(dt, &t.dtype))
    bad_arg(op, name, "has dtype " + dtype_text(dt) + "; kjit takes float32, float16 or bfloat16");
  return t;
}

void* device_pointer(const char* op, const char* what, size_t index, nb::handle h, int device) {
  nb::ndarray<nb::ro> a;
  const bool ok = nb::try_cast(h, a, false);
  if (!ok || a.device_type() != 2 || (device >= 0 && a.device_id() != device)) {
    const std::string name = std::string(what) + "[" + std::to_string(index) + "]";
    if (!ok)
      bad_type(op, name.c_str(),
               "must be a tensor (DLPack), an int, a float, a bool or bytes, not " +
                   std::string(nb::type_name(h.type()).c_str()));
    TensorArg t;
    t.name = name.c_str();
    t.device_type = a.device_type();
    t.device_id = a.device_id();
    require_cuda(op, t, device);
  }
  return const_cast<void*>(a.data());
}

void require_cuda(const char* op, const TensorArg& t, int device) {
  if (t.device_type != 2)
    bad_arg(op, t.name,
            std::string("is on ") + dl_device_name(t.device_type) +
                ", not in CUDA device memory (move it with .cuda() / .to('cuda'))");
  if (device >= 0 && t.device_id != device)
    bad_arg(op, t.name,
            "is on cuda:" + std::to_string(t.device_id) + ", the op's first tensor on cuda:" +
                std::to_string(device) + " (all tensors of a call must be on one device)");
}

void require_dtype(const char* op, const TensorArg& t, DType d, const char* rule) {
  if (t.dtype != d)
    bad_arg(op, t.name,
            std::string("has dtype ") + py_dtype_name(t.dtype) + ", must be " + py_dtype_name(d) +
                " (" + rule + ")");
}

void require_vector(const char* op, const TensorArg& t, int64_t n) {
  if (t.numel() != n)
    bad_arg(op, t.name,
            "has shape " + t.shape_text() + " (" + std::to_string(t.numel()) +
                " elements), must have " + std::to_string(n));
  if (!t.contiguous())
    bad_arg(op, t.name,
            "is not contiguous (strides " + t.strides_text() + " for shape " + t.shape_text() +
                "): call .contiguous() first");
}

void require_same_shape(const char* op, const TensorArg& x, const TensorArg& out) {
  bool same = out.ndim == x.ndim;
  for (int i = 0; same && i < x.ndim; ++i) same = out.shape[i] == x.shape[i];
  if (!same)
    bad_arg(op, out.name,
            "has shape " + out.shape_text() + ", must have " + x.name + "'s " + x.shape_text());
  if (out.dtype != x.dtype)
    bad_arg(op, out.name,
            std::string("has dtype ") + py_dtype_name(out.dtype) + ", must have " + x.name + "'s " +
                py_dtype_name(x.dtype));
}

float eps_arg(const char* op, double eps) {
  if (!(eps >= 0 && eps <= static_cast<double>(std::numeric_limits<float>::max()))) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", eps);
    bad_arg(op, "eps",
            std::string("= ") + text + " must be finite and >= 0 (it is used as a float32)");
  }
  return static_cast<float>(eps);
}

std::optional<std::string_view> config_arg(const char* op, nb::handle config) {
  if (config.is_none()) return std::nullopt;
  if (!nb::isinstance<nb::str>(config))
    bad_type(op, "config",
             "must be a config's text (str) or None, not " +
                 std::string(nb::type_name(config.type()).c_str()));
  // With its length: a NUL inside must reach the parser (which refuses it), not cut the text.
  Py_ssize_t n = 0;
  const char* text = PyUnicode_AsUTF8AndSize(config.ptr(), &n);
  if (!text) {  // a lone surrogate: no UTF-8 form, so no config (whose text is ASCII)
    PyErr_Clear();
    bad_arg(op, "config", "is not encodable as UTF-8 (a config's text is ASCII)");
  }
  return std::string_view(text, static_cast<size_t>(n));
}

int64_t TensorArg::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

bool TensorArg::contiguous() const {
  int order[kMaxDims];
  for (int i = 0; i < ndim; ++i) order[i] = i;
  return dense_in_order(*this, order);
}

bool TensorArg::channels_last() const {
  if (ndim < 2) return false;
  int order[kMaxDims];
  order[0] = 0;
  for (int i = 2; i < ndim; ++i) order[i - 1] = i;
  order[ndim - 1] = 1;
  return dense_in_order(*this, order);
}

std::string TensorArg::shape_text() const {
  return list_text(shape, ndim);
}
std::string TensorArg::strides_text() const {
  return list_text(strides, ndim);
}

}  // namespace kjit::py
