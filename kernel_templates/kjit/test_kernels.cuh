// Small kernels the foundation tests and kjit-info launch: they exercise typed, integral and
// boolean template arguments and the 16-bit conversions.
#pragma once

#include "kjit/activation.cuh"
#include "kjit/types.cuh"

namespace kjit {

// y[i] = kScale * x[i] + kOffset (+ 1 if kAddOne), for i < n.
template <class T, int kScale, int kOffset, bool kAddOne>
__global__ void test_affine(const T* __restrict__ x, T* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = kScale * to_float(x[i]) + kOffset + (kAddOne ? 1.f : 0.f);
    y[i] = from_float<T>(v);
  }
}

// y[i] = Act(x[i]) in fp32, stored as T: the activation policies checked against their float64
// reference (kjit::activation_ref) element by element.
template <class T, class Act>
__global__ void test_activation(const float* __restrict__ x, T* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = from_float<T>(Act::template apply<T>(x[i]));
}

// Uses dynamic shared memory of kBytes and a cluster-size-independent result: y[b] = b + kBytes.
template <int kBytes>
__global__ void test_big_smem(int* y) {
  extern __shared__ unsigned char smem[];
  for (int i = threadIdx.x; i < kBytes; i += blockDim.x) smem[i] = static_cast<unsigned char>(i);
  __syncthreads();
  if (threadIdx.x == 0)
    y[blockIdx.x] = blockIdx.x + smem[kBytes - 1] - static_cast<unsigned char>(kBytes - 1) + kBytes;
}

}  // namespace kjit
