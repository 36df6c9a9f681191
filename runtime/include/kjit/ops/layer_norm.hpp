// LayerNorm and RMSNorm over the last dimension of a [rows, width] row-major tensor, with an
// optional residual add before and an optional activation after, as torch.nn.functional:
//   s = x + residual (when given: rounded to x's dtype and written out as `sum`), else s = x
//   LayerNorm: y = act(F.layer_norm(s, [width], weight, bias, eps))   (biased variance)
//   RMSNorm:   y = act(F.rms_norm(s, [width], weight, eps))           (s * rsqrt(mean(s^2) + eps))
// Statistics in fp32. Built on kjit's public op-support API alone (kjit/op/*.hpp).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kjit/activation.hpp"
#include "kjit/dtype.hpp"
#include "kjit/op/target.hpp"
#include "kjit/runtime.hpp"
#include "kjit/spec.hpp"

namespace kjit::ops {

enum class NormKind { LayerNorm, RMSNorm };
const char* norm_kind_name(NormKind k);  // "layer_norm", "rms_norm"
// The inverse of norm_kind_name; InvalidArgument (field "kind") naming the text otherwise.
NormKind parse_norm_kind(std::string_view s);

struct LayerNormProblem {
  NormKind kind = NormKind::LayerNorm;
  DType dtype = DType::F32;        // x, residual, y and sum
  DType param_dtype = DType::F32;  // weight and bias: dtype or F32
  int64_t rows = 0;                // 0: nothing to do
  int64_t width = 0;               // the normalized (last) dimension, >= 1
  bool has_weight = true;
  bool has_bias = true;   // LayerNorm only (RMSNorm has no bias: true there is an InvalidArgument)
  bool residual = false;  // normalize x + residual and write that sum out
  Activation activation = Activation::None;

  // A LayerNorm (with weight and bias) or an RMSNorm (with weight) of [rows, width] in dtype.
  static LayerNormProblem layer_norm(int64_t rows, int64_t width, DType dtype);
  static LayerNormProblem rms_norm(int64_t rows, int64_t width, DType dtype);
  std::string describe() const;
};

// How a call runs: `team` threads hold a row (a sub-warp or a warp for short rows, the whole CTA
// for medium ones), or a thread-block cluster of `cluster` CTAs (sm_90, statistics merged through
// distributed shared memory) for long rows or to spread few rows over the SMs. The row is held in
// registers (`iters` vectors of `vec` elements per thread: x read once), or, with `stream`, read
// again from memory (L2) for rows no cluster holds. With `replicas` > 1, that many clusters (or
// CTAs) each read a row for its statistics and each write 1/replicas of it: few rows then load
// and store less per SM. Only where no output aliases an input: a call in place runs the same
// config with replicas = 1 (layer_norm_configs_for lists that one too). With `coop` > 1, that
// many CTAs share each row, holding or streaming an even share of it, and merge their
// statistics through global memory in a cooperative launch (every CTA resident): rows too long
// for a cluster to hold, spread over every SM. Such a config keeps its partial statistics and
// barrier words in a per-stream workspace (reserve_layer_norm_workspace).
struct LayerNormConfig {
  int threads = 256;  // CTA size: a multiple of 32, <= 1024
  int team = 32;      // threads per row: a power of two <= 32 dividing threads, or == threads
  int vec = 4;        // elements per vector access: 16 / dtype size (16 bytes), or 1
  int iters = 1;      // vectors per thread held (stream: loaded per step), 1..64
  int cluster = 1;    // CTAs per row (a hardware cluster when > 1: sm_90, team == threads), 1..16
  bool stream = false;
  int replicas = 1;  // CTAs or clusters per row, each writing a share (team == threads), 1..16
  int coop = 1;      // CTAs per row in a cooperative launch (team == threads, cluster 1), 1..1024
  std::string describe() const;
  bool operator==(const LayerNormConfig& o) const {
    return threads == o.threads && team == o.team && vec == o.vec && iters == o.iters &&
           cluster == o.cluster && stream == o.stream && replicas == o.replicas && coop == o.coop;
  }
  bool operator!=(const LayerNormConfig& o) const { return !(*this == o); }
};

// The config describe() wrote ("threads=256 team=256 vec=4 iters=4 cluster=16 replicas=4", the
// words in any order; replicas=1 and coop=1 may be left out): what prepare_layer_norm, kjit-bench
// --sweep and autotuning report, read back to be pinned (LayerNormOptions::config). Throws
// InvalidArgument (field "config") naming the word and the rule for any other text; whether the
// config can run a problem is checked where it is used, as for any forced config.
LayerNormConfig parse_layer_norm_config(std::string_view text);

struct LayerNormOptions {
  float eps = 1e-5f;  // F.layer_norm's default; F.rms_norm(eps=None) uses finfo(dtype).eps
  // Time layer_norm_candidates once per problem and keep the fastest (kjit::Autotuner: stored in
  // the disk cache, reused by later processes without timing); also KJIT_AUTOTUNE=1.
  bool autotune = false;
  // A config to use instead of the heuristic's or autotuning's (benchmarks, pinning a
  // deployment); one that cannot compute the problem is an InvalidArgument naming the field and
  // the rule.
  std::optional<LayerNormConfig> config;
};

// Pins what a config text names (C ABI, Python, a manifest's "config"): opt->config =
// parse_layer_norm_config(text), as every op's pin_config_text reads its options.
void pin_config_text(std::string_view text, LayerNormOptions* opt);

// Runs p (p.kind: LayerNorm or RMSNorm) on `stream`. Device pointers of the runtime's context:
// x [rows, width]; residual and sum [rows, width] when p.residual (else ignored, may be null);
// weight [width] when p.has_weight, bias [width] when p.has_bias (else ignored); y [rows, width].
// Aliasing: y may be x or residual (in place), sum may be x or residual; y and sum are disjoint,
// weight and bias overlap neither, and no pointer partly overlaps another tensor. Every pointer
// aligned to its element size; 16-byte aligned ones (with width a multiple of 16 bytes) take the
// vector path. Throws InvalidArgument naming the value and the rule before anything is enqueued;
// rows == 0 enqueues nothing.
void layer_norm(Runtime& rt, const LayerNormProblem& p, const void* x, const void* residual,
                void* y, void* sum, const void* weight, const void* bias,
                const LayerNormOptions& opt, CUstream stream);
// The same call for p.kind == RMSNorm (no bias); InvalidArgument (field "kind") otherwise.
void rms_norm(Runtime& rt, const LayerNormProblem& p, const void* x, const void* residual, void* y,
              void* sum, const void* weight, const LayerNormOptions& opt, CUstream stream);

// Compiles and loads what a call with 16-byte aligned pointers launches, so that a later call,
// also inside a graph capture, compiles nothing (a call that would compile while its stream is
// being captured throws CaptureCompile). Returns the config chosen.
LayerNormConfig prepare_layer_norm(Runtime& rt, const LayerNormProblem& p,
                                   const LayerNormOptions& opt = {});

// c as a call in place runs it: replicas = 1 (one replica's writes would land under another's
// reads of the row).
LayerNormConfig without_replicas(LayerNormConfig c);

// A config with coop > 1 keeps its CTAs' partial statistics and barrier words in kjit's
// workspace for the stream, allocated by the first call on that stream. A call while `stream`
// is being captured cannot allocate it: on a stream without one, a capture runs the plan's
// fallback (the heuristic's config without coop, which layer_norm_configs_for lists next and
// prepare_layer_norm loads), or, for a pinned coop config, throws CaptureCompile. Calling this
// before capturing (after prepare_layer_norm, with the same options) gives the stream its
// workspace, so the graph runs the cooperative kernel; a graph captured that way uses that
// stream's workspace whenever it is replayed. Returns its size in bytes (0: the plan of an
// aligned call needs none).
size_t reserve_layer_norm_workspace(Runtime& rt, const LayerNormProblem& p,
                                    const LayerNormOptions& opt, CUstream stream);

// What a call compiles, the one source for the op, kjit-precompile and kjit-bench: the configs a
// call for p on target t may load, in the op's order of preference, for (un)aligned pointers
// (opt.config, else the heuristic's; then, for a cooperative one, the heuristic's without coop,
// which captures on a stream without a workspace and devices that refuse the grid run; then,
// for a cluster of more than 8 CTAs, which a device may refuse to schedule, the same row on a
// portable cluster; then, for those with replicas, the same with one, which calls in place run;
// with opt.autotune, then every candidate). The op
// runs the first the device can schedule, or the fastest when autotuning (KJIT_AUTOTUNE is the
// caller's to fold in).
std::vector<LayerNormConfig> layer_norm_configs_for(const LayerNormProblem& p, const Target& t,
                                                    const LayerNormOptions& opt, bool aligned);
// Their specializations, each once, in that order (none for rows == 0).
std::vector<Spec> layer_norm_specs_for(const LayerNormProblem& p, const Target& t,
                                       const LayerNormOptions& opt, bool aligned);

// What autotuning times: the heuristic's config first, then the other team sizes, CTA sizes,
// cluster sizes (sm_90) and streaming configs that hold or stream p's row on t, each valid.
std::vector<LayerNormConfig> layer_norm_candidates(const LayerNormProblem& p, const Target& t,
                                                   bool aligned);
// The heuristic's config (docs/OPS.md has its rule table) and the kernel a config compiles to.
LayerNormConfig layer_norm_heuristic(const LayerNormProblem& p, const Target& t, bool aligned);
Spec layer_norm_spec(const LayerNormProblem& p, const LayerNormConfig& c);

// Throws InvalidArgument (naming the field) when p breaks a rule: enums, sizes and limits
// (width <= layer_norm_max_width(), rows * width <= 2^59), param_dtype, bias with RMSNorm.
void validate(const LayerNormProblem& p);
// Every check a call makes before it needs the device: the problem, eps, the pointers (null,
// aligned to their element size, aliasing as above).
void validate_call(const LayerNormProblem& p, const void* x, const void* residual, const void* y,
                   const void* sum, const void* weight, const void* bias, float eps);
// Throws InvalidArgument when c cannot compute p on a device of compute capability cc with
// (un)aligned pointers, naming the field and the rule.
void validate_config(const LayerNormProblem& p, const LayerNormConfig& c, int cc, bool aligned);
// The widest row: in-row indices are 32-bit, with room for one CTA's stride past the end.
constexpr int64_t layer_norm_max_width() {
  return (int64_t{1} << 31) - (int64_t{1} << 20);
}

}  // namespace kjit::ops
