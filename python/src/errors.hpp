// kjit::Error as Python exceptions: kjit.Error and one subclass per Errc (kjit/_errors.py), each
// carrying kjit's code name, message, NVRTC log and the field a bad argument is about.
#pragma once

#include <nanobind/nanobind.h>

namespace kjit::py {

void bind_errors(nanobind::module_& m);

}  // namespace kjit::py
