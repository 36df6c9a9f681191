// Linear -> GroupNorm -> min -> + bias: problem validation, the fused kernel's launch-shape
// heuristic, autotune candidates and the specialization a shape compiles to. Pure host code: no
// GPU needed.
#include <algorithm>
#include <climits>

#include "kjit/error.hpp"
#include "kjit/op/checks.hpp"
#include "kjit/op/config_text.hpp"
#include "kjit/op/specs.hpp"
#include "kjit/ops/linear_gn_min.hpp"

namespace kjit::ops {
namespace {

constexpr int64_t kMaxN = int64_t{1} << 24;  // the kernel indexes channels with int
constexpr int kMaxRegFloats = 32;            // registers per thread prefetching the next rows
constexpr int kMaxThreads = 1024;
constexpr int kTargetRowRuns = 8;                   // rows per CTA for whole 32-byte output sectors
constexpr int64_t kMaxOutIndex = int64_t{1} << 30;  // N * rows() per CTA, kept in int
// Rows of at least this many channels (and batches of >= 8 rows) split into row minima and the
// broadcast kernel: a fused CTA writes runs of only rows() floats for each of N channels. H200,
// kernel alone: M=1024 N=8192 42 us split vs 66 fused, M=128 N=4096 7.8 vs 10.9, M=16 N=8192 8.7
// vs 11.7, M=4096 N=4096 69 vs 77; but M=256 N=1024 7.1 vs 6.0.
constexpr int64_t kSplitMinN = 2048;
constexpr int64_t kSplitMinM = 8;

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
int64_t pow2_ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}
int64_t pow2_floor(int64_t v) {
  int64_t p = 1;
  while (p * 2 <= v) p <<= 1;
  return p;
}

// The per-block opt-in shared memory of an architecture (CUDA programming guide): 227 KB on
// sm_90-sm_110, 163 KB on sm_80/sm_87, 99 KB on sm_86/sm_89 and on sm_120/sm_121 (the
// RTX/workstation Blackwells: their cc is above sm_90's, their shared memory is not).
int64_t arch_smem_per_block(int cc) {
  if (cc >= 120) return 99 * 1024;
  if (cc >= 90) return 227 * 1024;
  if (cc == 80 || cc == 87) return 163 * 1024;
  if (cc >= 80) return 99 * 1024;
  if (cc == 75) return 64 * 1024;
  return cc >= 70 ? 96 * 1024 : 48 * 1024;
}

// Shared memory to stage rows in: what the sweeps chose per architecture, under the per-block
// limit less 4 KB (the kernel's fixed shared memory and the row minima come on top). The limit is
// the device's when the runtime passes it (max_smem), else the architecture's: kjit-precompile and
// a device with its architecture's limit get the same configs.
int64_t smem_budget(int cc, int64_t max_smem) {
  const int64_t table = cc >= 120  ? 96 * 1024
                        : cc >= 90 ? 160 * 1024
                        : cc >= 80 ? 96 * 1024
                                   : 48 * 1024;
  return std::min(table, (max_smem > 0 ? max_smem : arch_smem_per_block(cc)) - 4096);
}

[[noreturn]] void bad(const LinearGnMinProblem& p, const std::string& what,
                      const char* field = "config") {
  op::invalid("linear_gn_min", field, what, p.describe());
}

int64_t padded(int64_t floats, bool pad) {
  return (floats + (pad ? floats / 32 + 1 : 0) + 3) / 4 * 4;
}

// The shape for a slice of `slice` threads per row; seq = 0 picks the rows per CTA.
GnMinConfig shape(const LinearGnMinProblem& p, int64_t budget, int sm_count, bool out_aligned,
                  int64_t slice, int seq, bool split) {
  GnMinConfig c;
  c.split = split;
  c.slice = static_cast<int>(slice);
  const int64_t cg = p.N / p.G;
  const bool block = slice >= 64 && slice / p.G > 32;  // few, large groups: the CTA owns each
  c.threads = static_cast<int>(block ? slice : std::max<int64_t>(slice, 128));
  const int64_t par = c.threads / c.slice;
  const int64_t rows_guess = 64;  // minima: at most this many floats (plus padding) in practice
  c.smem = (padded(par * p.N, true) + 64 + rows_guess) * 4 <= budget &&
           ceil_div(par * p.N, c.threads) <= kMaxRegFloats;
  c.vec = c.smem && (par * p.N) % 4 == 0 ? 4 : 1;
  if (block) {
    c.sub = c.threads;
  } else {
    // As many sub-teams as groups (a thread per group when the slice has fewer threads than
    // groups). Sub-teams narrower than a warp read gamma and beta at a stride of C/G: staged in
    // shared memory when they fit, else sub-teams span whole groups so that lanes read
    // neighbouring channels.
    const int64_t cap = std::min<int64_t>(32, slice);
    const int64_t per_group = std::min(cap, pow2_floor(std::max<int64_t>(1, slice / p.G)));
    c.affine_smem =
        c.smem && per_group < 32 &&
        (padded(par * p.N, true) + 2 * padded(p.N, true) + 64 + rows_guess) * 4 <= budget;
    c.sub = static_cast<int>(c.affine_smem ? per_group
                                           : std::min(cap, std::max(per_group, pow2_ceil(cg))));
  }
  c.pad = c.smem && c.sub < 32;
  if (seq > 0) {
    c.seq = seq;
  } else {
    // Rows per CTA: grow while two waves of CTAs remain, then toward whole 32-byte output runs
    // while one wave remains.
    const int64_t max_rows = std::max<int64_t>(64, par);
    const int64_t busy = 2 * static_cast<int64_t>(sm_count);
    int64_t s = 1;
    while (par * s * 2 <= max_rows && ceil_div(p.M, par * s * 2) >= busy) s *= 2;
    while (!split && par * s < kTargetRowRuns && par * s * 2 <= max_rows &&
           ceil_div(p.M, par * s * 2) >= sm_count)
      s *= 2;
    c.seq = static_cast<int>(s);
  }
  c.out_vec = out_aligned && p.M % 4 == 0 && (split || c.rows() % 4 == 0);
  // Fp32x3's Y is scaled: the kernel undoes the scales, then adds the bias (no epilogue).
  c.linear_bias = p.precision == Precision::Fp32x3;
  return c;
}

}  // namespace

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::Fp32:
      return "fp32";
    case Precision::Tf32:
      return "tf32";
    case Precision::Bf16Inputs:
      return "bf16-inputs";
    case Precision::Fp32x3:
      return "fp32x3";
  }
  return "?";
}

Precision parse_precision(const std::string& s) {
  for (Precision p : {Precision::Fp32, Precision::Tf32, Precision::Bf16Inputs, Precision::Fp32x3})
    if (s == precision_name(p)) return p;
  throw Error(Errc::InvalidArgument,
              "precision '" + s + "' must be fp32, tf32, bf16-inputs or fp32x3");
}

const char* bias_add_name(LinearBiasAdd b) {
  switch (b) {
    case LinearBiasAdd::Auto:
      return "auto";
    case LinearBiasAdd::Epilogue:
      return "epilogue";
    case LinearBiasAdd::Kernel:
      return "kernel";
  }
  return "?";
}

LinearBiasAdd parse_bias_add(const std::string& s) {
  for (LinearBiasAdd b : {LinearBiasAdd::Auto, LinearBiasAdd::Epilogue, LinearBiasAdd::Kernel})
    if (s == bias_add_name(b)) return b;
  throw Error(Errc::InvalidArgument, "bias_add '" + s + "' must be auto, epilogue or kernel");
}

std::vector<bool> linear_gn_min_kernel_adds_bias(LinearBiasAdd b, bool autotune,
                                                 Precision precision) {
  if (precision == Precision::Fp32x3) return {true};
  switch (b) {
    case LinearBiasAdd::Epilogue:
      return {false};
    case LinearBiasAdd::Kernel:
      return {true};
    case LinearBiasAdd::Auto:
      break;
  }
  // Without autotuning, Auto keeps the epilogue: without it cuBLASLt's algorithms measured no
  // faster (docs/OPS.md).
  return autotune ? std::vector<bool>{false, true} : std::vector<bool>{false};
}

std::string LinearGnMinProblem::describe() const {
  return "M=" + std::to_string(M) + " K=" + std::to_string(K) + " N=" + std::to_string(N) +
         " G=" + std::to_string(G) + " " + precision_name(precision);
}

std::string GnMinConfig::describe() const {
  return "threads=" + std::to_string(threads) + " slice=" + std::to_string(slice) +
         " sub=" + std::to_string(sub) + " seq=" + std::to_string(seq) +
         " vec=" + std::to_string(vec) + (pad ? " pad" : "") + (smem ? "" : " global") +
         (affine_smem ? " affine-smem" : "") + (out_vec ? " out-vec" : "") +
         (linear_bias ? " linear-bias" : "") + (split ? " split" : "");
}

GnMinConfig parse_gn_min_config(std::string_view text) {
  op::ConfigText t("linear_gn_min", text);
  GnMinConfig c;
  c.threads = t.integer("threads", 1, kMaxThreads);
  c.slice = t.integer("slice", 1, kMaxThreads);
  c.sub = t.integer("sub", 1, kMaxThreads);
  c.seq = t.integer("seq", 1, INT_MAX);  // validate(p, c) bounds it where the config is used
  c.vec = t.integer("vec", 1, 16);
  c.pad = t.flag("pad");
  c.smem = !t.flag("global");
  c.affine_smem = t.flag("affine-smem");
  c.out_vec = t.flag("out-vec");
  c.linear_bias = t.flag("linear-bias");
  c.split = t.flag("split");
  t.finish("threads, slice, sub, seq, vec, pad, global, affine-smem, out-vec, linear-bias, split");
  return c;
}

std::string GemmAlgo::describe() const {
  return "id=" + std::to_string(id) + " tile=" + std::to_string(tile) +
         " stages=" + std::to_string(stages) + " splitk=" + std::to_string(splitk) +
         " reduction=" + std::to_string(reduction) + " swizzle=" + std::to_string(swizzle) +
         " cluster=" + std::to_string(cluster);
}

GemmAlgo parse_gemm_algo(std::string_view text) {
  op::ConfigText t("linear_gn_min GEMM", text);
  GemmAlgo a;
  a.id = t.integer("id", -INT_MAX, INT_MAX);  // ID and SPLITK_NUM are int32 in cuBLASLt
  a.tile = t.integer("tile", 0, INT_MAX);
  a.stages = t.integer("stages", 0, INT_MAX);
  a.splitk = t.integer("splitk", -INT_MAX, INT_MAX);
  a.reduction = t.integer("reduction", 0, INT_MAX);
  a.swizzle = t.integer("swizzle", 0, INT_MAX);
  a.cluster = t.integer("cluster", 0, INT_MAX);
  t.finish("id, tile, stages, splitk, reduction, swizzle, cluster");
  return a;
}

void pin_config_text(std::string_view text, LinearGnMinOptions* opt) {
  const size_t semi = text.find(';');
  if (semi != std::string_view::npos &&
      text.substr(0, semi).find_first_not_of(' ') == std::string_view::npos)
    op::ConfigText::refuse("linear_gn_min", text, "the config's words come before ';'");
  const GnMinConfig config = parse_gn_min_config(text.substr(0, semi));
  std::optional<GemmAlgo> gemm;
  if (semi != std::string_view::npos) {
    std::string_view rest = text.substr(semi + 1);
    rest.remove_prefix(std::min(rest.find_first_not_of(' '), rest.size()));
    constexpr std::string_view kGemm = "GEMM ";
    if (rest.substr(0, kGemm.size()) != kGemm || rest.find(';') != std::string_view::npos)
      op::ConfigText::refuse(
          "linear_gn_min", text,
          "after the config's words and ';' comes \"GEMM <algorithm>\" and nothing more "
          "(LinearGnMinInfo::pin(); a prepare's text from \"; kernel\" on is its report, not a "
          "pin)");
    const std::string_view algo = rest.substr(kGemm.size());
    if (algo.find_first_not_of(' ') == std::string_view::npos)
      op::ConfigText::refuse("linear_gn_min", text,
                             "\"GEMM\" needs the algorithm's words (id=... tile=... stages=... "
                             "splitk=... reduction=... swizzle=... cluster=...)");
    gemm = parse_gemm_algo(algo);
  }
  opt->config = config;
  opt->gemm = gemm;
}

void validate(const LinearGnMinProblem& p) {
  if (p.precision != Precision::Fp32 && p.precision != Precision::Tf32 &&
      p.precision != Precision::Bf16Inputs && p.precision != Precision::Fp32x3)
    bad(p,
        "precision = " + std::to_string(static_cast<int>(p.precision)) +
            " is not one of Fp32, Tf32, Bf16Inputs, Fp32x3",
        "precision");
  if (p.M < 1) bad(p, "M = " + std::to_string(p.M) + " must be >= 1", "M");
  if (p.K < 1) bad(p, "K = " + std::to_string(p.K) + " must be >= 1", "K");
  if (p.N < 1) bad(p, "N = " + std::to_string(p.N) + " must be >= 1", "N");
  if (p.G < 1) bad(p, "G = " + std::to_string(p.G) + " must be >= 1", "G");
  if (p.N % p.G != 0)
    bad(p, "N = " + std::to_string(p.N) + " must be divisible by G = " + std::to_string(p.G), "G");
  if (p.M > INT32_MAX) bad(p, "M = " + std::to_string(p.M) + " exceeds 2^31-1 (cuBLASLt)", "M");
  if (p.K > INT32_MAX) bad(p, "K = " + std::to_string(p.K) + " exceeds 2^31-1 (cuBLASLt)", "K");
  if (p.N > kMaxN)
    bad(p, "N = " + std::to_string(p.N) + " exceeds the supported " + std::to_string(kMaxN), "N");
  // Byte sizes of every tensor (and the workspace) must fit in 63 bits.
  constexpr int64_t kMaxElems = INT64_MAX / 8;
  if (p.M > kMaxElems / p.N) bad(p, "M * N = Y's element count overflows", "M");
  if (p.M > kMaxElems / p.K) bad(p, "M * K = x's element count overflows", "K");
  if (p.N > kMaxElems / p.K) bad(p, "N * K = weight's element count overflows", "K");
  if (p.precision == Precision::Fp32x3) {
    // The split rows: 2 * pitch halves each (and an exponent), for M rows of x and N rows of W.
    const int64_t row = 2 * linear_gn_min_split_pitch(p.K) + 2;
    if (p.M > kMaxElems / row)
      bad(p, "M * 2 * split_pitch(K) = split x's element count overflows", "K");
    if (p.N > kMaxElems / row)
      bad(p, "N * 2 * split_pitch(K) = split W's element count overflows", "K");
  }
}

int64_t linear_gn_min_split_pitch(int64_t K) {
  return (K + 127) / 128 * 128;
}

size_t linear_gn_min_split_bytes(int64_t rows, int64_t K) {
  const auto halves =
      static_cast<size_t>(rows) * 2 * static_cast<size_t>(linear_gn_min_split_pitch(K));
  return halves * 2 + (static_cast<size_t>(rows) * 4 + 255) / 256 * 256;
}

void validate(const LinearGnMinProblem& p, const GnMinConfig& c) {
  validate(p);
  auto pow2 = [](int v) { return v >= 1 && (v & (v - 1)) == 0; };
  const std::string cfg = " (config " + c.describe() + ")";
  if (c.threads < 32 || c.threads > kMaxThreads || c.threads % 32 != 0)
    bad(p,
        "threads = " + std::to_string(c.threads) + " must be a multiple of 32 in [32, 1024]" + cfg);
  if (!pow2(c.slice) || c.threads % c.slice != 0)
    bad(p, "slice = " + std::to_string(c.slice) + " must be a power of two dividing threads" + cfg);
  if (!pow2(c.sub) || c.slice % c.sub != 0)
    bad(p, "sub = " + std::to_string(c.sub) + " must be a power of two dividing slice" + cfg);
  if (c.sub > 32 && !(c.sub == c.threads && c.slice == c.threads))
    bad(p, "sub = " + std::to_string(c.sub) + " must be <= 32 or the whole CTA" + cfg);
  if (c.seq < 1) bad(p, "seq = " + std::to_string(c.seq) + " must be >= 1" + cfg);
  if (c.vec != 1 && c.vec != 4) bad(p, "vec must be 1 or 4" + cfg);
  if (c.vec == 4 && (int64_t{c.par()} * p.N) % 4 != 0)
    bad(p, "vec = 4 needs par * N to be a multiple of 4" + cfg);
  if (c.out_vec && p.M % 4 != 0) bad(p, "out_vec needs M to be a multiple of 4" + cfg);
  if (c.out_vec && !c.split && c.rows() % 4 != 0)
    bad(p, "out_vec needs rows per CTA to be a multiple of 4 (unless split)" + cfg);
  if (c.pad && !c.smem) bad(p, "pad is a shared-memory layout" + cfg);
  if (c.affine_smem && !c.smem) bad(p, "affine_smem needs smem (staged rows)" + cfg);
  if (p.precision == Precision::Fp32x3 && !c.linear_bias)
    bad(p, "fp32x3 needs linear_bias (the kernel adds the bias after undoing the split's scales)" +
               cfg);
  if (p.N * c.rows() > kMaxOutIndex) bad(p, "N * rows per CTA exceeds 2^30" + cfg);
  if (c.smem && ceil_div(int64_t{c.par()} * p.N, c.threads) > 4 * kMaxRegFloats)
    bad(p, "staging par * N values takes more than 128 registers per thread" + cfg);
}

GnMinConfig gn_min_heuristic(const LinearGnMinProblem& p, int cc, int sm_count, bool out_aligned,
                             int64_t max_smem) {
  validate(p);
  sm_count = std::max(1, sm_count);
  // About 16 channels per thread and row.
  const int64_t slice = std::min<int64_t>(kMaxThreads, pow2_ceil(ceil_div(p.N, 16)));
  return shape(p, smem_budget(cc, max_smem), sm_count, out_aligned, slice, 0,
               p.N >= kSplitMinN && p.M >= kSplitMinM);
}

std::vector<GnMinConfig> gn_min_candidates(const LinearGnMinProblem& p, int cc, int sm_count,
                                           bool out_aligned, int64_t max_smem) {
  const GnMinConfig h = gn_min_heuristic(p, cc, sm_count, out_aligned, max_smem);
  const int64_t budget = smem_budget(cc, max_smem);
  std::vector<GnMinConfig> out{h};
  sm_count = std::max(1, sm_count);
  for (int64_t slice : {int64_t{h.slice}, int64_t{h.slice} * 2, int64_t{h.slice} / 2}) {
    if (slice < 1 || slice > kMaxThreads) continue;
    for (bool split : {h.split, !h.split}) {
      const GnMinConfig base = shape(p, budget, sm_count, out_aligned, slice, 0, split);
      for (int seq : {base.seq / 2, base.seq, base.seq * 2, base.seq * 4}) {
        if (seq < 1) continue;
        GnMinConfig c = shape(p, budget, sm_count, out_aligned, slice, seq, split);
        if (c.rows() > std::max(64, c.par())) continue;
        if (c.rows() / 2 >= p.M && c.seq > 1) continue;  // more rows per CTA than M has
        if (p.N * c.rows() > kMaxOutIndex) continue;
        if (std::none_of(out.begin(), out.end(),
                         [&](const GnMinConfig& o) { return o.describe() == c.describe(); }))
          out.push_back(c);
      }
    }
  }
  return out;
}

Spec gn_min_spec(const LinearGnMinProblem& p, const GnMinConfig& c) {
  Spec s("kjit/gn_min.cuh", "kjit::gn_min_fwd");
  s.value(p.N)
      .value(p.G)
      .value(c.threads)
      .value(c.slice)
      .value(c.sub)
      .value(c.seq)
      .value(c.vec)
      .value(c.pad)
      .value(c.smem)
      .value(c.affine_smem)
      .value(c.out_vec)
      .value(c.linear_bias)
      .value(c.split)
      .value(p.precision == Precision::Fp32x3);  // scaled: the kernel undoes the split's scales
  return s;
}

Spec split_spec(int64_t K, int vec) {
  if (K < 1 || K > INT32_MAX)
    throw Error::invalid("K", "f16_split: K = " + std::to_string(K) + " must be in [1, 2^31-1]");
  if (vec != 1 && (vec != 4 || K % 4 != 0))
    throw Error::invalid("vec", "f16_split: vec = " + std::to_string(vec) +
                                    " must be 1, or 4 with K % 4 == 0 (K = " + std::to_string(K) +
                                    ")");
  Spec s("kjit/f16_split.cuh", "kjit::f16_split");
  s.value(kSplitThreads).value(vec).value(K);
  return s;
}

std::vector<Spec> gn_min_specs(const LinearGnMinProblem& p, const GnMinConfig& c) {
  std::vector<Spec> out{gn_min_spec(p, c)};
  if (c.split) {
    Spec b("kjit/gn_min.cuh", "kjit::gn_min_broadcast");
    b.value(kGnMinBroadcastThreads).value(c.out_vec ? 4 : 1);
    out.push_back(b);
  }
  return out;
}

size_t gn_min_smem_bytes(const LinearGnMinProblem& p, const GnMinConfig& c) {
  const int64_t rows_pad = (c.rows() + 3) / 4 * 4;
  const int64_t affine = c.affine_smem ? 2 * padded(p.N, c.pad) : 0;
  const int64_t buf = c.smem ? padded(int64_t{c.par()} * p.N, c.pad) : 0;
  return static_cast<size_t>(64 + rows_pad + affine + buf) * 4;
}

}  // namespace kjit::ops

namespace kjit::ops {

GnMinConfig gn_min_heuristic(const LinearGnMinProblem& p, const Target& t, bool out_aligned) {
  return gn_min_heuristic(p, t.cc, t.sm_count, out_aligned, t.max_smem_per_block);
}

std::vector<GnMinConfig> gn_min_candidates(const LinearGnMinProblem& p, const Target& t,
                                           bool out_aligned) {
  return gn_min_candidates(p, t.cc, t.sm_count, out_aligned, t.max_smem_per_block);
}

LinearGnMinOptions with_pinned_bias_add(const LinearGnMinProblem& p, LinearGnMinOptions opt) {
  if (!opt.config) {
    // A pinned GEMM is an algorithm of one bias variant: auto settles as a plain call's.
    if (opt.gemm && opt.bias_add == LinearBiasAdd::Auto && p.precision != Precision::Fp32x3)
      opt.bias_add = LinearBiasAdd::Epilogue;
    return opt;
  }
  if (opt.config->linear_bias) {
    if (opt.bias_add == LinearBiasAdd::Epilogue)
      bad(p, "config " + opt.config->describe() +
                 " has linear-bias (the fused kernel adds linear_bias), but bias_add = epilogue");
    opt.bias_add = LinearBiasAdd::Kernel;
  } else if (opt.bias_add == LinearBiasAdd::Auto && p.precision != Precision::Fp32x3) {
    opt.bias_add = LinearBiasAdd::Epilogue;
  }
  return opt;
}

std::vector<GnMinConfig> linear_gn_min_configs_for(const LinearGnMinProblem& p, const Target& t,
                                                   const LinearGnMinOptions& pinned_opt,
                                                   bool out_aligned) {
  const LinearGnMinOptions opt = with_pinned_bias_add(p, pinned_opt);
  if (opt.config) validate(p, *opt.config);
  const bool tune = opt.autotune && !opt.config;
  const std::vector<GnMinConfig> base =
      opt.config ? std::vector<GnMinConfig>{*opt.config}
      : tune     ? gn_min_candidates(p, t, out_aligned)
                 : std::vector<GnMinConfig>{gn_min_heuristic(p, t, out_aligned)};
  std::vector<GnMinConfig> out;
  for (bool adds_bias : linear_gn_min_kernel_adds_bias(opt.bias_add, tune, p.precision))
    for (GnMinConfig c : base) {
      c.linear_bias = adds_bias;
      out.push_back(c);
    }
  return out;
}

std::vector<Spec> linear_gn_min_specs_for(const LinearGnMinProblem& p, const Target& t,
                                          const LinearGnMinOptions& opt, bool out_aligned) {
  std::vector<Spec> out =
      op::distinct_specs(linear_gn_min_configs_for(p, t, opt, out_aligned),
                         [&](const GnMinConfig& c) { return gn_min_specs(p, c); });
  // Fp32x3 splits x (and W, without a pack) first: prepare's variant for 16-byte aligned
  // pointers, and with `out_aligned` false (a call's unaligned variants) the scalar one too.
  if (p.precision == Precision::Fp32x3) {
    if (p.K % 4 == 0) out.push_back(split_spec(p.K, 4));
    if (p.K % 4 != 0 || !out_aligned) out.push_back(split_spec(p.K, 1));
  }
  return out;
}

}  // namespace kjit::ops
