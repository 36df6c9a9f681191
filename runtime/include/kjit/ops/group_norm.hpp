// GroupNorm (+ activation): y = act(group_norm(x, G, weight, bias, eps)), as
// torch.nn.functional.silu(torch.nn.functional.group_norm(x, G, weight, bias, eps)) for the
// default SiLU; act is any kjit::Activation (none, silu, gelu_tanh, gelu, relu).
#pragma once

#include <cuda.h>

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

enum class Layout {
  NCHW,
  NHWC
};  // channels-first ([N, C, *spatial]) or channels-last ([N, *spatial, C])
const char* layout_name(Layout l);  // "nchw", "nhwc"
// The inverse of layout_name; throws InvalidArgument naming the text for anything else.
Layout parse_layout(const std::string& s);

struct GroupNormProblem {
  DType dtype = DType::F32;        // x and y
  DType param_dtype = DType::F32;  // weight and bias (PyTorch allows fp32 params with 16-bit x)
  Layout layout = Layout::NCHW;
  int64_t N = 0, C = 0;
  int64_t S = 1;       // product of the spatial sizes (1 when there are none)
  int64_t groups = 0;  // G: C % G == 0
  Activation activation = Activation::SiLU;
  bool has_weight = true, has_bias = true;

  // Convenience: shape as PyTorch gives it ([N, C, d1, d2, ...] for NCHW, [N, d1, ..., C] for
  // NHWC); throws InvalidArgument for fewer than 2 dims or a negative size.
  static GroupNormProblem from_shape(const std::vector<int64_t>& shape, int64_t groups, DType dtype,
                                     Layout layout = Layout::NCHW);
  std::string describe() const;
};

// The kernel a config launches: one family per kind of kernel
// (kernel_templates/kjit/group_norm*.cuh), in the order autotuning lists their candidates.
enum class GroupNormFamily {
  // gn_fwd: a team of `team` threads (part of a warp, a CTA, or a cluster of `cluster` CTAs)
  // holds its group in registers: one read of x, one write of y.
  Registers,
  // gn_fwd, streaming: groups too large to hold on chip are read again from memory (from L2
  // where the tensor fits there).
  Stream,
  // gn_fwd_smem (sm_90, NCHW, 16-byte aligned): staged in shared memory by bulk copies. Each
  // CTA's slice is ceil(vectors / cluster) vectors, of which the last threads * held are loaded
  // into registers instead (less shared memory per CTA, more CTAs per SM).
  Smem,
  // gn_coop_smem: the same slices, but the group's `cluster` CTAs (2..64, no hardware cluster)
  // meet at a barrier in global memory, in one cooperative launch.
  SmemCoop,
  // gn_pipe_fwd (NCHW, sm_70+), for large groups in tensors L2 cannot hold: a persistent grid
  // (as many CTAs as the device holds at once) takes chunks of threads * iters vectors in ticket
  // order, reading each chunk for its partial statistics and, a fixed number of chunks later,
  // again from L2 to write y once its group's statistics are complete. HBM reads of later groups
  // overlap the writes of earlier ones: one read of x from HBM, one write of y.
  Pipe,
  // gn_partials + gn_apply (NCHW): per-chunk partial statistics (x read once, kept in L2), then
  // the apply kernel (x read again, y written); one CTA per chunk of threads * iters vectors.
  Split,
  // gn_coop (NCHW, sm_70+): the split chunks in one cooperative kernel. Each CTA holds its chunk
  // in registers while the group's CTAs exchange their partials and meet at a barrier in global
  // memory: one read of x, one launch.
  SplitCoop,
};

// The launch configuration: what the heuristic picks and autotuning searches over.
struct GroupNormConfig {
  GroupNormFamily family = GroupNormFamily::Registers;
  int threads = 256;  // CTA size (multiple of 32)
  int team = 256;     // threads per group: a power of two <= 32 (Registers), or == threads
  int vec = 4;        // elements per vector access (16 bytes), or 1
  // Vectors held per thread (Registers; the slice's vectors per thread in Smem and SmemCoop),
  // unrolled per batch (Stream), or per thread of a chunk (Pipe, Split, SplitCoop).
  int iters = 4;
  // CTAs per group: a thread-block cluster (Registers, Stream, Smem: up to 16 on sm_90), or the
  // group's slices meeting through global memory (SmemCoop: 2..64). 1 for Pipe, Split, SplitCoop.
  int cluster = 1;
  int held = 0;  // Smem, SmemCoop: vectors per thread held in registers (0..16); else 0
  // Registers, Stream: the weight and bias of the CTA's groups kept in shared memory (else read
  // from global memory). The other families ignore it (their configs have true).
  bool affine_smem = true;
  // Pipe, Split, SplitCoop and SmemCoop keep partial statistics (and the cooperative ones and
  // Pipe their counters) in a per-stream workspace (reserve_group_norm_workspace).
  bool needs_workspace() const;
  // SmemCoop, SplitCoop: one cooperative launch. Every CTA must be resident at once, so a plan
  // runs it only where the device fits the whole grid (Kernel::fits with cooperative).
  bool cooperative() const;
  bool staged() const;  // Smem, SmemCoop: slices staged in shared memory
  std::string describe() const;
  bool operator==(const GroupNormConfig& o) const {
    return family == o.family && threads == o.threads && team == o.team && vec == o.vec &&
           iters == o.iters && cluster == o.cluster && held == o.held &&
           affine_smem == o.affine_smem;
  }
  bool operator!=(const GroupNormConfig& o) const { return !(*this == o); }
};

// The config describe() wrote ("threads=256 team=256 vec=4 iters=8 cluster=1 smem held=4 coop",
// the words in any order; held=0 may be left out): what prepare_group_norm, kjit-bench --sweep
// and autotuning report, read back to be pinned (GroupNormOptions::config). The family is named
// by its words (none: Registers; stream; smem; smem coop; pipe; split; split coop). Throws
// InvalidArgument (field "config") naming the word and the rule for any other text; whether the
// config can run a problem is checked where it is used, as for any forced config.
GroupNormConfig parse_group_norm_config(std::string_view text);

struct GroupNormOptions {
  float eps = 1e-5f;
  bool autotune = false;  // also enabled by KJIT_AUTOTUNE=1; result stored in the disk cache
  // A config to use instead of the heuristic's or autotuning's choice (benchmarks, pinning a
  // deployment). Checked against the problem: one that cannot run it is an InvalidArgument.
  std::optional<GroupNormConfig> config;
};

// Pins what a config text names (C ABI, Python, a manifest's "config"): opt->config =
// parse_group_norm_config(text). Every op has this reader of its options, so the front ends read
// config text one way for all of them.
void pin_config_text(std::string_view text, GroupNormOptions* opt);

// y may alias x (in place). Pointers are device pointers in the runtime's context; weight/bias
// may be null when has_weight/has_bias are false. Throws InvalidArgument (naming the value and
// the rule) before anything is written. N == 0 or S == 0 is an empty tensor: nothing is enqueued
// (with N == 0 a forced opt.config is still checked against the problem).
void group_norm(Runtime& rt, const GroupNormProblem& p, const void* x, void* y, const void* weight,
                const void* bias, const GroupNormOptions& opt, CUstream stream);

// Compile and load what group_norm would launch for p (with 16-byte aligned pointers), so that a
// later call, also inside a graph capture, compiles nothing. Returns the config chosen.
GroupNormConfig prepare_group_norm(Runtime& rt, const GroupNormProblem& p,
                                   const GroupNormOptions& opt = {});

// A config that needs a workspace (GroupNormConfig::needs_workspace) keeps its partial statistics
// (and the cooperative ones and Pipe their counters) in kjit's workspace for the stream, allocated
// by the first call on that stream. Inside a graph capture on a stream that has none yet, a call
// runs the best one-kernel config instead (same results, slower): call this before capturing to
// give the stream its workspace, so the graph runs the split or cooperative kernels. A graph
// captured that way uses that stream's workspace whenever it is replayed. Returns its size in bytes
// (0 when p's config needs none).
size_t reserve_group_norm_workspace(Runtime& rt, const GroupNormProblem& p,
                                    const GroupNormOptions& opt, CUstream stream);

// What a call compiles, the one source that the op, kjit-precompile and kjit-bench all use: the
// configs a call for p on target t with options opt may load, in the op's order of preference,
// for (un)aligned pointers. Without autotuning: opt.config, else the heuristic's choice; for a
// config that needs a workspace, then the one-kernel config a capture falls back to. With
// autotuning (opt.autotune; KJIT_AUTOTUNE is the caller's to fold in): every candidate.
std::vector<GroupNormConfig> group_norm_configs_for(const GroupNormProblem& p, const Target& t,
                                                    const GroupNormOptions& opt, bool aligned);
// The specializations of those configs, each once, in that order (none for an empty tensor).
std::vector<Spec> group_norm_specs_for(const GroupNormProblem& p, const Target& t,
                                       const GroupNormOptions& opt, bool aligned);

// For tools and tests that need no GPU: the default config for a target, the candidates
// autotuning tries, and the specialization a config compiles to. The `int cc` forms are for a
// 132-SM device of that compute capability (Target::for_cc).
GroupNormConfig group_norm_heuristic(const GroupNormProblem& p, const Target& t,
                                     bool aligned = true);
std::vector<GroupNormConfig> group_norm_candidates(const GroupNormProblem& p, const Target& t,
                                                   bool aligned = true);
GroupNormConfig group_norm_heuristic(const GroupNormProblem& p, int cc, bool aligned = true);
std::vector<GroupNormConfig> group_norm_candidates(const GroupNormProblem& p, int cc,
                                                   bool aligned = true);
// Every kernel config c launches, in launch order: one, or two for GroupNormFamily::Split.
std::vector<Spec> group_norm_specs(const GroupNormProblem& p, const GroupNormConfig& c);
// The one-kernel config a plan that needs a workspace also loads, for captures on a stream with
// no workspace.
GroupNormConfig group_norm_capture_fallback(const GroupNormProblem& p, const Target& t,
                                            bool aligned = true);
GroupNormConfig group_norm_capture_fallback(const GroupNormProblem& p, int cc, bool aligned = true);
// Throws InvalidArgument when p breaks a rule (C % G, sizes, limits).
void validate(const GroupNormProblem& p);
// Every check group_norm makes before it needs the device: the problem, eps, and the pointers
// (null, aligned to their element size, x and y the same tensor or disjoint). Throws
// InvalidArgument naming the value and the rule.
void validate_call(const GroupNormProblem& p, const void* x, const void* y, const void* weight,
                   const void* bias, float eps);
// Throws InvalidArgument when config c cannot compute p correctly on a device of compute
// capability cc with (un)aligned pointers, naming the field and the rule it breaks.
void validate_config(const GroupNormProblem& p, const GroupNormConfig& c, int cc, bool aligned);
// Chunks per group of a Pipe, Split or SplitCoop config (Split and SplitCoop: one CTA each; 8
// workspace bytes each); 0 for other families.
int64_t group_norm_split_chunks(const GroupNormProblem& p, const GroupNormConfig& c);
// Dynamic shared memory a launch of c for p needs, in bytes.
int64_t group_norm_smem_bytes(const GroupNormProblem& p, const GroupNormConfig& c);

}  // namespace kjit::ops
