// Activation names, policy types and the float64 reference (kjit/activation.hpp).
#include "kjit/activation.hpp"

#include <cctype>
#include <cmath>

#include "kjit/error.hpp"

namespace kjit {
namespace {

struct Row {
  Activation a;
  const char* name;
  const char* policy;
};
constexpr Row kRows[] = {{Activation::None, "none", "kjit::act::None"},
                         {Activation::SiLU, "silu", "kjit::act::Silu"},
                         {Activation::GeluTanh, "gelu_tanh", "kjit::act::GeluTanh"},
                         {Activation::GeluErf, "gelu", "kjit::act::GeluErf"},
                         {Activation::ReLU, "relu", "kjit::act::Relu"}};

const Row& row(Activation a) {
  for (const Row& r : kRows)
    if (r.a == a) return r;
  throw Error(Errc::InvalidArgument,
              "activation " + std::to_string(static_cast<int>(a)) + " is not a kjit::Activation");
}

}  // namespace

const char* activation_name(Activation a) {
  return row(a).name;
}

const char* activation_policy(Activation a) {
  return row(a).policy;
}

Activation parse_activation(const std::string& name) {
  std::string low;
  for (char c : name) low += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (low == "gelu_erf") return Activation::GeluErf;
  for (const Row& r : kRows)
    if (low == r.name) return r.a;
  throw Error::invalid("activation",
                       "activation '" + name + "' is not one of none, silu, gelu, gelu_tanh, relu");
}

double activation_ref(Activation a, double z) {
  switch (a) {
    case Activation::None:
      return z;
    case Activation::SiLU:
      return z / (1.0 + std::exp(-z));
    case Activation::GeluTanh: {
      const double k = std::sqrt(2.0 / M_PI);
      return 0.5 * z * (1.0 + std::tanh(k * (z + 0.044715 * z * z * z)));
    }
    case Activation::GeluErf:
      return 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0)));
    case Activation::ReLU:
      return std::isnan(z) ? z : (z < 0 ? 0.0 : z);
  }
  return row(a).name[0];  // unreachable: row() throws for a value outside the enum
}

double activation_max_slope(Activation a) {
  switch (a) {
    case Activation::SiLU:
      return 1.1;
    case Activation::GeluTanh:
    case Activation::GeluErf:
      return 1.13;
    default:
      return 1.0;
  }
}

}  // namespace kjit
