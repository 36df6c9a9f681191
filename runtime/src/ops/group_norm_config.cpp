// GroupNorm: problem validation, the config heuristic, autotune candidates and the
// specialization a config compiles to. Pure host code: no GPU needed (kjit-precompile uses it).
#include <algorithm>
#include <climits>

#include "kjit/error.hpp"
#include "kjit/ops/group_norm.hpp"

namespace kjit::ops {
namespace {

// Registers per thread spent on the held slice: what fits next to the kernel's own ~40 while
// keeping two CTAs per SM (65536 registers): 64 floats up to 256 threads, 32 up to 512.
int max_held_floats(int64_t threads) {
  return threads <= 256 ? 64 : threads <= 512 ? 32 : 16;
}
constexpr int kSmemAffineBytes = 40 * 1024;
constexpr int64_t kSms =
    132;  // an H100/H200; the heuristic must not depend on the device it runs on

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
  const int64_t teams = c->threads / c->team;
  c->smem_affine = teams * 2 * (p.C / p.groups) * 4 <= kSmemAffineBytes;
}

}  // namespace

void validate(const GroupNormProblem& p) {
  auto bad = [&](const std::string& what) {
    throw Error(Errc::InvalidArgument, "group_norm: " + what + " (" + p.describe() + ")");
  };
  if (p.N < 0) bad("N = " + std::to_string(p.N) + " must be >= 0");
  if (p.S < 0) bad("spatial size S = " + std::to_string(p.S) + " must be >= 0");
  if (p.C <= 0) bad("C = " + std::to_string(p.C) + " must be > 0");
  if (p.groups <= 0) bad("groups = " + std::to_string(p.groups) + " must be > 0");
  if (p.C % p.groups != 0)
    bad("C = " + std::to_string(p.C) +
        " must be divisible by groups = " + std::to_string(p.groups));
  if (p.groups > INT_MAX) bad("groups = " + std::to_string(p.groups) + " exceeds 2^31-1");
  if (p.S > 0 && p.C / p.groups > INT64_MAX / p.S) bad("C/G * S overflows 64 bits");
  if (p.S > 0 && group_len(p) > (int64_t{1} << 31) - 64)
    bad("a group of " + std::to_string(group_len(p)) +
        " elements (C/G * S) exceeds the supported 2^31-64");
  if (p.N > 0 && p.S > 0 && p.C > INT64_MAX / p.S / p.N) bad("N * C * S overflows 64 bits");
}

std::string GroupNormProblem::describe() const {
  return std::string(dtype_name(dtype)) + (layout == Layout::NHWC ? " NHWC" : " NCHW") +
         " N=" + std::to_string(N) + " C=" + std::to_string(C) + " S=" + std::to_string(S) +
         " G=" + std::to_string(groups) + (activation == Activation::SiLU ? " silu" : "") +
         (has_weight ? " w" : "") + (has_bias ? " b" : "");
}

std::string GroupNormConfig::describe() const {
  return "threads=" + std::to_string(threads) + " team=" + std::to_string(team) +
         " vec=" + std::to_string(vec) + " iters=" + std::to_string(iters) +
         " cluster=" + std::to_string(cluster) + (stream ? " stream" : "") +
         (smem_affine ? "" : " gmem-affine");
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

GroupNormConfig group_norm_heuristic(const GroupNormProblem& p, int cc, bool aligned) {
  validate(p);
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
  // Spread few large groups (>= 4096 vectors) over clusters while the grid is under ~2 CTAs per
  // SM and every CTA keeps >= 1024 vectors. Smaller groups lose more to the cluster exchange
  // (~1 us) than they gain (H200: 2x1280x16x16 5.8 us alone vs 8.1 us in pairs).
  const int cmax = max_cluster(cc);
  int cs = 1;
  while (cs < cmax && nvec >= 4096 && ngroups * cs < 2 * kSms && nvec / (2 * cs) >= 1024) cs *= 2;
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

std::vector<GroupNormConfig> group_norm_candidates(const GroupNormProblem& p, int cc,
                                                   bool aligned) {
  GroupNormConfig h = group_norm_heuristic(p, cc, aligned);
  std::vector<GroupNormConfig> out{h};
  auto add = [&](GroupNormConfig c) {
    set_smem_affine(p, &c);
    for (const auto& o : out)
      if (o.describe() == c.describe()) return;
    out.push_back(c);
  };
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
    GroupNormConfig c = h;
    c.cluster = cs;
    c.stream = true;
    c.threads = c.team = 512;
    c.iters = 4;
    add(c);
  }
  return out;
}

Spec group_norm_spec(const GroupNormProblem& p, const GroupNormConfig& c) {
  const bool affine = p.has_weight || p.has_bias;
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
      .value(p.activation == Activation::SiLU)
      .value(affine && c.smem_affine);
  return s;
}

}  // namespace kjit::ops
