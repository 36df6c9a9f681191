#include "errors.hpp"

#include <nanobind/stl/string.h>

#include <exception>

#include "kjit/error.hpp"
#include "tensors.hpp"

namespace kjit::py {

namespace nb = nanobind;

namespace {

// The Python classes live in kjit/_errors.py (where users see them); this is the only place an
// error crosses over, so an import per error costs nothing on the hot path and keeps no Python
// object alive in C++ past interpreter shutdown.
void raise_kjit_error(const Error& e, bool wrong_type) {
  try {
    nb::object make = nb::module_::import_("kjit._errors").attr("_from_native");
    nb::object field = nb::none();
    if (!e.field().empty()) field = nb::str(e.field().c_str());
    nb::object exc =
        make(errc_name(e.code()), e.what(), nb::str(e.log().c_str()), field, wrong_type);
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  } catch (nb::python_error& pe) {
    pe.restore();  // kjit._errors itself failed: that error is the more useful one
  } catch (const std::exception& other) {
    PyErr_SetString(PyExc_RuntimeError, other.what());
  }
}

}  // namespace

void bind_errors(nb::module_& m) {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const WrongType& e) {
      raise_kjit_error(e, true);
    } catch (const Error& e) {
      raise_kjit_error(e, false);
    }
  });
  m.def("_raise_for_test", [](const std::string& code, const std::string& msg,
                              const std::string& log, const std::string& field) {
    for (int c = 0; c <= static_cast<int>(Errc::Io); ++c)
      if (code == errc_name(static_cast<Errc>(c))) {
        Error e(static_cast<Errc>(c), msg, log);
        if (field.empty()) throw e;
        Error f = Error::invalid(field, msg);
        throw f;
      }
    throw Error::invalid("code", "unknown kjit error code " + code);
  });
}

}  // namespace kjit::py
