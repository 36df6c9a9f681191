// Activation policies for kernel templates: a template takes `class Act` and calls
// Act::template apply<T>(z) on each fp32 value before storing it as T. The runtime names them
// through kjit::activation_policy (kjit/activation.hpp).
//
// 16-bit outputs tolerate a few ulp of fp32 error, so they use tanh.approx (~2^-11 relative)
// where an activation needs a tanh; fp32 outputs use the accurate forms.
//
// kFold: a kernel may fold this factor into its normalization's scale and shift (z * kFold
// costs nothing there) and call Act::template folded<T>(z * kFold) instead of apply<T>(z); SiLU
// uses it to save one multiply per element on 16-bit outputs. 1 for the others.
#pragma once

namespace kjit {
namespace act {

__forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// silu(z) = z * sigmoid(z). fp32 outputs: exp and a fast divide (~2 ulp, two MUFU ops).
// 16-bit outputs: from h = z / 2, z * sigmoid(z) = h + h * tanh(h): one tanh.approx and one FMA
// (error ~2^-11 * |h| absolute).
struct Silu {
  __forceinline__ static float of_half(float h) { return fmaf(h, tanh_approx(h), h); }
  static constexpr float kFold = 0.5f;  // for 16-bit outputs only: see folded()
  template <class T>
  __forceinline__ static float apply(float z) {
    if constexpr (sizeof(T) == 4) {
      return __fdividef(z, 1.f + __expf(-z));
    } else {
      return of_half(0.5f * z);
    }
  }
  // h = z / 2 for 16-bit outputs (kFold); fp32 outputs never fold.
  template <class T>
  __forceinline__ static float folded(float h) {
    if constexpr (sizeof(T) == 4) {
      return apply<T>(h);
    } else {
      return of_half(h);
    }
  }
};

// An activation that folds nothing: kFold 1, folded<T>(h) = apply<T>(h).
template <class Act>
struct NoFold {
  static constexpr float kFold = 1.f;
  template <class T>
  __forceinline__ static float folded(float h) {
    return Act::template apply<T>(h);
  }
};

struct None : NoFold<None> {
  template <class T>
  __forceinline__ static float apply(float z) {
    return z;
  }
};

// gelu(z, approximate="tanh") = z / 2 * (1 + tanh(sqrt(2/pi) * (z + 0.044715 z^3))).
struct GeluTanh : NoFold<GeluTanh> {
  template <class T>
  __forceinline__ static float apply(float z) {
    const float u = 0.7978845608028654f * fmaf(0.044715f * z, z * z, z);
    const float t = sizeof(T) == 4 ? tanhf(u) : tanh_approx(u);
    const float h = 0.5f * z;
    return fmaf(h, t, h);
  }
};

// gelu(z) = z / 2 * (1 + erf(z / sqrt(2))), F.gelu's default.
struct GeluErf : NoFold<GeluErf> {
  template <class T>
  __forceinline__ static float apply(float z) {
    const float h = 0.5f * z;
    return fmaf(h, erff(z * 0.7071067811865476f), h);
  }
};

// relu(z) = max(z, 0), NaN kept (fmaxf would turn it into 0; PyTorch propagates it).
struct Relu : NoFold<Relu> {
  template <class T>
  __forceinline__ static float apply(float z) {
    return z < 0.f ? 0.f : z;
  }
};

}  // namespace act
}  // namespace kjit
