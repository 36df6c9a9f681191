// LayerNorm / RMSNorm: problem and config validation, the heuristic, configs -> specs. Pure host
// code on the public API (kjit-precompile runs it without a GPU).
#include <algorithm>
#include <cctype>
#include <climits>
#include <optional>

#include "kjit/error.hpp"
#include "kjit/op/checks.hpp"
#include "kjit/op/config_text.hpp"
#include "kjit/op/specs.hpp"
#include "kjit/ops/layer_norm.hpp"

namespace kjit::ops {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
bool pow2(int64_t v) {
  return v > 0 && (v & (v - 1)) == 0;
}
int64_t pow2_floor(int64_t v) {
  int64_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}
int64_t pow2_ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

// The rule table's constants (docs/OPS.md).
constexpr int kTargetIters = 4;  // vectors a thread holds when the team can still grow
constexpr int kMaxHeldThreads =
    512;                         // CTAs that hold a row: 1024 threads would cap registers at 64
constexpr int kMaxCluster = 16;  // a non-portable cluster (sm_90); 8 is portable
constexpr int kMaxReplicas = 16;
constexpr int kHeldReplicas = 4;    // rule 5's most replicas of held rows
constexpr int kStreamReplicas = 8;  // and of streamed ones
constexpr int kReplicaValues = 16;  // values a thread holds with replicas
constexpr int kStreamThreads = 512;
constexpr int kStreamIters = 4;
constexpr int64_t kManyRowsPerSm = 32;  // rule 3's "many rows"
constexpr int kMaxCoop = 1024;          // CTAs per cooperative row (one warp merges their parts)

// Values a thread may hold in registers, next to its weight and bias: 32 floats (8 fp32 or 4
// 16-bit vectors), 16 scalars on the unaligned path.
int max_iters(int vec) {
  return vec == 1 ? 16 : 32 / vec;
}
int target_iters(int vec) {
  return vec == 1 ? 8 : kTargetIters;
}

[[noreturn]] void bad(const LayerNormProblem& p, const std::string& field,
                      const std::string& rule) {
  op::invalid(norm_kind_name(p.kind), field, rule, p.describe());
}

// The elements per vector access: 16 bytes when every pointer is 16-byte aligned and rows are a
// whole number of vectors (each row then starts aligned), else one element.
int vec_for(const LayerNormProblem& p, bool aligned) {
  const int v = static_cast<int>(16 / dtype_size(p.dtype));
  return aligned && p.width % v == 0 ? v : 1;
}

// A CTA team for `n` vectors per CTA: the fewest threads (128..512) that hold them with at most
// target_iters each, else 512 threads with up to max_iters; nullopt when that cannot hold them.
// The same for clusters that spread few rows over the SMs: with the statistics sent to each
// peer's inbox, 256 threads x 4 vectors per CTA beat one vector on each of 1024 threads (fewer
// warps to reduce over), e.g. RMSNorm fp32 1 x 65536 on 16 CTAs: 2.36 us against 2.78.
std::optional<LayerNormConfig> cta_layout(int64_t n, int vec, int cluster) {
  LayerNormConfig c;
  c.vec = vec;
  c.cluster = cluster;
  for (int threads = 128; threads <= kMaxHeldThreads; threads *= 2) {
    c.threads = c.team = threads;
    c.iters = static_cast<int>(ceil_div(n, threads));
    if (c.iters <= target_iters(vec)) return c;
  }
  if (c.iters > max_iters(vec)) return std::nullopt;
  return c;
}

// The width a kernel is compiled for: the problem's on clusters, none (a run-time argument,
// nearby widths sharing a kernel) otherwise. A cluster's row is long and few rows run at once, so
// its kernel is latency-bound, and a constant width takes the bounds and index arithmetic off its
// critical path (H200, bench.py's method, fp32 one row of 65536: LayerNorm 2.479 -> 2.428 us,
// RMSNorm 2.331 -> 2.269; docs/PERF.md, twenty-first session). On many rows of 4096 it measured
// no better (LayerNorm) or worse (RMSNorm's 256-thread stream, 128.8 -> 129.4 us: more registers
// freed, more CTAs per SM). Cooperative rows are the same: long, few, latency-bound.
int kernel_width(const LayerNormProblem& p, const LayerNormConfig& c) {
  return c.cluster > 1 || c.coop > 1 ? static_cast<int>(p.width) : 0;
}

}  // namespace

const char* norm_kind_name(NormKind k) {
  return k == NormKind::RMSNorm ? "rms_norm" : "layer_norm";
}

// Case-insensitive, without building a lowered copy: the C ABI reads the kind on every call.
static bool same_name(std::string_view s, std::string_view lower) {
  if (s.size() != lower.size()) return false;
  for (size_t i = 0; i < s.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != lower[i]) return false;
  return true;
}

NormKind parse_norm_kind(std::string_view s) {
  if (same_name(s, "layer_norm") || same_name(s, "layernorm")) return NormKind::LayerNorm;
  if (same_name(s, "rms_norm") || same_name(s, "rmsnorm")) return NormKind::RMSNorm;
  throw Error::invalid("kind", "norm kind '" + std::string(s) + "' must be layer_norm or rms_norm");
}

LayerNormProblem LayerNormProblem::layer_norm(int64_t rows, int64_t width, DType dtype) {
  LayerNormProblem p;
  p.rows = rows;
  p.width = width;
  p.dtype = p.param_dtype = dtype;
  return p;
}

LayerNormProblem LayerNormProblem::rms_norm(int64_t rows, int64_t width, DType dtype) {
  LayerNormProblem p = layer_norm(rows, width, dtype);
  p.kind = NormKind::RMSNorm;
  p.has_bias = false;
  return p;
}

// The activation's name; a value outside the enum (a cast integer) as its number, so that the
// error describing such a problem can still be formatted.
static std::string activation_text(Activation a) {
  try {
    return activation_name(a);
  } catch (const Error&) {
    return "activation=" + std::to_string(static_cast<int>(a));
  }
}

std::string LayerNormProblem::describe() const {
  const bool params = has_weight || has_bias;
  return std::string(norm_kind_name(kind)) + " " + dtype_name(dtype) +
         " rows=" + std::to_string(rows) + " width=" + std::to_string(width) +
         (has_weight ? " w" : "") + (has_bias ? " b" : "") +
         (params && param_dtype != dtype ? std::string(" params=") + dtype_name(param_dtype) : "") +
         (residual ? " +residual" : "") +
         (activation != Activation::None ? " " + activation_text(activation) : "");
}

LayerNormConfig without_replicas(LayerNormConfig c) {
  c.replicas = 1;
  return c;
}

std::string LayerNormConfig::describe() const {
  return "threads=" + std::to_string(threads) + " team=" + std::to_string(team) +
         " vec=" + std::to_string(vec) + " iters=" + std::to_string(iters) +
         " cluster=" + std::to_string(cluster) + (stream ? " stream" : "") +
         (replicas != 1 ? " replicas=" + std::to_string(replicas) : "") +
         (coop != 1 ? " coop=" + std::to_string(coop) : "");
}

LayerNormConfig parse_layer_norm_config(std::string_view text) {
  op::ConfigText t("layer_norm", text);
  LayerNormConfig c;
  c.threads = t.integer("threads", 1, 1024);
  c.team = t.integer("team", 1, 1024);
  c.vec = t.integer("vec", 1, 16);
  c.iters = t.integer("iters", 1, 64);
  c.cluster = t.integer("cluster", 1, 16);
  c.stream = t.flag("stream");
  c.replicas = t.integer("replicas", 1, 1, 16);
  c.coop = t.integer("coop", 1, 1, kMaxCoop);
  t.finish("threads, team, vec, iters, cluster, stream, replicas, coop");
  return c;
}

void pin_config_text(std::string_view text, LayerNormOptions* opt) {
  opt->config = parse_layer_norm_config(text);
}

void validate(const LayerNormProblem& p) {
  if (p.kind != NormKind::LayerNorm && p.kind != NormKind::RMSNorm)
    bad(p, "kind",
        "kind = " + std::to_string(static_cast<int>(p.kind)) + " must be LayerNorm or RMSNorm");
  if (p.dtype != DType::F32 && p.dtype != DType::F16 && p.dtype != DType::BF16)
    bad(p, "dtype",
        "dtype = " + std::to_string(static_cast<int>(p.dtype)) + " must be F32, F16 or BF16");
  if (p.param_dtype != p.dtype && p.param_dtype != DType::F32)
    bad(p, "param_dtype",
        "param_dtype = " + std::to_string(static_cast<int>(p.param_dtype)) + " must be dtype (" +
            dtype_name(p.dtype) + ") or F32");
  try {
    activation_name(p.activation);  // throws only for a value outside the enum
  } catch (const Error&) {
    bad(p, "activation",
        "activation = " + std::to_string(static_cast<int>(p.activation)) +
            " is not a kjit::Activation");
  }
  if (p.kind == NormKind::RMSNorm && p.has_bias)
    bad(p, "has_bias", "RMSNorm has no bias (F.rms_norm takes a weight only)");
  if (p.rows < 0) bad(p, "rows", "rows = " + std::to_string(p.rows) + " must be >= 0");
  if (p.width < 1) bad(p, "width", "width = " + std::to_string(p.width) + " must be >= 1");
  if (p.width > layer_norm_max_width())
    bad(p, "width",
        "width = " + std::to_string(p.width) +
            " exceeds 2^31 - 2^20 (32-bit indices within a row)");
  // Elements times their bytes (4 at most) must fit a size_t with room: 2^59 elements.
  if (p.rows > (int64_t{1} << 59) / p.width)
    bad(p, "rows",
        "rows * width = " + std::to_string(p.rows) + " * " + std::to_string(p.width) +
            " exceeds 2^59 elements (sizes in bytes must not overflow)");
}

void validate_config(const LayerNormProblem& p, const LayerNormConfig& c, int cc, bool aligned) {
  auto no = [&](const std::string& field, const std::string& rule) {
    bad(p, field, "config " + c.describe() + ": " + rule);
  };
  if (c.threads < 32 || c.threads > 1024 || c.threads % 32 != 0)
    no("threads", "threads must be a multiple of 32 in [32, 1024]");
  if (!(c.team == c.threads || (c.team <= 32 && pow2(c.team))))
    no("team", "team must be a power of two <= 32 or equal threads");
  const int full = static_cast<int>(16 / dtype_size(p.dtype));
  if (c.vec != 1 && c.vec != full)
    no("vec",
       "vec must be 1 or " + std::to_string(full) + " (16 bytes of " + dtype_name(p.dtype) + ")");
  if (c.vec > 1 && !aligned) no("vec", "vec > 1 needs 16-byte aligned pointers");
  if (p.width % c.vec != 0)
    no("vec", "width = " + std::to_string(p.width) + " is not a multiple of vec");
  if (c.iters < 1 || c.iters > 64) no("iters", "iters must be in [1, 64]");
  if (!c.stream && c.iters * c.vec > 64)
    no("iters", "iters * vec = " + std::to_string(c.iters * c.vec) +
                    " values held per thread exceed 64 (registers)");
  if (c.cluster < 1 || c.cluster > kMaxCluster) no("cluster", "cluster must be in [1, 16]");
  if (c.cluster > 1 && cc < 90) no("cluster", "clusters need sm_90 or newer");
  if ((c.cluster > 1 || c.stream) && c.team != c.threads)
    no("team", "a cluster or a streaming config needs team == threads");
  if (c.replicas < 1 || c.replicas > kMaxReplicas) no("replicas", "replicas must be in [1, 16]");
  if (c.replicas > 1 && c.team != c.threads) no("team", "replicas need team == threads");
  if (c.coop < 1 || c.coop > kMaxCoop)
    no("coop", "coop must be in [1, " + std::to_string(kMaxCoop) + "]");
  if (c.coop > 1 && cc < 70) no("coop", "cooperative rows need sm_70 or newer");
  if (c.coop > 1 && (c.team != c.threads || c.cluster != 1 || c.replicas != 1))
    no("coop", "coop > 1 needs team == threads, cluster = 1 and replicas = 1");
  const int64_t held = int64_t{c.team} * c.iters * c.cluster * c.vec * c.coop;
  if (!c.stream && held < p.width)
    no("iters", "holds " + std::to_string(held) + " elements per row, fewer than width");
}

// The rule table (docs/OPS.md). nv = vectors per row.
//  1. nv <= 32 * max_iters (<= 1024 elements): a team inside a warp, the smallest power of two
//     holding the row with <= target_iters vectors per thread; 256-thread CTAs.
//  2. Else a CTA per row, or on sm_90 a cluster: as many CTAs as holding the row in registers
//     takes (<= 512 threads each), and more for few rows (as many as spread them over the SMs,
//     at least 256 vectors per CTA), up to 16 (max_cluster).
//  3. Except: where that is one CTA of 256 threads holding 4 fp32 vectors each (aligned rows of
//     3076 to 4096), without a residual, and there are at least 32 rows per SM, the same threads
//     stream instead (the row read twice, the second time from L2): holding takes LayerNorm 63
//     registers, 4 CTAs per SM, too few rows in flight to keep HBM busy. H200, 16384 x 4096:
//     RMSNorm 126.9 us against 130.1 held, LayerNorm 129.35 against 130.05. Not for wider rows,
//     whose 512-thread held CTAs beat a 256-thread stream (8192 x 8192: RMSNorm 129.7 against
//     132.7 us, LayerNorm 131.2 against 132.1; 4352 x 16384 LayerNorm: 154.9 against 172.9).
//     Not with a residual: its stream (two more tensors, 284 us) was never timed against holding.
//     RMSNorm rows whose vectors fill 512 threads x 2 exactly (fp32 4096) stream on those
//     (tools/bench.py's method, H200, 16384 x 4096: 126.7 us against 127.6 on 256 x 4; 8192 x
//     4096: 65.0 against 65.4); LayerNorm's two CTA reductions are exposed there (127.9 ->
//     140.7), and rows of 3200 leave threads idle (RMSNorm 103.5 against 100.0).
//  4. Rows no cluster holds (or any that needs more than one CTA before sm_90) stream: 512
//     threads, 4 loads in flight each, clusters spreading few rows on sm_90.
//  5. CTA teams (rules 2-4) whose grid leaves half the SMs idle or more: replicas, doubled while
//     the grid fits the SMs, up to 4 held (then threads doubled and iters halved while a thread
//     holds over 16 values, iters is even and the CTA under 512 threads: a 16-bit row of 65536
//     on 256 x 2, not 128 x 4) and 8 streamed. Each replica loads the row but only its
//     share of the weight and bias, and stores only its share. H200, 1 x 65536, us: LayerNorm
//     fp32 2.69 -> 2.40, bf16 2.39 -> 2.26 (256 x 2; 2.34 on 128 x 4), RMSNorm fp32 2.27 ->
//     2.03, bf16 2.07 -> 1.91; LayerNorm fp32 1 x 2^20 (streamed) 28.3 -> 14.5; 4 x 65536 (R 2)
//     2.98 -> 2.92. 8 held replicas lose to 4 (fp32 2.56, bf16 2.38).
//  6. On sm_70 and newer, rows rule 4 would stream, when each gets two SMs or more (rows <=
//     sm_count / 2): coop, sm_count / rows CTAs per row, one per SM, each holding an even share
//     of the row as rule 2's CTAs do (else streaming it as rule 4's), the statistics merged
//     through global memory. One read of x from HBM where the row is held, and every SM at
//     work where a cluster brought 16.
// Rule 3: the held config is the measured one (256 threads x 4 fp32 vectors, no cluster), no
// residual, and many rows.
static bool streams_instead(const LayerNormProblem& p, const Target& t,
                            const LayerNormConfig& held) {
  return dtype_size(p.dtype) == 4 && !p.residual && held.vec == 4 && held.cluster == 1 &&
         held.threads == 256 && held.iters == 4 && p.rows >= kManyRowsPerSm * t.sm_count;
}

// Rule 4's streaming config: 512 threads, 4 loads in flight.
static LayerNormConfig streamed(int vec, int cluster) {
  LayerNormConfig c;
  c.threads = c.team = kStreamThreads;
  c.vec = vec;
  c.iters = kStreamIters;
  c.stream = true;
  c.cluster = cluster;
  return c;
}

// The CTAs per row rule 6 gives p's rows on t (a CTA per SM), or 0 where it does not apply
// (before sm_70, no rows, or more than half as many rows as SMs): the heuristic's and the
// candidates' one rule.
static int coop_ctas(const LayerNormProblem& p, const Target& t) {
  if (t.cc < 70 || p.rows < 1 || p.rows > t.sm_count / 2) return 0;
  return static_cast<int>(std::min<int64_t>(t.sm_count / p.rows, kMaxCoop));
}

// Rule 6: a cooperative row, or nullopt where it does not apply.
static std::optional<LayerNormConfig> coop_layout(const LayerNormProblem& p, const Target& t,
                                                  int vec, int64_t nv) {
  const int coop = coop_ctas(p, t);
  if (coop == 0) return std::nullopt;
  LayerNormConfig c = cta_layout(ceil_div(nv, coop), vec, 1).value_or(streamed(vec, 1));
  c.coop = coop;
  return c;
}

static LayerNormConfig layout(const LayerNormProblem& p, const Target& t, bool aligned,
                              int max_cluster, bool coop) {
  const int vec = vec_for(p, aligned);
  const int64_t nv = p.width / vec;
  LayerNormConfig c;
  c.vec = vec;
  if (nv <= 32 * max_iters(vec)) {
    c.threads = 256;
    c.team = 1;
    while (c.team < 32 && ceil_div(nv, c.team) > target_iters(vec)) c.team *= 2;
    c.iters = static_cast<int>(ceil_div(nv, c.team));
    return c;
  }
  const int64_t per_cta = int64_t{kMaxHeldThreads} * max_iters(vec);
  const int64_t need = pow2_ceil(ceil_div(nv, per_cta));  // CTAs that hold the row
  const int64_t spread = pow2_floor(
      std::max<int64_t>(1, std::min<int64_t>(t.sm_count / std::max<int64_t>(p.rows, 1), nv / 256)));
  const bool clusters = t.cc >= 90;
  const int64_t cluster = clusters ? std::max(need, std::min<int64_t>(spread, max_cluster)) : 1;
  if (need == 1 || (clusters && need <= max_cluster)) {
    if (auto held = cta_layout(ceil_div(nv, cluster), vec, static_cast<int>(cluster))) {
      if (streams_instead(p, t, *held)) {  // rule 3: the same threads, streaming
        held->iters = kStreamIters;
        held->stream = true;
        if (p.kind == NormKind::RMSNorm && nv == 2 * kStreamThreads) {  // 512 x 2, exactly
          held->threads = held->team = kStreamThreads;
          held->iters = 2;
        }
      }
      return *held;
    }
  }
  if (coop)
    if (auto co = coop_layout(p, t, vec, nv)) return *co;
  return streamed(vec, clusters ? static_cast<int>(std::min<int64_t>(spread, max_cluster)) : 1);
}

// Rule 5 on top of the layout: CTA teams whose grid leaves half the SMs idle or more get replicas.
// coop: whether rule 6 may apply.
static LayerNormConfig heuristic(const LayerNormProblem& p, const Target& t, bool aligned,
                                 int max_cluster, bool coop) {
  LayerNormConfig c = layout(p, t, aligned, max_cluster, coop);
  if (c.team != c.threads || p.rows > t.sm_count || c.coop > 1) return c;
  const int64_t ctas = p.rows * c.cluster;  // a row per CTA team
  const int most = c.stream ? kStreamReplicas : kHeldReplicas;
  while (c.replicas < most && ctas * c.replicas * 2 <= t.sm_count) c.replicas *= 2;
  while (c.replicas > 1 && !c.stream && c.iters * c.vec > kReplicaValues &&
         c.threads < kMaxHeldThreads && c.iters % 2 == 0) {
    c.threads = c.team = c.threads * 2;
    c.iters /= 2;
  }
  return c;
}

LayerNormConfig layer_norm_heuristic(const LayerNormProblem& p, const Target& t, bool aligned) {
  return heuristic(p, t, aligned, kMaxCluster, true);
}

// Valid configs of every family around the row: teams within a warp (short rows), a CTA or a
// cluster holding it (each CTA size and, on sm_90, cluster size that holds it in registers), and
// streaming ones. Invalid combinations are filtered by validate_config, not ruled out here.
static std::vector<LayerNormConfig> family_configs(const LayerNormProblem& p, const Target& t,
                                                   bool aligned) {
  const int vec = vec_for(p, aligned);
  const int64_t nv = p.width / vec;
  std::vector<LayerNormConfig> out;
  // Held rows within the registers the kernels plan for (see cta_layout): 32 values a thread,
  // 8 with 1024 threads.
  const bool long_row = nv > int64_t{kMaxHeldThreads} * max_iters(vec);
  const int max_cluster = t.cc < 90 ? 1 : long_row || p.rows < t.sm_count ? kMaxCluster : 1;
  auto add = [&](int threads, int team, int64_t iters, int cluster, bool stream, int coop = 1) {
    if (iters < 1 || iters > 64) return;
    if (!stream && (iters > max_iters(vec) || (threads == 1024 && iters * vec > 8))) return;
    out.push_back({threads, team, vec, static_cast<int>(iters), cluster, stream, 1, coop});
    // And replicated over the SMs a grid leaves idle: on the largest clusters, where a sweep's
    // winners were (16 replicas never won).
    if (team != threads || coop > 1 || cluster < std::min(8, max_cluster)) return;
    const int64_t ctas = std::min<int64_t>(p.rows, t.sm_count) * cluster;  // a row per CTA
    for (int r = 2; r <= kStreamReplicas && ctas * r <= t.sm_count; r *= 2)
      out.push_back({threads, team, vec, static_cast<int>(iters), cluster, stream, r});
  };
  // Short rows: a team within a warp. Clusters: for rows one CTA cannot hold, or to spread few
  // rows over the SMs. Streaming: for rows no CTA holds, and for any row past a warp's (its
  // high occupancy can beat holding, as torch.compile's looped reductions do on large tensors).
  const bool short_row = nv <= 32 * max_iters(vec);
  if (short_row)
    for (int team = 1; team <= 32; team *= 2)
      for (int threads : {128, 256, 512}) add(threads, team, ceil_div(nv, team), 1, false);
  for (int cluster = 1; cluster <= max_cluster; cluster *= 2)
    for (int threads : {128, 256, 512, 1024}) {
      add(threads, threads, ceil_div(nv, int64_t{threads} * cluster), cluster, false);
      if (!short_row) add(threads, threads, kStreamIters, cluster, true);
    }
  // Cooperative rows (rule 6's rows): a CTA per SM, and half and a quarter as many, each CTA
  // size holding its share or streaming it.
  if (const int most = coop_ctas(p, t); !short_row && most > 0) {
    for (int coop = most; coop >= std::max(2, most / 4); coop /= 2)
      for (int threads : {256, 512, 1024}) {
        add(threads, threads, ceil_div(ceil_div(nv, coop), threads), 1, false, coop);
        add(threads, threads, kStreamIters, 1, true, coop);
      }
  }
  return out;
}

// Appends c unless out already has it (configs are the same when they describe the same).
static void add_new(std::vector<LayerNormConfig>& out, const LayerNormConfig& c) {
  if (std::none_of(out.begin(), out.end(),
                   [&](const LayerNormConfig& o) { return o.describe() == c.describe(); }))
    out.push_back(c);
}

std::vector<LayerNormConfig> layer_norm_candidates(const LayerNormProblem& p, const Target& t,
                                                   bool aligned) {
  std::vector<LayerNormConfig> out{layer_norm_heuristic(p, t, aligned)};
  for (const LayerNormConfig& c : family_configs(p, t, aligned)) {
    try {
      validate_config(p, c, t.cc, aligned);
    } catch (const Error&) {
      continue;
    }
    add_new(out, c);
  }
  return out;
}

std::vector<LayerNormConfig> layer_norm_configs_for(const LayerNormProblem& p, const Target& t,
                                                    const LayerNormOptions& opt, bool aligned) {
  // A forced config is checked here too, so that a manifest never compiles one the op refuses.
  if (opt.config) validate_config(p, *opt.config, t.cc, aligned);
  std::vector<LayerNormConfig> out{opt.config ? *opt.config : layer_norm_heuristic(p, t, aligned)};
  // A cooperative row's fallback, for captures on a stream without a workspace (and a device
  // that refuses the grid): the same row without coop.
  if (!opt.config && out[0].coop > 1) out.push_back(heuristic(p, t, aligned, kMaxCluster, false));
  // A device may refuse clusters over 8 CTAs (the non-portable sizes): then the portable one.
  if (!opt.config && out.back().cluster > 8) out.push_back(heuristic(p, t, aligned, 8, false));
  // What a call in place runs instead of a config with replicas (their writes would land under
  // each other's reads).
  for (size_t i = 0, n = out.size(); i < n; ++i) add_new(out, without_replicas(out[i]));
  if (!opt.config && opt.autotune)
    for (const LayerNormConfig& c : layer_norm_candidates(p, t, aligned)) add_new(out, c);
  return out;
}

Spec layer_norm_spec(const LayerNormProblem& p, const LayerNormConfig& c) {
  // Without weight and bias the parameter type is unused: one kernel for either param_dtype.
  const DType params = p.has_weight || p.has_bias ? p.param_dtype : p.dtype;
  Spec s("kjit/layer_norm.cuh", "kjit::row_norm");
  s.type(p.dtype)
      .type(params)
      .type(activation_policy(p.activation))
      .value(p.kind == NormKind::RMSNorm)
      .value(p.has_weight)
      .value(p.has_bias)
      .value(p.residual)
      .value(c.vec)
      .value(c.threads)
      .value(c.team)
      .value(c.iters)
      .value(c.cluster)
      .value(c.replicas)
      .value(c.stream)
      .value(c.coop > 1)
      .value(kernel_width(p, c));
  return s;
}

std::vector<Spec> layer_norm_specs_for(const LayerNormProblem& p, const Target& t,
                                       const LayerNormOptions& opt, bool aligned) {
  if (p.rows == 0) return {};  // nothing to launch
  return op::distinct_specs(
      layer_norm_configs_for(p, t, opt, aligned),
      [&](const LayerNormConfig& c) { return std::vector<Spec>{layer_norm_spec(p, c)}; });
}

}  // namespace kjit::ops
