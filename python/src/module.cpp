// kjit._kjit: the native half of the Python package (python/kjit/ is the other half, which users
// import). Everything here takes DLPack tensors and raw stream handles; the Python side picks the
// stream, allocates outputs and parses names once.
#include <nanobind/nanobind.h>

#include "errors.hpp"
#include "kernels.hpp"
#include "ops.hpp"
#include "runtimes.hpp"

NB_MODULE(_kjit, m) {
  m.doc() = "kjit's native module (use the kjit package)";
  kjit::py::bind_errors(m);
  kjit::py::bind_runtimes(m);
  kjit::py::bind_group_norm(m);
  kjit::py::bind_linear_gn_min(m);
  kjit::py::bind_layer_norm(m);
  kjit::py::bind_kernels(m);
}
