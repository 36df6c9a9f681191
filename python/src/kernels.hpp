// User kernels from Python: a CUDA C++ template (source text) registered with the device's
// runtime, specialized with types and values, compiled (or found in the disk cache), and launched
// with tensors and scalars as its arguments. kjit.compile does the compile alone, without a GPU.
#pragma once

#include <nanobind/nanobind.h>

namespace kjit::py {

void bind_kernels(nanobind::module_& m);

}  // namespace kjit::py
