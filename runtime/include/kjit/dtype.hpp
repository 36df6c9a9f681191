// Element types kjit kernels are specialized on.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kjit {

enum class DType { F32, F16, BF16 };

// The C++ type name used in instantiations ("float", "kjit::half", "kjit::bfloat16").
const char* dtype_cxx(DType t);
// Short name for tools and manifests ("f32", "f16", "bf16").
const char* dtype_name(DType t);
// Parse "f32|fp32|float32|float", "f16|fp16|half|float16", "bf16|bfloat16"; throws InvalidArgument.
DType parse_dtype(std::string_view s);
size_t dtype_size(DType t);

}  // namespace kjit
