// A plain 16-byte vector copy: the bandwidth ceiling kjit-bench compares every op against
// (bytes read + bytes written per second), measured the same way as the ops.
#pragma once

namespace kjit {

struct alignas(16) Bytes16 {
  unsigned int w[4];
};

// n16 16-byte words; each thread moves kUnroll words per grid-stride step, all loads first.
template <int kUnroll>
__global__ void copy16(const Bytes16* __restrict__ src, Bytes16* __restrict__ dst, long long n16) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x * kUnroll;
  for (long long base = static_cast<long long>(blockIdx.x) * blockDim.x * kUnroll + threadIdx.x;
       base < n16; base += stride) {
    Bytes16 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const long long i = base + static_cast<long long>(u) * blockDim.x;
      if (i < n16) v[u] = src[i];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const long long i = base + static_cast<long long>(u) * blockDim.x;
      if (i < n16) dst[i] = v[u];
    }
  }
}

}  // namespace kjit
