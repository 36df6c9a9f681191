// Linear -> GroupNorm -> min -> + bias: the per-runtime state (cuBLASLt handle, plans, kjit's
// per-stream workspaces) and one problem's plan (GEMM layouts + algorithm, fused kernel).
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cublaslt.hpp"
#include "kjit/kernel.hpp"
#include "kjit/op/plan_table.hpp"
#include "kjit/op/stream_workspaces.hpp"
#include "kjit/ops/linear_gn_min.hpp"

namespace kjit::ops::detail {

// All int64 so the key has no padding bytes (it is hashed and compared bytewise). Alignments are
// classes (256, 16 or the element size): what cuBLASLt's heuristic was told it may assume.
struct LgmKey {
  int64_t M, K, N, G, precision, autotune;
  int64_t align_x, align_w, align_lb, out_aligned;
  int64_t bias_add;  // LinearBiasAdd
  // A config forced through LinearGnMinOptions::config (all zero otherwise).
  int64_t forced, threads, slice, sub, seq, vec, pad, smem, affine_smem, out_vec, split;
  // A GEMM algorithm pinned through LinearGnMinOptions::gemm (all zero otherwise).
  int64_t gemm_forced, gemm_id, gemm_tile, gemm_stages, gemm_splitk, gemm_reduction, gemm_swizzle,
      gemm_cluster;
  std::optional<GemmAlgo> pinned_gemm() const;
};

// The GEMM in cuBLASLt's column-major terms. Row-major Y[M, N] = x[M, K] W^T is the column-major
// Y^T (N x M, ld N) = op(A) B with A = W seen column-major (K x N, ld K) and op = transpose, and
// B = x seen column-major (K x M, ld K). The bias epilogue adds lb (length N = rows of D) to
// every column of D, i.e. lb[n] to Y[m, n]. Without it (bias_epilogue false) the fused kernel adds
// lb instead (GnMinConfig::linear_bias).
//
// Fp32x3 (split): A and B are the split rows of fp16 (W as [hi | lo], x as [lo | hi], each part
// pitch = linear_gn_min_split_pitch(K) halves, zero-padded; kjit/f16_split.cuh). The first GEMM
// (a, b: K' = 2 * pitch, alpha = 2^-11, beta = 0, no epilogue) computes (lo*hi + hi*lo) * 2^-11;
// then hi*hi is added in slices of at most kSplitSliceK of the padded K (beta = 1 each): small
// products first. Y then holds the scaled rows' product; the fused kernel undoes the scales.
//
// Why slices: the tensor cores' fp32 accumulation truncates as it adds, so its error grows with
// the length of the sum (measured on the seed problem: max abs error 3.7e-5 for one hi*hi GEMM
// over K = 8192, halving with every halving of the slice, 8.0e-6 at 2048, against strict FP32's
// 1.3e-5). Each slice's sum joins Y through cuBLASLt's epilogue, in fp32 with rounding to nearest.
inline constexpr int64_t kSplitSliceK = 2048;

// The hi*hi GEMM of one slice width.
struct LgmSliceGemm {
  kjit::detail::lt::Layout a, b;
  cublasLtMatmulAlgo_t algo{};
  int64_t k = 0;  // padded columns per slice; 0: none
};

struct LgmGemm {
  kjit::detail::lt::Layout a, b, d;  // C = D (beta = 0)
  bool bias_epilogue = true;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;  // what algo uses (<= kLinearGnMinGemmWorkspace)
  std::string source;    // "heuristic", "autotuned", "cache", "pinned"
  bool split = false;    // Fp32x3: the hi*hi slices below run after the first GEMM
  int64_t pitch = 0;     // halves per part of a split row
  int64_t slices = 0;    // hi*hi slices of slice.k columns, then (tail.k > 0) one of tail.k
  LgmSliceGemm slice, tail;
};

// The workspace of a call: Y, the row minima, (Fp32x3) the split x and its row exponents,
// cuBLASLt's, then (Fp32x3 without a pack) the split W and its exponents; each part rounded up
// to 256 bytes. A call with a pack uses the prefix up to the split W.
// linear_gn_min_workspace_size is bytes(packed).
struct LgmWorkspace {
  size_t y_bytes = 0;
  size_t mins_bytes = 0;
  size_t xs_bytes = 0;
  size_t ws_bytes = 0;
  static LgmWorkspace of(const LinearGnMinProblem& p) {
    auto round256 = [](size_t v) { return (v + 255) / 256 * 256; };
    LgmWorkspace w{round256(static_cast<size_t>(p.M * p.N) * 4),
                   round256(static_cast<size_t>(p.M) * 4), 0, 0};
    if (p.precision == Precision::Fp32x3) {
      w.xs_bytes = linear_gn_min_split_bytes(p.M, p.K);
      w.ws_bytes = linear_gn_min_split_bytes(p.N, p.K);
    }
    return w;
  }
  // Where the exponents follow `rows` split rows.
  static size_t split_exps_offset(int64_t rows, int64_t K) {
    return static_cast<size_t>(rows) * 2 * static_cast<size_t>(linear_gn_min_split_pitch(K)) * 2;
  }
  size_t xs_offset() const { return y_bytes + mins_bytes; }
  size_t lt_offset() const { return xs_offset() + xs_bytes; }
  size_t ws_offset() const { return lt_offset() + kLinearGnMinGemmWorkspace; }
  size_t bytes(bool packed = false) const { return ws_offset() + (packed ? 0 : ws_bytes); }
};

struct LgmPlan {
  LgmGemm gemm;
  Kernel kernel;
  LaunchConfig launch;
  Kernel broadcast;  // config.split: writes out from the row minima
  LaunchConfig broadcast_launch;
  GnMinConfig config;
  int channels = 0;  // N, for the broadcast kernel
  LgmWorkspace ws;
  // Fp32x3: the split kernels for x and (without a pack) W, by their alignment classes.
  Kernel split_x, split_w;
  LaunchConfig split_x_launch, split_w_launch;
};

// Linear-GN-min's per-runtime state (Runtime::extension<LgmState>()).
class LgmState {
 public:
  explicit LgmState(Runtime&) {}
  LgmState(const LgmState&) = delete;
  LgmState& operator=(const LgmState&) = delete;

  cublasLtHandle_t handle(Runtime& rt);  // created on first use
  kjit::op::PlanTable<LgmKey, LgmPlan> plans;

  // kjit's workspaces (Y, row minima, cuBLASLt's), one per stream.
  kjit::op::StreamWorkspaces workspaces;

 private:
  std::once_flag handle_once_;
  std::unique_ptr<kjit::detail::lt::Handle> handle_;
};

// Shared by the op and autotuning.
void configure_desc(kjit::detail::lt::MatmulDesc& desc, const LgmGemm& g, const void* linear_bias);
void init_gemm(const LinearGnMinProblem& p, LgmGemm* g);  // types and layouts
// Fp32x3: the hi*hi slices' algorithms (the heuristic's first), after init_gemm.
void build_slice_gemms(Runtime& rt, LgmState& st, LgmGemm* g);
// Up to `count` usable algorithms of the heuristic for g (initialized), best first (none: an
// empty list; Errc::Cublas when the heuristic's call fails).
std::vector<cublasLtMatmulHeuristicResult_t> gemm_candidates(Runtime& rt, LgmState& st,
                                                             const LgmKey& key, LgmGemm& g,
                                                             int count);
// cublasLtMatmulAlgoCheck for g (an algorithm from the disk cache): fits the workspace too.
bool gemm_algo_ok(Runtime& rt, LgmState& st, const LgmKey& key, LgmGemm& g,
                  const cublasLtMatmulAlgo_t& algo, size_t* workspace);
// Whether a plan's GEMM adds linear_bias (cuBLASLt's epilogue) when autotuning does not choose:
// bias_add's first variant (auto settled by with_pinned_bias_add where a config or GEMM is pinned).
bool gemm_bias_epilogue(LinearBiasAdd bias_add, Precision precision);
// The algorithm's fields as a GemmAlgo (what LinearGnMinInfo reports and a pin names).
GemmAlgo gemm_algo_of(const cublasLtMatmulAlgo_t& algo);
// The heuristic's top kLinearGnMinGemmTopK for g within kjit's workspace (none: an empty list).
std::vector<cublasLtMatmulHeuristicResult_t> gemm_top(Runtime& rt, LgmState& st, const LgmKey& key,
                                                      LgmGemm& g);
// The key's pinned algorithm among gemm_top (g initialized, its bias variant set), or
// InvalidArgument naming the field "gemm" and listing the problem's algorithms (Errc::Cublas when
// it has none).
cublasLtMatmulHeuristicResult_t pinned_gemm(Runtime& rt, LgmState& st, const LinearGnMinProblem& p,
                                            const LgmKey& key, LgmGemm& g);
// The GEMM part of a plan with the heuristic's first algorithm (alignment classes from the key),
// or the key's pinned one.
void build_gemm(Runtime& rt, LgmState& st, const LinearGnMinProblem& p, const LgmKey& key,
                LgmGemm* g);
// x and w are the caller's operands, or (split) the split rows of x and W.
void run_gemm(const LgmGemm& g, const void* x, const void* w, const void* lb, CUdeviceptr y,
              CUdeviceptr lt_ws, CUstream stream, cublasLtHandle_t h);
// Fp32x3 (runtime/src/ops/linear_gn_min_split.cpp): the split kernel for `rows` rows of p.K
// floats whose pointer has alignment class `align`, and its launch shape.
void build_split_kernel(Runtime& rt, const LinearGnMinProblem& p, int64_t rows, int64_t align,
                        Kernel* k, LaunchConfig* launch);
// Splits src [rows, K] into dst's rows: x puts lo first ([lo | hi]), W hi first ([hi | lo]).
// exps: where the rows' scale exponents go.
void launch_split(const Kernel& k, const LaunchConfig& launch, const void* src, CUdeviceptr dst,
                  CUdeviceptr exps, long long rows, int64_t pitch, bool lo_first, CUstream stream);
// Fp32x3: the split's row exponents of x and W, which the fused kernel undoes (null otherwise).
struct SplitExps {
  const int* x = nullptr;
  const int* w = nullptr;
};
// The fused kernel of config c (its linear_bias set to match plan->gemm): loads it and computes
// its launch.
void build_kernel(Runtime& rt, const LinearGnMinProblem& p, const GnMinConfig& c, CUstream stream,
                  LgmPlan* plan);
void launch_kernel(const LgmPlan& plan, CUdeviceptr y, const float* lb, const float* gamma,
                   const float* beta, const float* bias, float eps, float* out, long long M,
                   CUstream stream, SplitExps exps = {});
// Times the top-8 cuBLASLt algorithms and the kernel's candidate configs on scratch buffers of
// the problem's size, keeps the fastest of each (stored in the disk cache, reused from it).
void autotune(Runtime& rt, LgmState& st, const LinearGnMinProblem& p, const LgmKey& key, float eps,
              LgmPlan* plan);

}  // namespace kjit::ops::detail
