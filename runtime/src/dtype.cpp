#include "kjit/dtype.hpp"

#include "kjit/error.hpp"

namespace kjit {

const char* dtype_cxx(DType t) {
  switch (t) {
    case DType::F32:
      return "float";
    case DType::F16:
      return "kjit::half";
    case DType::BF16:
      return "kjit::bfloat16";
  }
  return "?";
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "f32";
    case DType::F16:
      return "f16";
    case DType::BF16:
      return "bf16";
  }
  return "?";
}

size_t dtype_size(DType t) {
  return t == DType::F32 ? 4 : 2;
}

DType parse_dtype(std::string_view s) {
  if (s == "f32" || s == "fp32" || s == "float32" || s == "float") return DType::F32;
  if (s == "f16" || s == "fp16" || s == "float16" || s == "half") return DType::F16;
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  throw Error(Errc::InvalidArgument,
              "unknown dtype '" + std::string(s) +
                  "': expected one of f32, f16, bf16 (or fp32/float32/float, "
                  "fp16/float16/half, bfloat16)");
}

}  // namespace kjit
