// GroupNorm: problem validation, the config heuristic, autotune candidates and the
// specialization a config compiles to. Pure host code: no GPU needed (kjit-precompile uses it).
#include <algorithm>
#include <climits>

#include "kjit/error.hpp"
#include "kjit/op/checks.hpp"
#include "kjit/op/specs.hpp"
#include "kjit/op/target.hpp"
#include "kjit/ops/group_norm.hpp"

namespace kjit::ops {
namespace {

// Registers per thread spent on the held slice: what fits next to the kernel's own ~40 while
// keeping two CTAs per SM (65536 registers): 64 floats up to 256 threads, 32 up to 512.
int max_held_floats(int64_t threads) {
  return threads <= 256 ? 64 : threads <= 512 ? 32 : 16;
}
constexpr int kSmemAffineBytes = 40 * 1024;
// Shared memory one block may use on sm_90 (227 KB); smem-staged slices stay within it.
constexpr int64_t kMaxSmemBytes = 227 * 1024;
constexpr int64_t kMaxGroupLen = (int64_t{1} << 31) - (int64_t{1} << 18);
// Tensors up to this size stream through L2 (60 MB on the H200, 50 MB on the H100): x stays there
// between the two reads while y goes out.
constexpr int64_t kStreamL2Bytes = int64_t{40} << 20;

// Whether the whole tensor fits what streaming may keep in L2 between its two reads.
bool fits_stream_l2(const GroupNormProblem& p) {
  return p.N * p.C * p.S * static_cast<int64_t>(dtype_size(p.dtype)) <= kStreamL2Bytes;
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
int64_t round_up(int64_t a, int64_t b) {
  return ceil_div(a, b) * b;
}
int pow2_ceil(int64_t v) {
  int p = 1;
  while (p < v) p <<= 1;
  return p;
}

int64_t group_len(const GroupNormProblem& p) {
  return p.C / p.groups * p.S;
}

int vec_width(const GroupNormProblem& p, bool aligned) {
  const int v = 16 / static_cast<int>(dtype_size(p.dtype));
  if (!aligned) return 1;
  const int64_t cg = p.C / p.groups;
  if (p.layout == Layout::NCHW) return group_len(p) % v == 0 ? v : 1;
  return (cg % v == 0 && p.C % v == 0) ? v : 1;
}

int max_cluster(int cc) {
  return cc >= 90 ? 16 : 1;
}

// Threads and vectors per thread for m vectors in one CTA of at most max_threads, holding at
// most max_floats per thread: the least idle slots, then the most vectors per thread (more
// loads in flight, fewer warps to merge). Returns false when m does not fit.
bool fit_cta(int64_t m, int vec, int max_threads, int max_floats, int* threads, int* iters) {
  int64_t best_slots = LLONG_MAX;
  for (int i = 1; i * vec <= max_floats; ++i) {
    const int64_t t = std::max<int64_t>(32, round_up(ceil_div(m, i), 32));
    if (t > max_threads) continue;
    const int64_t it = ceil_div(m, t);
    if (it * vec > max_held_floats(t)) continue;
    const int64_t slots = t * it;
    if (slots < best_slots || (slots == best_slots && it > *iters)) {
      best_slots = slots;
      *threads = static_cast<int>(t);
      *iters = static_cast<int>(it);
    }
  }
  return best_slots != LLONG_MAX;
}

void set_smem_affine(const GroupNormProblem& p, GroupNormConfig* c) {
  if (c->smem || c->split || c->pipe) {  // staged: always kept there; split, pipe: unused
    c->smem_affine = true;
    return;
  }
  const int64_t teams = c->threads / c->team;
  c->smem_affine = teams * 2 * (p.C / p.groups) * 4 <= kSmemAffineBytes;
}

bool smem_eligible(const GroupNormProblem& p, int cc, bool aligned) {
  return cc >= 90 && p.layout == Layout::NCHW &&
         vec_width(p, aligned) == 16 / static_cast<int>(dtype_size(p.dtype));
}

// A smem-staged config: cluster cs, `threads` per CTA.
GroupNormConfig smem_config(const GroupNormProblem& p, int cs, int threads) {
  GroupNormConfig c;
  c.smem = true;
  c.vec = 16 / static_cast<int>(dtype_size(p.dtype));
  c.cluster = cs;
  c.threads = c.team = threads;
  c.iters = static_cast<int>(ceil_div(ceil_div(group_len(p) / c.vec, cs), threads));
  return c;
}

// The split (two-kernel) form: NCHW, groups of >= 4096 vectors (smaller ones gain nothing from a
// second kernel's launch), and a tensor L2 keeps between the two reads.
bool split_eligible(const GroupNormProblem& p, bool aligned) {
  return p.layout == Layout::NCHW && group_len(p) / vec_width(p, aligned) >= 4096 &&
         fits_stream_l2(p);
}

// Every warp of gn_apply merges all of its group's partials: bounded, so that the merge stays a
// few loads per lane (at 64 chunks, 1/4 of a 16 KB chunk's bytes again in L2 reads).
constexpr int64_t kMaxSplitChunks = 64;

GroupNormConfig split_config(const GroupNormProblem& p, bool aligned, int threads, int iters,
                             bool coop = false) {
  GroupNormConfig c;
  c.split = true;
  c.coop = coop;
  c.vec = vec_width(p, aligned);
  c.threads = c.team = threads;
  c.iters = iters;
  c.cluster = 1;
  return c;
}

// The pipelined form: NCHW, sm_70 (acquire/release atomics), groups of >= 32768 vectors (the
// only ones it could help), and ticket numbers (two per chunk) within 32 bits.
constexpr int64_t kMaxPipeChunks = int64_t{1} << 30;

bool pipe_eligible(const GroupNormProblem& p, int cc, bool aligned) {
  const int64_t nvec = group_len(p) / vec_width(p, aligned);
  return cc >= 70 && p.layout == Layout::NCHW && nvec >= 32768 &&
         p.N * p.groups * ceil_div(nvec, 1024) <= kMaxPipeChunks;  // the smallest chunks
}

// The split pair's chunking, in one pipelined launch.
GroupNormConfig pipe_config(const GroupNormProblem& p, bool aligned, int threads, int iters) {
  GroupNormConfig c = split_config(p, aligned, threads, iters);
  c.split = false;
  c.pipe = true;
  return c;
}

GroupNormConfig heuristic(const GroupNormProblem& p, const Target& t, bool aligned,
                          bool allow_split);

// describe()'s activation: nothing for none, " silu", " gelu", ...; a value outside the enum
// (validate() describes the problem it rejects) as its number.
std::string activation_text(Activation a) {
  switch (a) {
    case Activation::None:
      return "";
    case Activation::SiLU:
    case Activation::GeluTanh:
    case Activation::GeluErf:
    case Activation::ReLU:
      return std::string(" ") + activation_name(a);
  }
  return " activation=" + std::to_string(static_cast<int>(a));
}

}  // namespace

const char* layout_name(Layout l) {
  return l == Layout::NHWC ? "nhwc" : "nchw";
}

Layout parse_layout(const std::string& s) {
  for (Layout l : {Layout::NCHW, Layout::NHWC})
    if (s == layout_name(l)) return l;
  throw Error(Errc::InvalidArgument, "layout '" + s + "' must be nchw or nhwc");
}

void validate(const GroupNormProblem& p) {
  // Each error names the problem's field it is about (Error::field).
  auto bad = [&](const char* field, const std::string& what) {
    op::invalid("group_norm", field, what, p.describe());
  };
  // Enums from a cast integer: a dtype the templates do not know would fail in NVRTC, a layout or
  // activation outside the list would run as another one.
  for (const auto& [what, t] : {std::pair{"dtype", p.dtype}, {"param_dtype", p.param_dtype}})
    if (t != DType::F32 && t != DType::F16 && t != DType::BF16)
      bad(what, std::string(what) + " = " + std::to_string(static_cast<int>(t)) +
                    " must be F32, F16 or BF16");
  if (p.layout != Layout::NCHW && p.layout != Layout::NHWC)
    bad("layout",
        "layout = " + std::to_string(static_cast<int>(p.layout)) + " must be NCHW or NHWC");
  switch (p.activation) {
    case Activation::None:
    case Activation::SiLU:
    case Activation::GeluTanh:
    case Activation::GeluErf:
    case Activation::ReLU:
      break;
    default:
      bad("activation", "activation = " + std::to_string(static_cast<int>(p.activation)) +
                            " must be None, SiLU, GeluTanh, GeluErf or ReLU");
  }
  if (p.N < 0) bad("N", "N = " + std::to_string(p.N) + " must be >= 0");
  if (p.S < 0) bad("S", "spatial size S = " + std::to_string(p.S) + " must be >= 0");
  if (p.C <= 0) bad("C", "C = " + std::to_string(p.C) + " must be > 0");
  if (p.groups <= 0) bad("groups", "groups = " + std::to_string(p.groups) + " must be > 0");
  if (p.C % p.groups != 0)
    bad("groups", "C = " + std::to_string(p.C) +
                      " must be divisible by groups = " + std::to_string(p.groups));
  // The kernels index channels (g * C/G + c; groups divide C, so they fit too) and a group's
  // vectors in 32-bit ints. A CTA steps up to 1024 threads * 128 vectors past its last vector
  // before its loop ends, so groups stop 2^18 short of 2^31.
  if (p.C > INT_MAX)
    bad("C", "C = " + std::to_string(p.C) + " exceeds 2^31-1 (32-bit channel indices)");
  if (p.S > 0 && p.C / p.groups > INT64_MAX / p.S)
    bad("S", "C/G * S = " + std::to_string(p.C / p.groups) + " * " + std::to_string(p.S) +
                 " overflows 64 bits");
  if (p.S > 0 && group_len(p) > kMaxGroupLen)
    bad("S", "a group of " + std::to_string(group_len(p)) +
                 " elements (C/G * S) exceeds the supported 2^31 - 2^18 = " +
                 std::to_string(kMaxGroupLen) + " (32-bit indices)");
  // Byte counts (up to 16 bytes per element in the kernels' vector math) must fit 64 bits too,
  // also for an empty spatial size, where N * G still sizes the grid.
  constexpr int64_t kMaxElems = INT64_MAX / 16;
  if (p.N > 0 && p.C > kMaxElems / p.N)
    bad("N", "N * C = " + std::to_string(p.N) + " * " + std::to_string(p.C) + " exceeds 2^59");
  if (p.N > 0 && p.S > 0 && p.C > kMaxElems / p.S / p.N)
    bad("N", "N * C * S = " + std::to_string(p.N) + " * " + std::to_string(p.C) + " * " +
                 std::to_string(p.S) + " exceeds 2^59 elements (its byte count must fit 64 bits)");
}

std::string GroupNormProblem::describe() const {
  return std::string(dtype_name(dtype)) + (layout == Layout::NHWC ? " NHWC" : " NCHW") +
         " N=" + std::to_string(N) + " C=" + std::to_string(C) + " S=" + std::to_string(S) +
         " G=" + std::to_string(groups) + activation_text(activation) + (has_weight ? " w" : "") +
         (has_bias ? " b" : "");
}

std::string GroupNormConfig::describe() const {
  return "threads=" + std::to_string(threads) + " team=" + std::to_string(team) +
         " vec=" + std::to_string(vec) + " iters=" + std::to_string(iters) +
         " cluster=" + std::to_string(cluster) + (stream ? " stream" : "") + (smem ? " smem" : "") +
         (held > 0 ? " held=" + std::to_string(held) : "") + (split ? " split" : "") +
         (coop ? " coop" : "") + (pipe ? " pipe" : "") + (smem_affine ? "" : " gmem-affine");
}

GroupNormProblem GroupNormProblem::from_shape(const std::vector<int64_t>& shape, int64_t groups,
                                              DType dtype, Layout layout) {
  if (shape.size() < 2)
    throw Error(Errc::InvalidArgument, "group_norm: shape needs at least 2 dims (N, C), got " +
                                           std::to_string(shape.size()));
  GroupNormProblem p;
  p.dtype = p.param_dtype = dtype;
  p.layout = layout;
  p.groups = groups;
  p.N = shape[0];
  p.C = layout == Layout::NCHW ? shape[1] : shape.back();
  p.S = 1;
  const size_t lo = layout == Layout::NCHW ? 2 : 1;
  const size_t hi = layout == Layout::NCHW ? shape.size() : shape.size() - 1;
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] < 0)
      throw Error(Errc::InvalidArgument, "group_norm: shape[" + std::to_string(i) +
                                             "] = " + std::to_string(shape[i]) + " is negative");
  for (size_t i = lo; i < hi; ++i) {
    if (shape[i] != 0 && p.S > INT64_MAX / shape[i])
      throw Error(Errc::InvalidArgument, "group_norm: spatial size overflows 64 bits");
    p.S *= shape[i];
  }
  return p;
}

GroupNormConfig group_norm_heuristic(const GroupNormProblem& p, const Target& t, bool aligned) {
  return heuristic(p, t, aligned, true);
}

GroupNormConfig group_norm_capture_fallback(const GroupNormProblem& p, const Target& t,
                                            bool aligned) {
  return heuristic(p, t, aligned, false);
}

GroupNormConfig group_norm_heuristic(const GroupNormProblem& p, int cc, bool aligned) {
  return group_norm_heuristic(p, Target::for_cc(cc), aligned);
}

GroupNormConfig group_norm_capture_fallback(const GroupNormProblem& p, int cc, bool aligned) {
  return group_norm_capture_fallback(p, Target::for_cc(cc), aligned);
}

namespace {

GroupNormConfig heuristic(const GroupNormProblem& p, const Target& t, bool aligned,
                          bool allow_split) {
  validate(p);
  const int cc = t.cc;
  const int64_t sms = t.sm_count;  // spreading work: a grid of about this many CTAs fills it
  GroupNormConfig c;
  c.vec = vec_width(p, aligned);
  const int64_t nvec = group_len(p) / c.vec;
  const int64_t ngroups = std::max<int64_t>(1, p.N * p.groups);

  // Small groups: one warp per group (several per CTA when tiny), no barriers at all. On the
  // H200 this beat whole-CTA teams for every group a warp can hold (e.g. 128x256x14x14: 16 us
  // vs 26 us).
  if (nvec <= int64_t{32} * (64 / c.vec)) {
    c.team = nvec <= 16 ? pow2_ceil(nvec) : 32;
    c.iters = static_cast<int>(ceil_div(nvec, c.team));
    c.threads = nvec <= 128 ? 128 : 32;
    c.cluster = 1;
    set_smem_affine(p, &c);
    return c;
  }
  // At most 16 groups of >= 32768 16-byte vectors (512 KB, up to 64 chunks) in a tensor L2
  // holds: two kernels, chunks of 32 KB per CTA, or 16 KB where 32 KB chunks would leave SMs
  // without one. H200 (PERF.md): 1x64x256x256/G16 bf16 10.7 us vs 12.6 staged, f32 15.1 vs
  // 16.6; 1x32x256x256/G8 bf16 7.3 us in 256 chunks of 16 KB vs 8.2 in 128 of 32 KB. The
  // cooperative kernel saves the second launch's host time (~3 us) but took 1-22% more device
  // time on these four. At 64 groups staging is faster (2x128x256x256 bf16 32.5 vs 29.8).
  if (allow_split && smem_eligible(p, cc, aligned) && nvec >= 32768 && ngroups * 8 <= sms &&
      split_eligible(p, aligned)) {
    GroupNormConfig s = split_config(p, aligned, 256, 8);
    if (dtype_size(p.dtype) != 4 && ngroups * group_norm_split_chunks(p, s) < sms) s.iters = 4;
    if (group_norm_split_chunks(p, s) <= kMaxSplitChunks) return s;
  }
  // 17-33 such groups of 16-bit values, at most 4 chunks of 32 KB per SM: one cooperative kernel
  // (a plan falls back to the next candidate on a device that cannot hold the grid at once).
  // H200: 1x128x256x256 bf16 16.0 us vs 17.4 streamed; the pair took 15.8, with two launches.
  if (allow_split && smem_eligible(p, cc, aligned) && dtype_size(p.dtype) == 2 && nvec >= 32768 &&
      ngroups * 8 > sms && ngroups * 8 <= 2 * sms && split_eligible(p, aligned)) {
    const GroupNormConfig s = split_config(p, aligned, 256, 8, true);
    const int64_t chunks = group_norm_split_chunks(p, s);
    if (chunks <= kMaxSplitChunks && ngroups * chunks <= 4 * sms) return s;
  }
  // 17-33 fp32 groups of 512 KB-1 MB: 8 staged slices of 64-128 KB per group (512 threads
  // holding 8 vectors each, the rest in shared memory, 2 CTAs per SM) whose CTAs meet through
  // global memory in one cooperative launch: one read of x. Larger groups would need 16 slices,
  // more than the SMs hold at 2 each for 17 groups. H200 sweeps: 1x128x256x256 f32 25.0 us vs
  // 28.6 streamed and 26.6 for the two-kernel pair; 1x128x232x232 21.2 vs 24.3 streamed;
  // 1x128x200x200 (625 KB groups) 17.1 vs 20.0; at 400 KB (1x128x160x160) staging in 16-CTA
  // clusters stays faster (13.6 vs 13.9). 16-bit types keep the register-held kernel above
  // (bf16 16.6 staged vs 16.4).
  if (allow_split && smem_eligible(p, cc, aligned) && dtype_size(p.dtype) == 4 && nvec > 32768 &&
      nvec <= 65536 && ngroups * 8 > sms && ngroups * 8 <= 2 * sms) {
    GroupNormConfig s = smem_config(p, 8, 512);
    s.coop = true;
    s.held = 8;
    if (group_norm_smem_bytes(p, s) <= kMaxSmemBytes) return s;
  }
  // 17-33 such groups: streamed in 8-CTA clusters, two reads of x with the second served from L2
  // (the first asks L2 to keep x, y is stored evict-first). 256 CTAs load more at once than 3
  // staged 64 KB slices per SM. H200 sweep: 1x128x256x256 f32 29.1 us vs 34.8 staged, bf16 19.3
  // vs 20.6; at 64 groups (2x128x256x256 f32) staging is as fast (55.7 vs 55.5), so it keeps
  // staging.
  if (smem_eligible(p, cc, aligned) && nvec >= 32768 && ngroups * 8 > sms &&
      ngroups * 8 <= 2 * sms && fits_stream_l2(p)) {
    c.cluster = 8;
    c.stream = true;
    c.threads = c.team = 256;
    c.iters = static_cast<int>(std::clamp<int64_t>(nvec / 8 / 256 / 4, 4, 8));
    set_smem_affine(p, &c);
    return c;
  }
  // fp32 groups of more than 2 MB in a tensor L2 cannot hold: one pipelined launch, chunks of
  // 64 KB (512 threads holding 8 vectors each, 2 CTAs per SM). H200 sweep (kjit-bench --sweep,
  // device us): 1x128x512x512/G32 92.8 against 95.0 in 32 KB chunks and 107.2 staged in 16-CTA
  // clusters (torch.compile 105.7); 1x64x1024x1024/G32 180.3 against 204.8 and 214.7 streamed;
  // 1x128x1024x1024/G32 390.0 against 440.1 and 420.5 streamed. At 2 MB (1x256x256x256) 50.2
  // against 49.7 staged: staging keeps those. bf16 gained nothing (1x128x512x512: 62.5 vs 63.8).
  if (allow_split && cc >= 90 && dtype_size(p.dtype) == 4 && nvec > 131072 &&
      vec_width(p, aligned) == 4 && !fits_stream_l2(p) && pipe_eligible(p, cc, aligned)) {
    return pipe_config(p, aligned, 512, 8);
  }
  // 4-byte types in 512-thread CTAs that hold 8 (slices of 64-128 KB) or 16 (128-256 KB) vectors
  // per thread in registers and stage the rest in shared memory: groups of 8192-16384 vectors
  // (128-256 KB) in pairs, groups of 1-4 MB in 16-CTA clusters (17-33 of these in a tensor L2
  // keeps stream instead, above). H200 sweeps: 16x512x64x64 f32 77.4 us vs 79.0 for 8-CTA
  // clusters, 2x320x64x64 f32 10.9 vs 11.8; 1x256x256x256/G32 f32 50.6 vs 57.2 for the best
  // streaming config (torch.compile 56.7), 1x128x512x512/G32 f32 108.3 vs 111.8 (now pipelined,
  // above; this is its capture fallback).
  if (smem_eligible(p, cc, aligned) && dtype_size(p.dtype) == 4) {
    const bool pair = nvec > 8192 && nvec <= 16384;
    if (pair || (nvec > 65536 && nvec <= 262144)) {
      GroupNormConfig s = smem_config(p, pair ? 2 : 16, 512);
      s.held = ceil_div(nvec, s.cluster) <= 8192 ? 8 : 16;
      if (group_norm_smem_bytes(p, s) <= kMaxSmemBytes) return s;
    }
  }
  // Groups of >= 64 KB of vectors on sm_90: staged in shared memory by bulk copies, in slices
  // of ~32 KB (clusters up to 16) with 16 vectors per thread; groups of 64-128 KB in pairs of
  // CTAs with 8 per thread. H200 sweep: 16x512x64x64 f32 85 us vs 102 us held in registers,
  // bf16 47 vs 72; 1x128x256x256 f32 36 vs 45, bf16 20 vs 36; 2x320x64x64 bf16 9.3 vs 10.5.
  if (smem_eligible(p, cc, aligned) && nvec >= 4096) {
    const int cs =
        nvec >= 8192
            ? static_cast<int>(std::min<int64_t>(max_cluster(cc), pow2_ceil(ceil_div(nvec, 2048))))
            : 2;
    const int64_t share = ceil_div(nvec, cs);
    const int per = nvec >= 8192 ? 16 : 8;
    GroupNormConfig s = smem_config(
        p, cs, static_cast<int>(std::clamp<int64_t>(round_up(share / per, 32), 64, 512)));
    // Slices of >= 32 KB in clusters below 16 hold 4 vectors per thread in registers: more CTAs
    // per SM (16x512x64x64 f32 80 us vs 84, bf16 51 vs 54); no gain at 16 (1x128x256x256).
    if (share >= 2048 && cs < 16 && int64_t{s.threads} * 4 < share) s.held = 4;
    if (share <= 4096 && group_norm_smem_bytes(p, s) <= kMaxSmemBytes) return s;
  }
  // Spread few large groups (>= 4096 vectors) over clusters while the grid is under ~2 CTAs per
  // SM and every CTA keeps >= 1024 vectors. Smaller groups lose more to the cluster exchange
  // (~1 us) than they gain (H200: 2x1280x16x16 5.8 us alone vs 8.1 us in pairs).
  const int cmax = max_cluster(cc);
  int cs = 1;
  while (cs < cmax && nvec >= 4096 && ngroups * cs < 2 * sms && nvec / (2 * cs) >= 1024) cs *= 2;
  // Grow the cluster until the group fits: 32 floats per thread in CTAs of up to 512 threads
  // first (measured best: more warps beat deeper per-thread queues), then 64 in up to 256.
  for (;;) {
    const int64_t m = ceil_div(nvec, cs);
    if (fit_cta(m, c.vec, 512, 32, &c.threads, &c.iters) ||
        fit_cta(m, c.vec, 256, 64, &c.threads, &c.iters))
      break;
    if (cs >= cmax) {
      c.stream = true;
      break;
    }
    cs *= 2;
  }
  c.cluster = cs;
  if (c.stream) {
    c.threads = 512;
    c.iters = 4;
  }
  c.team = c.threads;
  set_smem_affine(p, &c);
  return c;
}

}  // namespace

void validate_config(const GroupNormProblem& p, const GroupNormConfig& c, int cc, bool aligned) {
  validate(p);
  auto bad = [&](const std::string& what) {
    throw Error(Errc::InvalidArgument,
                "group_norm config: " + what + " (" + c.describe() + "; " + p.describe() + ")");
  };
  const int full_vec = 16 / static_cast<int>(dtype_size(p.dtype));
  const int64_t L = group_len(p);
  if (c.threads < 32 || c.threads > 1024 || c.threads % 32 != 0)
    bad("threads = " + std::to_string(c.threads) + " must be a multiple of 32 in [32, 1024]");
  const bool warp_team = c.team >= 1 && c.team <= 32 && (c.team & (c.team - 1)) == 0;
  if (!(warp_team || c.team == c.threads))
    bad("team = " + std::to_string(c.team) + " must be a power of two <= 32 or equal threads");
  if (c.vec != 1 && c.vec != full_vec)
    bad("vec = " + std::to_string(c.vec) + " must be 1 or " + std::to_string(full_vec));
  if (c.vec > 1 && c.vec != vec_width(p, aligned))
    bad("vec = " + std::to_string(c.vec) +
        " needs 16-byte aligned pointers and whole vectors per group" +
        (p.layout == Layout::NHWC ? " row (C/G and C multiples of it)" : " (C/G * S a multiple)"));
  // A staged coop group's CTAs meet through global memory: no hardware cluster limits them, only
  // the merge every warp does (at most kMaxSplitChunks partials).
  const int64_t max_parts = c.coop && c.smem ? kMaxSplitChunks : max_cluster(cc);
  if (c.cluster < 1 || c.cluster > max_parts || (c.cluster & (c.cluster - 1)) != 0)
    bad("cluster = " + std::to_string(c.cluster) +
        " must be a power of two <= " + std::to_string(max_parts) +
        (c.coop && c.smem ? " (CTAs per group)" : "") + " on sm_" + std::to_string(cc));
  if ((c.cluster > 1 || c.stream || c.smem) && c.team != c.threads)
    bad("clusters, streaming and smem staging need team == threads");
  if (c.iters < 1) bad("iters = " + std::to_string(c.iters) + " must be >= 1");
  if (c.held != 0 && !c.smem) bad("held = " + std::to_string(c.held) + " needs smem staging");
  if (c.coop && !c.split && !c.smem)
    bad("coop is a form of split or of smem staging: it needs one of them");
  if (c.coop && c.smem && c.cluster < 2)
    bad("coop with smem staging needs cluster >= 2 CTAs per group to meet, not " +
        std::to_string(c.cluster));
  if (c.coop && cc < 70) bad("coop needs sm_70 (acquire/release atomics)");
  if (c.pipe) {
    if (cc < 70) bad("pipe needs sm_70 (acquire/release atomics)");
    if (p.layout != Layout::NCHW) bad("pipe needs NCHW");
    if (c.split || c.coop || c.smem || c.stream || c.held != 0 || c.cluster != 1 ||
        c.team != c.threads)
      bad("pipe takes chunks of threads * iters vectors a CTA at a time: cluster = 1, team = "
          "threads, no split, coop, streaming or staging");
    if (int64_t{c.iters} * c.vec > 64)
      bad("iters * vec = " + std::to_string(int64_t{c.iters} * c.vec) +
          " held per thread exceeds 64");
    if (c.threads > 512) bad("pipe needs threads <= 512, not " + std::to_string(c.threads));
    const int64_t chunks = p.N * p.groups * group_norm_split_chunks(p, c);
    if (chunks > kMaxPipeChunks)
      bad("pipe cuts the tensor into " + std::to_string(chunks) +
          " chunks of threads * iters vectors, more than 2^30 (two 32-bit tickets per chunk)");
    return;
  }
  if (c.split) {
    if (p.layout != Layout::NCHW) bad("split needs NCHW");
    if (c.cluster != 1 || c.stream || c.smem || c.team != c.threads)
      bad("split runs one CTA per chunk: cluster = 1, team = threads, no streaming or staging");
    if (int64_t{c.iters} * c.vec > 64)
      bad("iters * vec = " + std::to_string(int64_t{c.iters} * c.vec) +
          " held per thread exceeds 64");
    if (c.threads > 512)  // 64 values per thread spill under __launch_bounds__(1024)
      bad("split needs threads <= 512, not " + std::to_string(c.threads));
    if (group_norm_split_chunks(p, c) > kMaxSplitChunks)
      bad("split cuts each group into " + std::to_string(group_norm_split_chunks(p, c)) +
          " chunks of threads * iters vectors, more than " + std::to_string(kMaxSplitChunks) +
          " (every warp of the apply kernel merges them all)");
    return;
  }
  if (c.smem) {
    if (cc < 90) bad("smem staging needs sm_90 (bulk copies)");
    if (p.layout != Layout::NCHW || c.vec != full_vec || c.stream)
      bad("smem staging needs NCHW, full 16-byte vectors and no streaming");
    const int64_t share = ceil_div(group_len(p) / c.vec, c.cluster);
    if (c.held < 0 || c.held > 16 || int64_t{c.threads} * c.held >= share)
      bad("held = " + std::to_string(c.held) + " must be in [0, 16] and leave part of the " +
          std::to_string(share) + "-vector slice to shared memory");
    if (c.held > 8 && c.threads > 512)  // 4 registers per held vector, 64 per thread at 1024
      bad("held = " + std::to_string(c.held) + " needs threads <= 512, not " +
          std::to_string(c.threads));
    if (group_norm_smem_bytes(p, c) > kMaxSmemBytes)
      bad("the slice needs " + std::to_string(group_norm_smem_bytes(p, c)) +
          " bytes of shared memory, more than " + std::to_string(kMaxSmemBytes));
    return;
  }
  if (!c.stream) {
    if (int64_t{c.iters} * c.team * c.cluster * c.vec < L)
      bad("iters * team * cluster * vec = " +
          std::to_string(int64_t{c.iters} * c.team * c.cluster * c.vec) +
          " must cover a group of " + std::to_string(L) + " elements");
    if (int64_t{c.iters} * c.vec > 64)
      bad("iters * vec = " + std::to_string(int64_t{c.iters} * c.vec) +
          " held per thread exceeds 64");
  } else if (int64_t{c.iters} * c.vec > 128) {  // each streamed batch is unrolled in registers
    bad("iters * vec = " + std::to_string(int64_t{c.iters} * c.vec) +
        " elements in flight per thread exceeds 128 for a streaming config");
  }
  if (group_norm_smem_bytes(p, c) > kMaxSmemBytes)
    bad("needs " + std::to_string(group_norm_smem_bytes(p, c)) +
        " bytes of shared memory (scratch, and with smem_affine the scale and shift of every "
        "channel of its threads / team groups), more than " +
        std::to_string(kMaxSmemBytes));
}

namespace {

// Slices of 16-64 KB (smaller only when a whole group is smaller) in clusters of 1..16, with
// 8, 16 or 32 vectors per thread (the sweep on the H200 found 16 best: fewer threads wait on
// longer shared-memory loops, more pay more for the CTA reduction). 4-byte types also in slices
// of up to 256 KB, half of it held in registers (512 threads, 16 vectors each).
template <class Add>
void add_smem_candidates(const GroupNormProblem& p, int cc, bool aligned, Add&& add) {
  if (!smem_eligible(p, cc, aligned)) return;
  const int64_t nvec = group_len(p) / (16 / static_cast<int64_t>(dtype_size(p.dtype)));
  const int64_t max_share = dtype_size(p.dtype) == 4 ? 16384 : 8192;
  for (int cs = 1; cs <= max_cluster(cc); cs *= 2) {
    const int64_t share = ceil_div(nvec, cs);
    if (cs > 1 && share < 1024) break;
    if (share > max_share) continue;
    for (int per : {8, 16, 32}) {
      const int threads = static_cast<int>(std::clamp<int64_t>(round_up(share / per, 32), 64, 512));
      GroupNormConfig c = smem_config(p, cs, threads);
      if (share <= 4096 && group_norm_smem_bytes(p, c) <= kMaxSmemBytes) add(c);
      // Slices of >= 32 KB also with 4 vectors per thread held in registers; 4-byte types also
      // with 8 or 16 (slices of up to 128 KB: half in registers, half in shared memory). 16-bit
      // types spill with 8 or more (their conversions take registers), and never won a sweep.
      for (int held : {4, 8, 16}) {
        c.held = held;
        if (held > 4 && dtype_size(p.dtype) != 4) break;
        if (share >= 2048 && int64_t{threads} * held < share &&
            (share <= 4096 || int64_t{threads} * held * 2 >= share) &&
            group_norm_smem_bytes(p, c) <= kMaxSmemBytes)
          add(c);
      }
    }
  }
}

// Staged slices of 16-128 KB whose group's CTAs meet through global memory in one cooperative
// launch (no cluster), for a few large groups in a tensor the device can hold on chip at once:
// at most 8 CTAs per SM (a plan skips a grid the device cannot hold, Kernel::fits).
template <class Add>
void add_smem_coop_candidates(const GroupNormProblem& p, const Target& t, bool aligned, Add&& add) {
  if (!smem_eligible(p, t.cc, aligned) || !fits_stream_l2(p)) return;
  const int64_t sms = t.sm_count;
  const int64_t nvec = group_len(p) / (16 / static_cast<int64_t>(dtype_size(p.dtype)));
  const int64_t ngroups = p.N * p.groups;
  for (int parts = 2; parts <= kMaxSplitChunks; parts *= 2) {
    const int64_t share = ceil_div(nvec, parts);
    if (share > 8192) continue;
    if (share < 1024 || ngroups * parts > 8 * sms) break;
    for (int threads : {256, 512}) {
      GroupNormConfig c = smem_config(p, parts, threads);
      c.coop = true;
      for (int held : {0, 4, 8}) {
        if (held > 4 && dtype_size(p.dtype) != 4) break;
        c.held = held;
        if (int64_t{threads} * held < share && (held == 0 || share >= 2048) &&
            group_norm_smem_bytes(p, c) <= kMaxSmemBytes)
          add(c);
      }
    }
  }
}

}  // namespace

std::vector<GroupNormConfig> group_norm_candidates(const GroupNormProblem& p, const Target& t,
                                                   bool aligned) {
  const int cc = t.cc;
  const GroupNormConfig first = group_norm_heuristic(p, t, aligned);
  std::vector<GroupNormConfig> out{first};
  // The register-held variants below start from the heuristic's one-kernel choice, minus the
  // staging. A heuristic that needs a workspace (split, coop, pipe) has its capture fallback
  // second.
  const GroupNormConfig one_kernel =
      first.needs_workspace() ? group_norm_capture_fallback(p, t, aligned) : first;
  GroupNormConfig h = one_kernel;
  h.smem = h.split = h.coop = h.pipe = false;  // one_kernel has none: kept false explicitly
  h.held = 0;
  auto add = [&](GroupNormConfig c) {
    set_smem_affine(p, &c);
    for (const auto& o : out)
      if (o.describe() == c.describe()) return;
    out.push_back(c);
  };
  if (first.needs_workspace()) add(one_kernel);
  const int64_t nvec = group_len(p) / h.vec;
  if (h.team <= 32) {  // warp teams: other team sizes and CTA sizes
    for (int team : {1, 2, 4, 8, 16, 32}) {
      if (ceil_div(nvec, team) * h.vec > 64) continue;
      for (int threads : {64, 128, 256}) {
        GroupNormConfig c = h;
        c.team = team;
        c.threads = threads;
        c.iters = static_cast<int>(ceil_div(nvec, team));
        add(c);
      }
    }
    add_smem_candidates(p, cc, aligned, add);
    return out;
  }
  const int cmax = max_cluster(cc);
  for (int cs = 1; cs <= cmax; cs *= 2) {
    for (int max_threads : {128, 256, 512, 1024}) {
      GroupNormConfig c = h;
      c.cluster = cs;
      c.stream = false;
      if (!fit_cta(ceil_div(nvec, cs), h.vec, max_threads, 64, &c.threads, &c.iters)) continue;
      c.team = c.threads;
      add(c);
      if (!fit_cta(ceil_div(nvec, cs), h.vec, max_threads, 32, &c.threads, &c.iters)) continue;
      c.team = c.threads;
      add(c);
    }
  }
  for (int cs : {4, 8, 16}) {  // streaming, for groups no cluster holds (and as a contender)
    if (cs > cmax || nvec < int64_t{cs} * 4096) continue;
    for (const auto& [threads, iters] :
         {std::pair{512, 4}, {512, 8}, {256, 4}, {256, 8}, {256, 16}, {128, 8}, {128, 16}}) {
      GroupNormConfig c = h;
      c.cluster = cs;
      c.stream = true;
      c.threads = c.team = threads;
      c.iters = iters;
      add(c);
    }
  }
  add_smem_candidates(p, cc, aligned, add);
  add_smem_coop_candidates(p, t, aligned, add);
  // The pipelined form: chunks of 16-64 KB (fp32), at most 32 values per thread (64 registers
  // keep 4 CTAs of 256 threads on an SM).
  if (pipe_eligible(p, cc, aligned)) {
    for (int threads : {256, 512})
      for (int iters : {4, 8})
        if (iters * h.vec <= 32) add(pipe_config(p, aligned, threads, iters));
  }
  // Two kernels, or one cooperative kernel: chunks of 4-32 KB, at most kMaxSplitChunks per
  // group. A cooperative grid the device cannot hold at once is skipped by the plan (fits);
  // the barrier needs sm_70.
  if (split_eligible(p, aligned)) {
    for (bool coop : {false, true}) {
      if (coop && cc < 70) break;
      for (int threads : {256, 512})
        for (int iters : {2, 4, 8}) {
          const GroupNormConfig c = split_config(p, aligned, threads, iters, coop);
          if (iters * h.vec <= 64 && group_norm_split_chunks(p, c) <= kMaxSplitChunks) add(c);
        }
    }
  }
  return out;
}

std::vector<GroupNormConfig> group_norm_candidates(const GroupNormProblem& p, int cc,
                                                   bool aligned) {
  return group_norm_candidates(p, Target::for_cc(cc), aligned);
}

int64_t group_norm_split_chunks(const GroupNormProblem& p, const GroupNormConfig& c) {
  if (!c.split && !c.pipe) return 0;
  return ceil_div(group_len(p) / c.vec, int64_t{c.threads} * c.iters);
}

int64_t group_norm_smem_bytes(const GroupNormProblem& p, const GroupNormConfig& c) {
  if (c.split || c.pipe) return 0;  // static shared memory only
  const bool affine = p.has_weight || p.has_bias;
  const int64_t cg = p.C / p.groups;
  if (c.smem) {
    // GnSmemLayout in group_norm_smem.cuh: 512 bytes of barriers and scratch, the affine
    // parameters (128-byte rounded), then the slice.
    const int64_t share = ceil_div(group_len(p) / c.vec, c.cluster);
    return 512 + (affine ? round_up(cg * 8, 128) : 0) + (share - int64_t{c.threads} * c.held) * 16;
  }
  const int64_t teams = c.threads / c.team;
  return (128 + (affine && c.smem_affine ? teams * 2 * cg : 0)) * 4;
}

namespace {

// gn_apply's, gn_coop's and gn_pipe_fwd's template arguments, which they share up to Act.
Spec chunk_apply_spec(const char* header, const char* fn, const GroupNormProblem& p,
                      const GroupNormConfig& c) {
  Spec s(header, fn);
  s.type(p.dtype)
      .type(p.param_dtype)
      .value(p.C / p.groups)
      .value(p.S)
      .value(c.threads)
      .value(c.vec)
      .value(c.iters)
      .value(p.has_weight)
      .value(p.has_bias)
      .type(activation_policy(p.activation));
  return s;
}

}  // namespace

std::vector<Spec> group_norm_specs(const GroupNormProblem& p, const GroupNormConfig& c) {
  const bool affine = p.has_weight || p.has_bias;
  if (c.coop && !c.smem)
    return {chunk_apply_spec("kjit/group_norm_coop.cuh", "kjit::gn_coop", p, c)};
  if (c.pipe) return {chunk_apply_spec("kjit/group_norm_pipe.cuh", "kjit::gn_pipe_fwd", p, c)};
  if (c.split) {
    const bool keep = fits_stream_l2(p);
    Spec partials("kjit/group_norm_split.cuh", "kjit::gn_partials");
    partials.type(p.dtype)
        .value(group_len(p))
        .value(c.threads)
        .value(c.vec)
        .value(c.iters)
        .value(keep);
    Spec apply = chunk_apply_spec("kjit/group_norm_split.cuh", "kjit::gn_apply", p, c);
    apply.value(keep);
    return {partials, apply};
  }
  if (c.smem) {
    Spec s("kjit/group_norm_smem.cuh", c.coop ? "kjit::gn_coop_smem" : "kjit::gn_fwd_smem");
    s.type(p.dtype)
        .type(p.param_dtype)
        .value(p.C / p.groups)
        .value(p.S)
        .value(c.threads)
        .value(ceil_div(group_len(p) / c.vec, c.cluster))
        .value(c.held)
        .value(c.cluster)
        .value(p.has_weight)
        .value(p.has_bias)
        .type(activation_policy(p.activation));
    return {s};
  }
  Spec s("kjit/group_norm.cuh", "kjit::gn_fwd");
  s.type(p.dtype)
      .type(p.param_dtype)
      .value(p.layout == Layout::NHWC)
      .value(p.C / p.groups)
      .value(p.S)
      .value(c.threads)
      .value(c.team)
      .value(c.vec)
      .value(c.iters)
      .value(c.cluster)
      .value(c.stream)
      .value(p.has_weight)
      .value(p.has_bias)
      .type(activation_policy(p.activation))
      .value(affine && c.smem_affine)
      .value(c.stream && fits_stream_l2(p));
  return {s};
}

}  // namespace kjit::ops

namespace kjit::ops {

std::vector<GroupNormConfig> group_norm_configs_for(const GroupNormProblem& p, const Target& t,
                                                    const GroupNormOptions& opt, bool aligned) {
  if (opt.autotune && !opt.config) return group_norm_candidates(p, t, aligned);
  std::vector<GroupNormConfig> out{opt.config ? *opt.config : group_norm_heuristic(p, t, aligned)};
  if (out[0].needs_workspace()) out.push_back(group_norm_capture_fallback(p, t, aligned));
  return out;
}

std::vector<Spec> group_norm_specs_for(const GroupNormProblem& p, const Target& t,
                                       const GroupNormOptions& opt, bool aligned) {
  if (p.N == 0 || p.S == 0) return {};  // an empty tensor: the op launches nothing
  return op::distinct_specs(group_norm_configs_for(p, t, opt, aligned),
                            [&](const GroupNormConfig& c) { return group_norm_specs(p, c); });
}

}  // namespace kjit::ops
