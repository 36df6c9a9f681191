// A test kernel for LayerNorm's CTA statistics (kjit/layer_norm.cuh): rownorm::cta_moments on
// per-thread moments the test crafts, every thread's result written, so that a test checks them
// against float64 and that every thread of a CTA got the same bits.
#pragma once

#include "kjit/layer_norm.cuh"

namespace kjit {

// CTA b combines threads [b * kThreads, (b + 1) * kThreads) of (n, m, m2) with count cnt[b],
// its sums scaled as a row of cnt[b] values would be; out[i] = (mean, M2) as thread i returned
// them.
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    test_cta_moments(const float* n, const float* m, const float* m2, const float* cnt,
                     float2* out) {
  __shared__ float4 warps[kThreads / 32];
  __shared__ float scratch[32];
  const long long i = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x;
  const float c = cnt[blockIdx.x];
  const rownorm::SumScale sc(static_cast<int>(c));
  out[i] = rownorm::cta_moments<kThreads>(n[i], m[i], m2[i], c, sc, warps, scratch);
}

}  // namespace kjit
