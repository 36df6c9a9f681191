#include "kernels.hpp"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kjit/error.hpp"
#include "kjit/kernel.hpp"
#include "kjit/spec.hpp"
#include "kjit/templates.hpp"
#include "runtimes.hpp"
#include "tensors.hpp"

namespace kjit::py {

namespace {

constexpr const char* kOp = "kjit.kernel";
constexpr size_t kMaxArgBytes = 4096;  // the CUDA limit on a kernel's parameters (pre-12.1)

// types: DType names (f32, float16, bf16, ...) or any C++ type name; values: ints and bools, in
// that order after the types (template <class T, int kN> takes types=[T], values=[kN]).
Spec make_spec(const std::string& header, const std::string& function,
               const std::vector<std::string>& types, const nb::list& values) {
  Spec s(header, function);
  for (const std::string& t : types) {
    try {
      s.type(parse_dtype(t));
    } catch (const Error&) {
      s.type(t);  // a C++ type name: NVRTC checks it
    }
  }
  for (nb::handle v : values) {
    if (nb::isinstance<nb::bool_>(v))
      s.value(nb::cast<bool>(v));
    else if (int64_t n = 0; nb::isinstance<nb::int_>(v) && nb::try_cast(v, n))
      s.value(n);
    else if (nb::isinstance<nb::int_>(v))
      bad_arg(kOp, "values",
              "must fit a 64-bit int: " + std::string(nb::str(v).c_str()) + " does not");
    else
      bad_arg(kOp, "values",
              "must hold ints and bools, not " + std::string(nb::type_name(v.type()).c_str()));
  }
  return s;
}

void register_source(TemplateSet& ts, const std::string& header, const std::string& source) {
  if (!ts.has(header)) ts.add(header, source);
}

Dim3 dim3_of(nb::handle h, const char* name) {
  Dim3 d;
  unsigned* f[3] = {&d.x, &d.y, &d.z};
  auto set = [&](int i, nb::handle v) {
    int64_t n = 0;
    if (nb::isinstance<nb::bool_>(v) || !nb::isinstance<nb::int_>(v) || !nb::try_cast(v, n))
      bad_arg(kOp, name,
              "must be an int or a tuple of 1 to 3 ints: " + std::string(nb::str(v).c_str()) +
                  " is not a dimension");
    if (n < 1 || n > UINT_MAX)
      bad_arg(kOp, name, "has a dimension " + std::to_string(n) + " (1..2^32-1)");
    *f[i] = static_cast<unsigned>(n);
  };
  if (nb::isinstance<nb::int_>(h)) {
    set(0, h);
    return d;
  }
  const bool seq = nb::isinstance<nb::tuple>(h) || nb::isinstance<nb::list>(h);
  const size_t n = seq ? nb::len(h) : 0;
  if (n < 1 || n > 3) bad_arg(kOp, name, "must be an int or a tuple of 1 to 3 ints");
  for (size_t i = 0; i < n; ++i) set(static_cast<int>(i), h[i]);
  return d;
}

constexpr size_t kMaxArgs = 256;

// A launch's arguments packed on the stack (no allocation per launch): each argument's bytes
// 8-byte aligned in `bytes`, params[i] pointing at argument i as cuLaunchKernel wants.
struct ArgPack {
  alignas(16) unsigned char bytes[kMaxArgBytes];
  size_t used = 0;
  size_t count = 0;
  size_t sizes[kMaxArgs];
  void* params[kMaxArgs];
};

// One argument by value: Python int as C int (32-bit), float as float, bool as bool; bytes as
// they are (numpy scalars and ctypes structs arrive as bytes from kjit/_kernels.py); a tensor as
// its device pointer. The kernel's parameter sizes are checked before the launch.
void append_arg(ArgPack& p, nb::handle a, int device) {
  const size_t i = p.count;
  auto name = [i] { return "args[" + std::to_string(i) + "]"; };  // for errors only
  unsigned char tmp[sizeof(void*)];
  const unsigned char* src = tmp;
  size_t n = 0;
  if (nb::isinstance<nb::bool_>(a)) {
    const bool b = nb::cast<bool>(a);
    std::memcpy(tmp, &b, n = sizeof b);
  } else if (nb::isinstance<nb::int_>(a)) {
    int64_t v = 0;
    if (!nb::try_cast(a, v) || v < INT_MIN || v > INT_MAX)
      bad_arg(kOp, name().c_str(),
              "= " + std::string(nb::str(a).c_str()) +
                  " does not fit a C int: pass numpy.int64(v) for a 64-bit parameter");
    const int iv = static_cast<int>(v);
    std::memcpy(tmp, &iv, n = sizeof iv);
  } else if (nb::isinstance<nb::float_>(a)) {
    const float f = static_cast<float>(nb::cast<double>(a));
    std::memcpy(tmp, &f, n = sizeof f);
  } else if (nb::isinstance<nb::bytes>(a)) {
    nb::bytes b = nb::borrow<nb::bytes>(a);
    src = static_cast<const unsigned char*>(static_cast<const void*>(b.c_str()));
    n = b.size();
  } else {
    void* ptr = device_pointer(kOp, "args", i, a, device);
    std::memcpy(tmp, &ptr, n = sizeof ptr);
  }
  const size_t off = (p.used + 7) / 8 * 8;
  if (i >= kMaxArgs || n == 0 || off + n > kMaxArgBytes)
    bad_arg(kOp, name().c_str(),
            "is empty, or the arguments are more than 256 or 4096 bytes (CUDA's limit)");
  std::memcpy(p.bytes + off, src, n);
  p.params[i] = p.bytes + off;
  p.sizes[i] = n;
  p.used = off + n;
  p.count = i + 1;
}

class PyKernel {
 public:
  // Every rule a CPU can check (the template arguments, the source's includes) before the
  // device's runtime is made: a bad argument is named on a machine without a driver too.
  PyKernel(int device, const std::string& header, const std::string& source,
           const std::string& function, const std::vector<std::string>& types,
           const nb::list& values)
      : device_(device) {
    const Spec spec = make_spec(header, function, types, values);
    checked_template_includes(source, header);  // TemplateSet::add's rule, before the runtime
    rt_ = &runtime_for(device);
    register_source(rt_->templates(), header, source);
    nb::gil_scoped_release release;  // NVRTC may take a while
    k_ = rt_->kernel(spec);
  }

  void launch(nb::handle grid, nb::handle block, const nb::list& args, unsigned shared,
              uintptr_t stream) const {
    LaunchConfig cfg;
    cfg.grid = dim3_of(grid, "grid");
    cfg.block = dim3_of(block, "block");
    cfg.shared_bytes = shared;
    ArgPack pack;
    for (nb::handle a : args) append_arg(pack, a, device_);
    k_.check_args(pack.sizes, pack.count);
    k_.launch(as_stream(stream), cfg, pack.params);
  }

  std::string instantiation() const { return k_.instantiation(); }
  int num_params() const { return k_.num_params(); }
  int num_registers() const { return k_.num_registers(); }
  int device() const { return device_; }

 private:
  int device_;
  Runtime* rt_ = nullptr;
  Kernel k_;
};

nb::dict compile(const std::string& header, const std::string& source, const std::string& function,
                 const std::vector<std::string>& types, const nb::list& values,
                 const std::string& arch) {
  const Spec spec = make_spec(header, function, types, values);
  Compiler& c = host_compiler();
  register_source(c.templates(), header, source);
  CompiledKernel k;
  {
    nb::gil_scoped_release release;
    k = c.get(spec, arch);
  }
  nb::dict d;
  d["instantiation"] = k.instantiation;
  d["lowered_name"] = k.lowered_name;
  d["arch"] = k.arch;
  d["binary"] = nb::bytes(k.binary.data(), k.binary.size());
  d["log"] = k.log;
  d["compile_ms"] = k.compile_ms;
  d["from_disk"] = k.from_disk;
  return d;
}

}  // namespace

void bind_kernels(nb::module_& m) {
  nb::class_<PyKernel>(m, "Kernel")
      .def(nb::init<int, const std::string&, const std::string&, const std::string&,
                    const std::vector<std::string>&, const nb::list&>(),
           nb::arg("device"), nb::arg("header"), nb::arg("source"), nb::arg("function"),
           nb::arg("types"), nb::arg("values"))
      .def("launch", &PyKernel::launch, nb::arg("grid"), nb::arg("block"), nb::arg("args"),
           nb::arg("shared"), nb::arg("stream"))
      .def_prop_ro("instantiation", &PyKernel::instantiation)
      .def_prop_ro("num_params", &PyKernel::num_params)
      .def_prop_ro("num_registers", &PyKernel::num_registers)
      .def_prop_ro("device", &PyKernel::device);
  m.def("compile", &compile, nb::arg("header"), nb::arg("source"), nb::arg("function"),
        nb::arg("types"), nb::arg("values"), nb::arg("arch"));
  // A source file's bytes, read as TemplateSet::add_file reads a header (kjit::read_template_file:
  // a regular file only, never read short).
  m.def(
      "read_source_file",
      [](const nb::bytes& path) {  // os.fsencode(path): any name the OS allows
        const std::string text = read_template_file(std::string(path.c_str(), path.size()));
        return nb::bytes(text.data(), text.size());
      },
      nb::arg("path"));
}

}  // namespace kjit::py
