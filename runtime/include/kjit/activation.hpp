// The activations an op may fuse after its normalization, one name per concept across ops:
// the C++ enum, the name the manifest and the C ABI use, the kernel templates' policy type
// (kernel_templates/kjit/activation.cuh), and a float64 reference for tests.
#pragma once

#include <string>

namespace kjit {

// As torch.nn.functional: silu, gelu(approximate="tanh"), gelu (erf), relu.
enum class Activation { None, SiLU, GeluTanh, GeluErf, ReLU };

// "none", "silu", "gelu_tanh", "gelu", "relu" (gelu is the erf form, as F.gelu's default).
const char* activation_name(Activation a);
// The inverse of activation_name (case-insensitive; "gelu_erf" is accepted for "gelu"); throws
// InvalidArgument naming the text and the accepted names for anything else.
Activation parse_activation(const std::string& name);
// The policy type a kernel template takes for it: "kjit::act::Silu", ...
const char* activation_policy(Activation a);
// Float64 reference: what PyTorch computes in float64 (NaN in, NaN out).
double activation_ref(Activation a, double z);
// The largest |d act / dz| (error tolerances scale by it): 1 for none and relu, 1.1 for silu,
// 1.13 for both gelus.
double activation_max_slope(Activation a);

namespace ops {
using kjit::Activation;  // the ops' problems name it as ops::Activation too
}

}  // namespace kjit
