// A specialization: which template header, which __global__ function template, and its typed
// template arguments. spec.instantiation() is the NVRTC name expression,
// e.g. "kjit::gn_fwd<float, 256, 32, 576, 8, 256>".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kjit/dtype.hpp"

namespace kjit {

class Spec {
 public:
  // header: a registered template name ("kjit/group_norm.cuh" or one the app registered);
  // function: the qualified name of the __global__ function template in it.
  Spec(std::string header, std::string function);

  Spec& value(int64_t v);             // an integral template argument
  Spec& value(bool v);                // "true" / "false"
  Spec& value(const char*) = delete;  // would convert to bool: use type() for a name
  Spec& type(DType t);                // float, kjit::half, kjit::bfloat16
  Spec& type(std::string cxx);        // any C++ type name visible in the header (checked by NVRTC)
  Spec& value(int v) { return value(static_cast<int64_t>(v)); }
  Spec& value(unsigned v) { return value(static_cast<int64_t>(v)); }

  const std::string& header() const { return header_; }
  const std::string& function() const { return function_; }
  const std::vector<std::string>& args() const { return args_; }
  std::string instantiation() const;  // function<arg, arg, ...>, or function if no args

 private:
  std::string header_, function_;
  std::vector<std::string> args_;
};

}  // namespace kjit
