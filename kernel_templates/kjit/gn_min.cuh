// GroupNorm -> min over channels -> + bias, the part of Linear -> GroupNorm -> min -> + bias that
// follows the GEMM. y is the GEMM's output [M, kN] (row-major, fp32, 16-byte aligned); the
// result is PyTorch's broadcast of [M, 1] + [1, kN, 1, 1]: shape [1, kN, M, 1], stored as a
// contiguous [kN, M] buffer, out[c * M + m] = min_m + bias[c], where
//   min_m = min over c of ((y[m, c] - mean_g) * rstd_g * gamma[c] + beta[c]),  g = c / (kN / kG).
//
// Work split. A CTA of kThreads threads owns kRows = kPar * kSeq consecutive rows. It walks them
// kPar rows at a time: the kPar rows (contiguous in y) are read once with coalesced 16-byte loads
// (kVec = 4) into shared memory (kSmem; rows too long for shared memory are read from global
// memory instead), and each row is handled by a slice of kSlice = kThreads / kPar threads. In a
// slice, a sub-team of kSub threads owns one group at a time (kSub = kThreads: the whole CTA owns
// each group in turn) and computes exact two-pass statistics (mean, then squared deviations) from
// the on-chip copy, then the normalized, affine minimum. While a block of rows is reduced, the
// next one is already being loaded into registers. Finally the CTA writes, for each channel c, the
// run out[c * M + m0 .. m0 + kRows): 16-byte stores when kOutVec (M % 4 == 0, out 16-byte aligned).
//
// kSplit: the CTA writes only its rows' minima, to out[m] (out is then an [M] buffer), and
// gn_min_broadcast writes the [kN, M] result. A CTA owns few rows, so its runs of kRows floats
// per channel are short; the separate broadcast writes whole rows of out instead. On the H200,
// seed problem: 42 us for both kernels against 66 us fused.
//
// kLinBias: y came from a GEMM without cuBLASLt's bias epilogue, and the kernel adds the Linear's
// bias lb[c] to every value as it reads it (in fp32, as the epilogue would). Some shapes get a
// faster cuBLASLt kernel without the epilogue, and the add costs nothing here.
//
// kScaled (with kLinBias): y is Fp32x3's split GEMM of rows scaled by powers of two
// (kjit/f16_split.cuh), and the kernel multiplies y[m, c] by 2^(row_exp[m] + col_exp[c]) as it
// reads it, before it adds lb: exact, the scales being powers of two. Unused otherwise (null).
//
// The file includes no toolkit header (so NVRTC stays fast), and it also compiles as host C++ for
// kjit's CPU emulation test.
#pragma once

#include "kjit/pdl.cuh"

// The host emulation test defines it empty (GCC warns about #pragma unroll).
#ifndef KJIT_GN_MIN_UNROLL
#define KJIT_GN_MIN_UNROLL _Pragma("unroll")
#endif

namespace kjit {
namespace gnmin {

struct alignas(16) F4 {
  float x, y, z, w;
};

__forceinline__ float pos_inf() {
  return __int_as_float(0x7f800000);
}

// min that propagates NaN, as torch.min does (fminf would drop it).
__forceinline__ float nan_min(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return a != a ? a : (b != b ? b : (b < a ? b : a));
#endif
}

// Sum / min over aligned segments of W lanes (a power of two <= 32). Every lane of the warp must
// call it; each lane gets its segment's result, the same bits in every lane of the segment.
template <int W>
__forceinline__ float seg_sum(float v) {
  KJIT_GN_MIN_UNROLL
  for (int o = W / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <int W>
__forceinline__ float seg_min(float v) {
  KJIT_GN_MIN_UNROLL
  for (int o = W / 2; o > 0; o >>= 1) v = nan_min(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the whole CTA (kThreads a multiple of 32); every thread gets the same bits. scratch:
// 32 floats, free again when the call returns.
template <int kThreads>
__forceinline__ float block_sum(float v, float* scratch) {
  v = seg_sum<32>(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = lane < kThreads / 32 ? scratch[lane] : 0.f;
  t = seg_sum<32>(t);
  __syncthreads();
  return t;
}

template <int kN, int kG, int kThreads, int kSlice, int kSub, int kSeq, int kVec, bool kPad,
          bool kSmem, bool kAffineSmem, bool kOutVec>
struct Traits {
  static constexpr int kCg = kN / kG;             // channels per group
  static constexpr int kPar = kThreads / kSlice;  // rows reduced at once
  static constexpr int kRows = kPar * kSeq;       // rows per CTA
  static constexpr bool kBlockSub = kSub == kThreads && kThreads > 32;
  static constexpr int kTeams = kSlice / kSub;  // sub-teams per slice
  static constexpr int kGroupIters = (kG + kTeams - 1) / kTeams;
  static constexpr int kPer = (kCg + kSub - 1) / kSub;  // channels per thread per group
  static constexpr bool kHold = kPer <= 16;             // held in registers between the passes
  static constexpr int kBlockElems = kPar * kN;
  static constexpr int kLd = kSmem ? (kBlockElems / kVec + kThreads - 1) / kThreads : 1;
  static constexpr int kRowsPad = (kRows + 3) / 4 * 4;
  static constexpr int kAffinePad = (kN + (kPad ? kN / 32 + 1 : 0) + 3) / 4 * 4;  // per vector

  static_assert(kN >= 1 && kG >= 1 && kN % kG == 0, "kN must be a multiple of kG");
  static_assert(kThreads >= 32 && kThreads <= 1024 && kThreads % 32 == 0, "whole warps");
  static_assert(kSlice >= 1 && (kSlice & (kSlice - 1)) == 0 && kThreads % kSlice == 0,
                "a slice is a power of two dividing the CTA");
  static_assert(kSub >= 1 && (kSub & (kSub - 1)) == 0 && kSlice % kSub == 0,
                "a sub-team is a power of two dividing the slice");
  static_assert(kSub <= 32 || (kSub == kThreads && kSlice == kThreads),
                "sub-teams are warp segments, or the whole CTA");
  static_assert(kSeq >= 1, "at least one block of rows");
  static_assert(kVec == 1 || (kVec == 4 && kBlockElems % 4 == 0), "16-byte loads need whole F4s");
  static_assert(!kOutVec || kRows % 4 == 0, "16-byte stores need rows in fours");
  static_assert(kSmem || !kPad, "padding is a shared-memory layout");
  static_assert(kSmem || !kAffineSmem, "gamma/beta are staged only next to staged rows");
  static_assert(static_cast<long long>(kN) * kRows <= 0x7fffffffLL, "kN * kRows fits an int");

  // Shared-memory index of block element e: one pad float per 32 breaks the bank conflicts of
  // sub-teams narrower than a warp reading their groups at a stride of kCg.
  static __forceinline__ int sidx(int e) { return kPad ? e + (e >> 5) : e; }
};

}  // namespace gnmin

// Dynamic shared memory: 64 floats of reduction scratch, kRowsPad row minima, (kAffineSmem)
// gamma and beta, and (kSmem) the block of kPar rows; gamma, beta and rows padded alike. The host
// computes the same size (gn_min_smem_bytes). gamma and beta are staged when sub-teams narrower
// than a warp read them at a stride of kCg (from global memory that would touch a cache line per
// lane and instruction).
template <int kN, int kG, int kThreads, int kSlice, int kSub, int kSeq, int kVec, bool kPad,
          bool kSmem, bool kAffineSmem, bool kOutVec, bool kLinBias, bool kSplit, bool kScaled>
__global__ void __launch_bounds__(kThreads)
    gn_min_fwd(const float* __restrict__ y, const float* __restrict__ lb,
               const float* __restrict__ gamma, const float* __restrict__ beta,
               const float* __restrict__ bias, float eps, float* __restrict__ out, long long M,
               const int* __restrict__ row_exp, const int* __restrict__ col_exp) {
  static_assert(!kScaled || kLinBias, "the bias is added after the scales are undone");
  // kOutVec means the broadcast kernel's stores when kSplit.
  using T = gnmin::Traits<kN, kG, kThreads, kSlice, kSub, kSeq, kVec, kPad, kSmem, kAffineSmem,
                          kOutVec && !kSplit>;
  using gnmin::F4;
  using gnmin::nan_min;

  pdl_wait();  // y is the GEMM's output (programmatic launch)
  extern __shared__ F4 gn_min_smem[];
  float* red = reinterpret_cast<float*>(gn_min_smem);   // 32: block sums
  float* wmin = red + 32;                               // 32: per-warp minima
  float* mins = red + 64;                               // kRowsPad: the CTA's row minima
  float* gs = mins + T::kRowsPad;                       // kAffineSmem: gamma
  float* bs = gs + (kAffineSmem ? T::kAffinePad : 0);   // kAffineSmem: beta
  float* buf = bs + (kAffineSmem ? T::kAffinePad : 0);  // kSmem: the block of rows

  const int tid = threadIdx.x;
  const int slice = tid / kSlice;  // row of the block this thread works on
  const int st = tid % kSlice;
  const int team = st / kSub;
  const int sl = st % kSub;
  const long long tile0 = static_cast<long long>(blockIdx.x) * T::kRows;

  // Registers holding the next block of rows while the current one is reduced.
  float r[T::kLd][kVec];
  auto load = [&](long long mb) {
    const long long rows = M - mb < T::kPar ? M - mb : T::kPar;
    const long long valid = rows * kN;
    const float* __restrict__ src = y + mb * kN;
    KJIT_GN_MIN_UNROLL
    for (int i = 0; i < T::kLd; ++i) {
      const long long e = (static_cast<long long>(i) * kThreads + tid) * kVec;
      if constexpr (kVec == 4) {
        if (e + 4 <= valid) {
          const F4 v = *reinterpret_cast<const F4*>(src + e);
          r[i][0] = v.x;
          r[i][1] = v.y;
          r[i][2] = v.z;
          r[i][3] = v.w;
        } else {
          KJIT_GN_MIN_UNROLL
          for (int j = 0; j < 4; ++j) r[i][j] = e + j < valid ? src[e + j] : 0.f;
        }
      } else {
        r[i][0] = e < valid ? src[e] : 0.f;
      }
      if constexpr (kScaled) {
        KJIT_GN_MIN_UNROLL
        for (int j = 0; j < kVec; ++j)
          if (e + j < valid)
            r[i][j] =
                ldexpf(r[i][j], __ldg(row_exp + mb + (e + j) / kN) + __ldg(col_exp + (e + j) % kN));
      }
    }
  };
  auto store = [&]() {
    KJIT_GN_MIN_UNROLL
    for (int i = 0; i < T::kLd; ++i) {
      const int e = (i * kThreads + tid) * kVec;
      if (e < T::kBlockElems) {
        if constexpr (kLinBias) {
          KJIT_GN_MIN_UNROLL
          for (int j = 0; j < kVec; ++j) r[i][j] += __ldg(lb + (e + j) % kN);
        }
        if constexpr (kVec == 4 && !kPad) {
          *reinterpret_cast<F4*>(buf + e) = F4{r[i][0], r[i][1], r[i][2], r[i][3]};
        } else {
          KJIT_GN_MIN_UNROLL
          for (int j = 0; j < kVec; ++j) buf[T::sidx(e + j)] = r[i][j];
        }
      }
    }
  };

  // The minimum over the row of this thread's slice, for the block of rows starting at mb;
  // thread 0 of the slice stores it to mins[s * kPar + slice].
  auto ga = [&](int c) -> float {
    if constexpr (kAffineSmem) {
      return gs[T::sidx(c)];
    } else {
      return __ldg(gamma + c);
    }
  };
  auto be = [&](int c) -> float {
    if constexpr (kAffineSmem) {
      return bs[T::sidx(c)];
    } else {
      return __ldg(beta + c);
    }
  };
  auto reduce_rows = [&](long long mb, int s) {
    const bool row_ok = mb + slice < M;
    const float* __restrict__ grow = y + (mb + slice) * kN;  // the row (global path)
    float tmin = gnmin::pos_inf();
    for (int it = 0; it < T::kGroupIters; ++it) {
      const int g = it * T::kTeams + team;
      const bool ok = g < kG && (kSmem || row_ok);
      const int c0 = ok ? g * T::kCg : 0;
      auto val = [&](int c) -> float {
        if constexpr (kSmem) {
          return buf[T::sidx(slice * kN + c0 + c)];
        } else if constexpr (kScaled) {
          return ldexpf(grow[c0 + c], __ldg(row_exp + mb + slice) + __ldg(col_exp + c0 + c)) +
                 __ldg(lb + c0 + c);
        } else if constexpr (kLinBias) {
          return grow[c0 + c] + __ldg(lb + c0 + c);
        } else {
          return grow[c0 + c];
        }
      };
      auto team_sum = [&](float v) -> float {
        if constexpr (T::kBlockSub) {
          return gnmin::block_sum<kThreads>(v, red);
        } else {
          return gnmin::seg_sum<kSub>(v);
        }
      };
      float held[T::kHold ? T::kPer : 1];
      float sum = 0.f;
      if constexpr (T::kHold) {
        KJIT_GN_MIN_UNROLL
        for (int j = 0; j < T::kPer; ++j) {
          const int c = j * kSub + sl;
          held[j] = ok && c < T::kCg ? val(c) : 0.f;
          sum += held[j];
        }
      } else {
        if (ok)
          for (int c = sl; c < T::kCg; c += kSub) sum += val(c);
      }
      const float mean = team_sum(sum) / static_cast<float>(T::kCg);
      float m2 = 0.f;
      if constexpr (T::kHold) {
        KJIT_GN_MIN_UNROLL
        for (int j = 0; j < T::kPer; ++j) {
          const float d = held[j] - mean;
          if (ok && j * kSub + sl < T::kCg) m2 += d * d;
        }
      } else {
        if (ok)
          for (int c = sl; c < T::kCg; c += kSub) {
            const float d = val(c) - mean;
            m2 += d * d;
          }
      }
      const float rstd = 1.f / sqrtf(team_sum(m2) / static_cast<float>(T::kCg) + eps);
      if (ok) {
        if constexpr (T::kHold) {
          KJIT_GN_MIN_UNROLL
          for (int j = 0; j < T::kPer; ++j) {
            const int c = j * kSub + sl;
            if (c < T::kCg) tmin = nan_min(tmin, (held[j] - mean) * rstd * ga(c0 + c) + be(c0 + c));
          }
        } else {
          for (int c = sl; c < T::kCg; c += kSub)
            tmin = nan_min(tmin, (val(c) - mean) * rstd * ga(c0 + c) + be(c0 + c));
        }
      }
    }
    if constexpr (kSlice <= 32) {
      tmin = gnmin::seg_min<kSlice>(tmin);
      if (st == 0) mins[s * T::kPar + slice] = tmin;
    } else {
      constexpr int kWarpsPerSlice = kSlice / 32;
      tmin = gnmin::seg_min<32>(tmin);
      if ((tid & 31) == 0) wmin[tid >> 5] = tmin;
      __syncthreads();
      if (st == 0) {
        float v = wmin[slice * kWarpsPerSlice];
        for (int w = 1; w < kWarpsPerSlice; ++w) v = nan_min(v, wmin[slice * kWarpsPerSlice + w]);
        mins[s * T::kPar + slice] = v;
      }
    }
  };

  if constexpr (kSmem) load(tile0);
  if constexpr (kAffineSmem) {  // visible after the first barrier below
    for (int c = tid; c < kN; c += kThreads) {
      gs[T::sidx(c)] = __ldg(gamma + c);
      bs[T::sidx(c)] = __ldg(beta + c);
    }
  }
  for (int s = 0; s < kSeq; ++s) {
    const long long mb = tile0 + static_cast<long long>(s) * T::kPar;
    if (mb >= M) break;  // the same for the whole CTA
    if constexpr (kSmem) {
      store();
      __syncthreads();
      if (s + 1 < kSeq && mb + T::kPar < M) load(mb + T::kPar);
    }
    reduce_rows(mb, s);
    __syncthreads();  // buf, wmin free again; mins visible
  }

  // out[c * M + m] = mins[m - tile0] + bias[c] for the CTA's rows: a run of kRows per channel.
  const int rows_here = M - tile0 < T::kRows ? static_cast<int>(M - tile0) : T::kRows;
  if constexpr (kSplit) {
    for (int q = tid; q < rows_here; q += kThreads) out[tile0 + q] = mins[q];
  } else if constexpr (kOutVec) {
    constexpr int kQ = T::kRows / 4;
    for (int i = tid; i < kN * kQ; i += kThreads) {
      const int c = i / kQ, q = i % kQ;
      if (4 * q < rows_here) {
        const float b = __ldg(bias + c);
        const F4 o{mins[4 * q] + b, mins[4 * q + 1] + b, mins[4 * q + 2] + b, mins[4 * q + 3] + b};
        *reinterpret_cast<F4*>(out + static_cast<long long>(c) * M + tile0 + 4 * q) = o;
      }
    }
  } else {
    for (int i = tid; i < kN * T::kRows; i += kThreads) {
      const int c = i / T::kRows, q = i % T::kRows;
      if (q < rows_here) out[static_cast<long long>(c) * M + tile0 + q] = mins[q] + __ldg(bias + c);
    }
  }
}

// out[c * M + m] = row_min[m] + bias[c] for the kSplit path. A thread owns kVec consecutive rows
// (kVec = 4: M % 4 == 0 and out 16-byte aligned) and walks the channels blockIdx.y, + gridDim.y,
// ...: every warp store is a contiguous 512 bytes.
template <int kThreads, int kVec>
__global__ void __launch_bounds__(kThreads)
    gn_min_broadcast(const float* __restrict__ row_min, const float* __restrict__ bias,
                     float* __restrict__ out, long long M, int N) {
  static_assert(kVec == 1 || kVec == 4, "scalar or 16-byte stores");
  pdl_wait();  // the row minima come from the kernel before
  const long long m = (static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x) * kVec;
  if (m >= M) return;
  float v[kVec];
  KJIT_GN_MIN_UNROLL
  for (int j = 0; j < kVec; ++j) v[j] = row_min[m + j];
  for (int c = static_cast<int>(blockIdx.y); c < N; c += static_cast<int>(gridDim.y)) {
    const float b = __ldg(bias + c);
    float* o = out + static_cast<long long>(c) * M + m;
    if constexpr (kVec == 4) {
      *reinterpret_cast<gnmin::F4*>(o) = gnmin::F4{v[0] + b, v[1] + b, v[2] + b, v[3] + b};
    } else {
      o[0] = v[0] + b;
    }
  }
}

}  // namespace kjit
