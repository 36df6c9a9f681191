// Linear -> GroupNorm -> min over channels -> + bias (docs/ARCHITECTURE.md, "The seed workloads"),
// exactly as
//
//   x = nn.Linear(K, N)(x)                       # x [M, K] -> [M, N]; weight [N, K], bias lb [N]
//   x = nn.GroupNorm(G, N)(x)                    # own gamma/beta [N] and eps
//   x = torch.min(x, dim=1, keepdim=True)[0]     # [M, 1]
//   return x + bias                              # bias of shape (1, N, 1, 1)
//
// PyTorch broadcasting right-aligns [M, 1] with [1, N, 1, 1], so the result has shape
// [1, N, M, 1]: out[0, c, m, 0] = min_m + bias[c]. kjit writes it as that contiguous tensor, i.e.
// a [N, M] buffer with out[c * M + m]. cuBLASLt computes Y = x W^T + lb into a workspace (lb
// added by its bias epilogue, or by the kernel when the GEMM without the epilogue is faster); one
// NVRTC kernel specialized on (N, G, launch shape) reads Y once and writes out.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kjit/cuda.hpp"
#include "kjit/op/target.hpp"
#include "kjit/runtime.hpp"
#include "kjit/spec.hpp"

namespace kjit::ops {

// The GEMM's arithmetic. Everything after the GEMM is fp32 in every mode.
enum class Precision {
  Fp32,        // strict FP32: CUBLAS_COMPUTE_32F (the default; matches PyTorch with TF32 off)
  Tf32,        // opt-in: fp32 inputs, CUBLAS_COMPUTE_32F_FAST_TF32 (10-bit mantissa products)
  Bf16Inputs,  // opt-in: x and weight given as bf16 by the caller; fp32 accumulate and output
  // opt-in split precision: every row of x and of W scaled by a power of two and split into two
  // fp16 parts, a * 2^e = hi + lo * 2^-11 (22 significant bits); Y = (x_lo W_hi^T + x_hi W_lo^T)
  // * 2^-11 + x_hi W_hi^T on FP16 tensor cores with fp32 accumulation, the scales undone exactly
  // after the GEMM: accuracy of the strict-FP32 class at the cost of about 3 FP16 GEMMs
  // (docs/OPS.md, "Split precision"). Prepack W once (prepack_linear_gn_min) or let each call
  // split it.
  Fp32x3,
};
const char* precision_name(Precision p);  // "fp32", "tf32", "bf16-inputs", "fp32x3"
// The inverse of precision_name; throws InvalidArgument naming the text for anything else.
Precision parse_precision(const std::string& s);

struct LinearGnMinProblem {
  int64_t M = 0;  // batch: rows of x (>= 1)
  int64_t K = 0;  // in_features (>= 1)
  int64_t N = 0;  // out_features = GroupNorm channels (>= 1, <= 2^24)
  int64_t G = 0;  // GroupNorm groups (>= 1, N % G == 0)
  Precision precision = Precision::Fp32;

  std::string describe() const;
  std::vector<int64_t> output_shape() const { return {1, N, M, 1}; }  // PyTorch's result shape
};

// Launch shape of the fused GroupNorm/min/bias kernel: what the heuristic picks and autotuning
// searches over. A CTA of `threads` threads owns rows() = par() * seq consecutive rows; it reduces
// par() rows at a time, each with a slice of `slice` threads, in which `sub` threads share one
// group (sub == threads: the whole CTA owns each group in turn).
struct GnMinConfig {
  int threads = 256;
  int slice = 256;
  int sub = 1;
  int seq = 1;
  int vec = 4;       // 16-byte loads of Y (4) or scalar (1)
  bool pad = true;   // shared-memory padding against bank conflicts (sub-warp sub-teams)
  bool smem = true;  // rows staged in shared memory; false: read from global (very long rows)
  bool affine_smem = false;  // gamma/beta staged in shared memory (sub-warp sub-teams)
  // 16-byte stores of out: M % 4 == 0, out 16-byte aligned, and (unless split) rows() % 4 == 0.
  bool out_vec = false;
  // Two kernels: the CTAs write only their rows' minima (kjit's workspace), and a broadcast
  // kernel writes out with fully coalesced stores (false: each CTA writes its rows' runs of out).
  bool split = false;
  // The kernel adds linear_bias to Y as it reads it, and the GEMM runs without cuBLASLt's bias
  // epilogue (false: the epilogue adds it). The plan picks the faster GEMM of the two.
  // Fp32x3 needs it: Y holds the split GEMM of the scaled rows, and the kernel (gn_min_spec's
  // `scaled`, from the precision) undoes the scales as it reads Y, then adds linear_bias.
  bool linear_bias = false;
  int par() const { return threads / slice; }
  int rows() const { return par() * seq; }
  std::string describe() const;
  bool operator==(const GnMinConfig& o) const {
    return threads == o.threads && slice == o.slice && sub == o.sub && seq == o.seq &&
           vec == o.vec && pad == o.pad && smem == o.smem && affine_smem == o.affine_smem &&
           out_vec == o.out_vec && split == o.split && linear_bias == o.linear_bias;
  }
  bool operator!=(const GnMinConfig& o) const { return !(*this == o); }
};

// The config describe() wrote ("threads=256 slice=32 sub=4 seq=2 vec=4 pad affine-smem split",
// the words in any order; an absent flag is false, and "global" clears smem): the fused kernel's
// config as kjit-bench --sweep and autotuning report it, read back to be pinned
// (LinearGnMinOptions::config). Throws InvalidArgument (field "config") naming the word and the
// rule for any other text; whether the config can run a problem is checked where it is used.
GnMinConfig parse_gn_min_config(std::string_view text);

// Who adds the Linear's bias: cuBLASLt's bias epilogue, or the fused kernel as it reads Y (the
// GEMM then runs without an epilogue). Auto: the plan's choice (autotuning times both).
enum class LinearBiasAdd { Auto, Epilogue, Kernel };
const char* bias_add_name(LinearBiasAdd b);  // "auto", "epilogue", "kernel"
// The inverse of bias_add_name; throws InvalidArgument naming the text for anything else.
LinearBiasAdd parse_bias_add(const std::string& s);
// Whether the fused kernel adds linear_bias (GnMinConfig::linear_bias), for each variant a call
// with this mode may build, in the order autotuning times them: one without autotuning (Auto
// keeps cuBLASLt's epilogue), both when autotuning under Auto. kjit-precompile compiles these.
// Fp32x3: only the kernel (it adds the bias after undoing the split's scales; bias_add =
// Epilogue is an InvalidArgument there).
std::vector<bool> linear_gn_min_kernel_adds_bias(LinearBiasAdd b, bool autotune,
                                                 Precision precision = Precision::Fp32);

// A cuBLASLt algorithm of the GEMM, by the config attributes kjit reads from it
// (cublasLtMatmulAlgoConfigGetAttribute: ID, TILE_ID, STAGES_ID, SPLITK_NUM, REDUCTION_SCHEME,
// CTA_SWIZZLING, CLUSTER_SHAPE_ID), as LinearGnMinInfo::gemm_algo reports it: what
// LinearGnMinOptions::gemm pins.
struct GemmAlgo {
  int id = 0, tile = 0, stages = 0, splitk = 0, reduction = 0, swizzle = 0, cluster = 0;
  // "id=21 tile=20 stages=8 splitk=1 reduction=0 swizzle=0 cluster=0"
  std::string describe() const;
  friend bool operator==(const GemmAlgo& a, const GemmAlgo& b) {
    return a.id == b.id && a.tile == b.tile && a.stages == b.stages && a.splitk == b.splitk &&
           a.reduction == b.reduction && a.swizzle == b.swizzle && a.cluster == b.cluster;
  }
  friend bool operator!=(const GemmAlgo& a, const GemmAlgo& b) { return !(a == b); }
};
// The inverse of GemmAlgo::describe (the seven words in any order, each once). Throws
// InvalidArgument (field "config") naming the word and the rule for any other text.
GemmAlgo parse_gemm_algo(std::string_view text);

struct LinearGnMinOptions {
  float eps = 1e-5f;  // GroupNorm eps (finite, >= 0)
  LinearBiasAdd bias_add = LinearBiasAdd::Auto;
  bool autotune = false;  // also enabled by KJIT_AUTOTUNE=1: time the top 8 cuBLASLt algorithms
                          // and the kernel's candidate configs once, keep the fastest (disk cache)
  // The fused kernel's config, instead of the heuristic's or autotuning's (benchmarks, pinning a
  // deployment); the GEMM is then the heuristic's (or `gemm`). Its linear_bias says who adds the
  // Linear's bias (with_pinned_bias_add): true settles bias_add auto as kernel (bias_add epilogue
  // is then an InvalidArgument), false settles auto as epilogue (fp32x3 always adds it in the
  // kernel), so a config a prepare reported runs as it did. One that cannot run the problem (or,
  // with out_vec, an out not 16-byte aligned) is an InvalidArgument naming the field "config".
  std::optional<GnMinConfig> config;
  // The GEMM's cuBLASLt algorithm, instead of the heuristic's first or autotuning's: one of the
  // heuristic's top kLinearGnMinGemmTopK for the problem in the call's bias variant (with the
  // config, its linear_bias; without one, bias_add, auto then settling as epilogue except for
  // fp32x3) and alignment classes, which are what autotuning times; with an autotune it then
  // times only the kernel's configs. Fp32x3's hi*hi slices keep the heuristic's first. Any other
  // is an InvalidArgument naming the field "gemm" and listing those the problem has
  // (linear_gn_min_gemm_algos).
  std::optional<GemmAlgo> gemm;
};

// How many of cuBLASLt's heuristic algorithms autotuning times and a pinned gemm may name.
constexpr int kLinearGnMinGemmTopK = 8;

// Pins what a config text names (C ABI, Python, a manifest's "config"): "<config>" (see
// parse_gn_min_config) sets opt.config, "<config>; GEMM <algo>" (LinearGnMinInfo::pin()) sets
// opt.config and opt.gemm. Allocates nothing for a good text; throws InvalidArgument (field
// "config") naming the part and the rule otherwise.
void pin_config_text(std::string_view text, LinearGnMinOptions* opt);

// Device memory a call needs besides its inputs and output: Y [M, N] fp32 and the row minima [M]
// (each rounded up to 256 bytes), then the cuBLASLt workspace. Must be 256-byte aligned.
struct Workspace {
  void* ptr = nullptr;
  size_t bytes = 0;
};
// Fp32x3 adds the split x (linear_gn_min_split_bytes(M, K)) and, for a call without a prepacked
// weight, the split W (linear_gn_min_split_bytes(N, K)) at the end; a call with a pack needs only
// linear_gn_min_workspace_size(p, true), a prefix of the same layout.
size_t linear_gn_min_workspace_size(const LinearGnMinProblem& p, bool packed_weight = false);
constexpr size_t kLinearGnMinGemmWorkspace = size_t{32} << 20;  // the cuBLASLt part
// fp16 elements per part of a split row (Fp32x3): K rounded up to a multiple of 128 (256 bytes).
int64_t linear_gn_min_split_pitch(int64_t K);
// Bytes of `rows` split rows of K columns: rows * 2 parts * split_pitch(K) halves, then the rows'
// scale exponents (rows int32), rounded up to 256 bytes.
size_t linear_gn_min_split_bytes(int64_t rows, int64_t K);

// A weight prepacked for a precision that transforms it (today Fp32x3: W's rows scaled and split
// into fp16 hi and lo once, laid out [N rows of hi | lo] and the N scale exponents,
// linear_gn_min_split_bytes(N, K) bytes), owned by the caller and used
// by any number of calls, as inference runtimes keep constant weights prepacked. It records what
// it was made for (N, K, precision, the runtime's context): a call whose problem differs is an
// InvalidArgument naming both, never a silent wrong answer. It holds a copy: a W changed later
// needs a new pack. Device memory of the Runtime that made it: destroy the pack first.
class LinearGnMinWeights {
 public:
  LinearGnMinWeights() = default;  // empty: refused by linear_gn_min
  LinearGnMinWeights(LinearGnMinWeights&&) noexcept = default;
  LinearGnMinWeights& operator=(LinearGnMinWeights&&) noexcept = default;
  LinearGnMinWeights(const LinearGnMinWeights&) = delete;
  LinearGnMinWeights& operator=(const LinearGnMinWeights&) = delete;

  bool empty() const { return buf_.ptr() == 0; }
  int64_t N() const { return N_; }
  int64_t K() const { return K_; }
  Precision precision() const { return precision_; }
  CUcontext context() const { return ctx_; }
  CUdeviceptr data() const { return buf_.ptr(); }
  size_t bytes() const { return buf_.bytes(); }
  const DeviceBuffer& buffer() const { return buf_; }  // e.g. to download it (tests, tools)
  std::string describe() const;  // "N=8192 K=8192 fp32x3 on device 0 (context 0x...)"

 private:
  friend LinearGnMinWeights prepack_linear_gn_min(Runtime&, int64_t, int64_t, Precision,
                                                  const float*, CUstream);
  DeviceBuffer buf_;
  int64_t N_ = 0, K_ = 0;
  Precision precision_ = Precision::Fp32x3;
  CUcontext ctx_ = nullptr;
  int device_ = -1;
};

// out = min over channels of GroupNorm(x W^T + lb) + bias, shape [1, N, M, 1] (see above).
// Device pointers in the runtime's context: x [M, K] and weight [N, K] row-major, fp32 (bf16 for
// Precision::Bf16Inputs); linear_bias, gamma, beta, bias [N] and out [N * M] fp32. Every pointer
// must be aligned to its element size. Enqueued on `stream`; nothing is allocated once the
// problem has been seen (or prepared) and, without `ws`, once the stream has a workspace.
//
// Workspace: pass `ws` (>= linear_gn_min_workspace_size(p), 256-byte aligned) to own the memory;
// concurrent calls must then use different workspaces. Without it, kjit uses a workspace of its
// own per stream (allocated on first use on that stream, grown when a larger problem comes, freed
// with the Runtime): calls on one stream are ordered by the stream, calls on different streams
// use different memory. CU_STREAM_PER_THREAD gets one per calling thread (kept, like the others,
// until the Runtime goes: pass `ws` from threads that come and go). Throws InvalidArgument (naming
// the value and the rule) before anything is enqueued; Errc::CaptureCompile when the stream is
// being captured and the call would have to build a plan or allocate (call prepare_linear_gn_min /
// reserve_linear_gn_min_workspace first).
void linear_gn_min(Runtime& rt, const LinearGnMinProblem& p, const void* x, const void* weight,
                   const float* linear_bias, const float* gamma, const float* beta,
                   const float* bias, float* out, const LinearGnMinOptions& opt, CUstream stream,
                   Workspace ws = {});

// Packs weight [N, K] (fp32, row-major, aligned to 4 bytes) for `precision` (Fp32x3; the other
// precisions use W as it is and are refused here). Allocates the pack and enqueues the split on
// `stream`: calls on other streams must wait for that work (an event) first. Compiles the split
// kernel on first use. Throws InvalidArgument (bad sizes, pointer, precision) or CaptureCompile
// when `stream` is being captured (packing allocates).
LinearGnMinWeights prepack_linear_gn_min(Runtime& rt, int64_t N, int64_t K, Precision precision,
                                         const float* weight, CUstream stream);

// The checks prepack makes before it needs the device (sizes, precision, pointer).
void validate_prepack(int64_t N, int64_t K, Precision precision, const float* weight);

// linear_gn_min with a prepacked weight: p.N, p.K and p.precision must be the pack's and the
// runtime the one that made it (else InvalidArgument naming both). A caller workspace needs
// linear_gn_min_workspace_size(p, true) bytes.
void linear_gn_min(Runtime& rt, const LinearGnMinProblem& p, const void* x,
                   const LinearGnMinWeights& weight, const float* linear_bias, const float* gamma,
                   const float* beta, const float* bias, float* out, const LinearGnMinOptions& opt,
                   CUstream stream, Workspace ws = {});
// The pack checks of that call (no device needed): InvalidArgument naming the pack and p.
void validate_pack(const LinearGnMinProblem& p, const LinearGnMinWeights& weight,
                   CUcontext context);

// What prepare chose for a problem.
struct LinearGnMinInfo {
  GnMinConfig config;               // the fused kernel's launch shape
  std::string kernel;               // its instantiation (" + " the broadcast kernel's when split)
  std::string gemm_algo;            // the cuBLASLt algorithm (GemmAlgo::describe())
  std::string gemm_slices;          // Fp32x3: the hi*hi slices and their algorithms (else empty)
  std::string gemm_source;          // "heuristic", "autotuned", "cache" (autotuned earlier) or
                                    // "pinned" (LinearGnMinOptions::gemm)
  bool gemm_bias_epilogue = true;   // cuBLASLt adds linear_bias (false: the fused kernel does)
  size_t gemm_workspace_bytes = 0;  // what the algorithm uses of the cuBLASLt workspace
  size_t workspace_bytes = 0;       // linear_gn_min_workspace_size(p): a call without a pack
  std::string split_kernel;         // Fp32x3: the split kernel's instantiation (else empty)
  // "<config>; GEMM <gemm_algo>": the text that pins this plan again (pin_config_text).
  std::string pin() const;
  // "<pin()>; kernel <kernel>; GEMM from <gemm_source>[; <gemm_slices>]": what every prepare
  // reports (C ABI, Python, the op registry); the text before "; kernel" is pin().
  std::string describe() const;
};

// Builds the plan a call would use with 256-byte aligned x, weight, linear_bias and a 16-byte
// aligned out (compiles the kernel, picks or autotunes the GEMM algorithm), so that such a call,
// also inside a graph capture, builds nothing.
LinearGnMinInfo prepare_linear_gn_min(Runtime& rt, const LinearGnMinProblem& p,
                                      const LinearGnMinOptions& opt = {});
// The GEMM algorithms LinearGnMinOptions::gemm may name for a call with opt and 256-byte
// aligned operands (cuBLASLt's heuristic, best first, within kjit's cuBLASLt workspace): what a
// sweep of the GEMM would try. Asks cuBLASLt only; builds no plan.
std::vector<GemmAlgo> linear_gn_min_gemm_algos(Runtime& rt, const LinearGnMinProblem& p,
                                               const LinearGnMinOptions& opt = {});
// Makes sure kjit's own workspace for `stream` fits p (needed before capturing a call without a
// caller workspace). Note: a graph captured that way uses that stream's workspace when replayed.
// `packed_weight`: for calls with a prepacked weight, which need no room to split W
// (linear_gn_min_workspace_size(p, true): 256 MiB less on the seed problem).
void reserve_linear_gn_min_workspace(Runtime& rt, const LinearGnMinProblem& p, CUstream stream,
                                     bool packed_weight = false);

// For tools and tests that need no GPU. Throws InvalidArgument when p breaks a rule.
void validate(const LinearGnMinProblem& p);
// The same, and the options' rules for p (eps, bias_add; fp32x3 refuses bias_add = Epilogue).
void validate(const LinearGnMinProblem& p, const LinearGnMinOptions& opt);
// The options a call with opt runs with: a pinned config's linear_bias settles bias_add (see
// LinearGnMinOptions::config); without a config, a pinned gemm settles auto as epilogue (fp32x3:
// kernel); without either, opt itself.
LinearGnMinOptions with_pinned_bias_add(const LinearGnMinProblem& p, LinearGnMinOptions opt);
// Every check linear_gn_min makes before it needs the device: the problem, the options, the
// pointers (null, alignment, out overlapping an input) and the workspace. Throws InvalidArgument.
void validate_call(const LinearGnMinProblem& p, const void* x, const void* weight,
                   const float* linear_bias, const float* gamma, const float* beta,
                   const float* bias, const float* out, const LinearGnMinOptions& opt,
                   Workspace ws = {});
// Throws InvalidArgument when c cannot run p (the kernel template's rules).
void validate(const LinearGnMinProblem& p, const GnMinConfig& c);
// The default launch shape on a device of compute capability cc with sm_count SMs, and the
// candidates autotuning tries (the heuristic's first). out_aligned: out is 16-byte aligned.
// max_smem (bytes per block, 0: what the architecture cc allows) caps the rows staged in shared
// memory: the runtime passes the device's opt-in limit, so a device with less than its
// architecture's table says still gets a config it can launch.
GnMinConfig gn_min_heuristic(const LinearGnMinProblem& p, int cc, int sm_count = 132,
                             bool out_aligned = true, int64_t max_smem = 0);
std::vector<GnMinConfig> gn_min_candidates(const LinearGnMinProblem& p, int cc, int sm_count = 132,
                                           bool out_aligned = true, int64_t max_smem = 0);
// The same for a Target: its cc, sm_count and max_smem_per_block.
GnMinConfig gn_min_heuristic(const LinearGnMinProblem& p, const Target& t, bool out_aligned = true);
std::vector<GnMinConfig> gn_min_candidates(const LinearGnMinProblem& p, const Target& t,
                                           bool out_aligned = true);
// What a call compiles, the one source that the op, kjit-precompile and kjit-bench all use: the
// fused kernel's configs for p on target t with options opt and an out pointer that is (not)
// 16-byte aligned. The heuristic's config (or, with opt.autotune, every candidate), for each bias
// variant the call may build (linear_gn_min_kernel_adds_bias). The cuBLASLt GEMM compiles
// nothing.
std::vector<GnMinConfig> linear_gn_min_configs_for(const LinearGnMinProblem& p, const Target& t,
                                                   const LinearGnMinOptions& opt, bool out_aligned);
// The specializations of those configs, each once, in that order.
std::vector<Spec> linear_gn_min_specs_for(const LinearGnMinProblem& p, const Target& t,
                                          const LinearGnMinOptions& opt, bool out_aligned);
Spec gn_min_spec(const LinearGnMinProblem& p, const GnMinConfig& c);
// Fp32x3's split kernel (kernel_templates/kjit/f16_split.cuh) for K columns: 16-byte loads
// (vec = 4, K % 4 == 0 and the source 16-byte aligned) or scalar ones (vec = 1).
constexpr int kSplitThreads = 256;
Spec split_spec(int64_t K, int vec);
// Everything config c compiles: gn_min_spec, then (split) the broadcast kernel's.
constexpr int kGnMinBroadcastThreads = 256;
std::vector<Spec> gn_min_specs(const LinearGnMinProblem& p, const GnMinConfig& c);
size_t gn_min_smem_bytes(const LinearGnMinProblem& p, const GnMinConfig& c);  // dynamic smem

}  // namespace kjit::ops
