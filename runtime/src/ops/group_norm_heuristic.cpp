// GroupNorm's choice of config: the heuristic as an ordered table of rules (the first rule that
// applies and whose config fits decides), the capture fallback (the same table without the
// families that need a workspace), and the candidates autotuning times (each family's own).
// Pure host code: no GPU needed (kjit-precompile uses it).
#include <algorithm>
#include <optional>

#include "kjit/error.hpp"
#include "kjit/op/target.hpp"
#include "kjit/ops/group_norm.hpp"
#include "ops/group_norm_family.hpp"

namespace kjit::ops {
namespace {

using F = GroupNormFamily;
using gn::ceil_div;
using gn::kMaxSmemBytes;
using gn::kMaxSplitChunks;

// The problem as the rules see it.
struct Situation {
  const GroupNormProblem& p;
  const Target& t;
  bool aligned;
  int cc;
  int64_t sms;         // spreading work: a grid of about this many CTAs fills the device
  int vec;             // the vector width p allows (gn::vec_width)
  int64_t nvec;        // vectors per group
  int64_t num_groups;  // N * G, at least 1
  bool f32;            // 4-byte elements
  bool staged;         // the Smem family can serve p (sm_90, NCHW, 16-byte vectors)
  bool l2;             // the tensor fits what streaming keeps in L2 between its two reads
  bool eligible(F f) const { return gn::family(f)->eligible(p, t, aligned); }
};

Situation situation(const GroupNormProblem& p, const Target& t, bool aligned) {
  const int vec = gn::vec_width(p, aligned);
  return Situation{p,
                   t,
                   aligned,
                   t.cc,
                   t.sm_count,
                   vec,
                   gn::group_len(p) / vec,
                   std::max<int64_t>(1, p.N * p.groups),
                   dtype_size(p.dtype) == 4,
                   gn::family(F::Smem)->eligible(p, t, aligned),
                   gn::fits_stream_l2(p)};
}

using Pick = std::optional<GroupNormConfig>;

// A row of the heuristic: when it applies, the config of its family it picks (none when that
// config does not fit; the next row decides then).
struct Rule {
  F family;
  bool (*applies)(const Situation& s);
  Pick (*pick)(const Situation& s);
};

GroupNormConfig make_config(F family, int vec, int cluster, int threads, int team, int iters) {
  GroupNormConfig c;
  c.family = family;
  c.vec = vec;
  c.cluster = cluster;
  c.threads = threads;
  c.team = team;
  c.iters = iters;
  return c;
}

// Measurements behind each row: H200 (132 SMs), device time; docs/PERF.md has the sweeps.
const Rule kRules[] = {
    // Small groups: one warp per group (several per CTA when tiny), no barriers at all. This beat
    // whole-CTA teams for every group a warp can hold (e.g. 128x256x14x14: 16 us vs 26 us).
    {F::Registers, [](const Situation& s) { return s.nvec <= int64_t{32} * (64 / s.vec); },
     [](const Situation& s) -> Pick {
       const int team = s.nvec <= 16 ? gn::pow2_ceil(s.nvec) : 32;
       return make_config(F::Registers, s.vec, 1, s.nvec <= 128 ? 128 : 32, team,
                          static_cast<int>(ceil_div(s.nvec, team)));
     }},
    // At most 16 groups of >= 32768 16-byte vectors (512 KB, up to 64 chunks) in a tensor L2
    // holds: two kernels, chunks of 32 KB per CTA, or 16 KB where 32 KB chunks would leave SMs
    // without one. 1x64x256x256/G16 bf16 10.7 us vs 12.6 staged, f32 15.1 vs 16.6;
    // 1x32x256x256/G8 bf16 7.3 us in 256 chunks of 16 KB vs 8.2 in 128 of 32 KB. The
    // cooperative kernel saves the second launch's host time (~3 us) but took 1-22% more device
    // time on these four. At 64 groups staging is faster (2x128x256x256 bf16 32.5 vs 29.8).
    {F::Split,
     [](const Situation& s) {
       return s.staged && s.nvec >= 32768 && s.num_groups * 8 <= s.sms && s.eligible(F::Split);
     },
     [](const Situation& s) -> Pick {
       GroupNormConfig c = gn::chunk_config(F::Split, s.p, s.aligned, 256, 8);
       if (!s.f32 && s.num_groups * group_norm_split_chunks(s.p, c) < s.sms) c.iters = 4;
       if (group_norm_split_chunks(s.p, c) > kMaxSplitChunks) return std::nullopt;
       return c;
     }},
    // 17-33 such groups of 16-bit values, at most 4 chunks of 32 KB per SM: one cooperative
    // kernel (a plan falls back to the next candidate on a device that cannot hold the grid at
    // once). 1x128x256x256 bf16 16.0 us vs 17.4 streamed; the pair took 15.8, with two launches.
    {F::SplitCoop,
     [](const Situation& s) {
       return s.staged && !s.f32 && s.nvec >= 32768 && s.num_groups * 8 > s.sms &&
              s.num_groups * 8 <= 2 * s.sms && s.eligible(F::SplitCoop);
     },
     [](const Situation& s) -> Pick {
       const GroupNormConfig c = gn::chunk_config(F::SplitCoop, s.p, s.aligned, 256, 8);
       const int64_t chunks = group_norm_split_chunks(s.p, c);
       if (chunks > kMaxSplitChunks || s.num_groups * chunks > 4 * s.sms) return std::nullopt;
       return c;
     }},
    // 17-33 fp32 groups of 512 KB-1 MB: 8 staged slices of 64-128 KB per group (512 threads
    // holding 8 vectors each, the rest in shared memory, 2 CTAs per SM) whose CTAs meet through
    // global memory in one cooperative launch: one read of x. Larger groups would need 16
    // slices, more than the SMs hold at 2 each for 17 groups. 1x128x256x256 f32 25.0 us vs 28.6
    // streamed and 26.6 for the two-kernel pair; 1x128x232x232 21.2 vs 24.3 streamed;
    // 1x128x200x200 (625 KB groups) 17.1 vs 20.0; at 400 KB (1x128x160x160) staging in 16-CTA
    // clusters stays faster (13.6 vs 13.9). 16-bit types keep the kernel below (bf16 16.6
    // staged vs 16.4).
    {F::SmemCoop,
     [](const Situation& s) {
       return s.staged && s.f32 && s.nvec > 32768 && s.nvec <= 65536 && s.num_groups * 8 > s.sms &&
              s.num_groups * 8 <= 2 * s.sms;
     },
     [](const Situation& s) -> Pick {
       GroupNormConfig c = gn::staged_config(s.p, 8, 512, true);
       c.held = 8;
       if (group_norm_smem_bytes(s.p, c) > kMaxSmemBytes) return std::nullopt;
       return c;
     }},
    // 17-33 such groups: streamed in 8-CTA clusters, two reads of x with the second served from
    // L2 (the first asks L2 to keep x, y is stored evict-first). 256 CTAs load more at once than
    // 3 staged 64 KB slices per SM. 1x128x256x256 f32 29.1 us vs 34.8 staged, bf16 19.3 vs 20.6;
    // at 64 groups (2x128x256x256 f32) staging is as fast (55.7 vs 55.5), so it keeps staging.
    {F::Stream,
     [](const Situation& s) {
       return s.staged && s.nvec >= 32768 && s.num_groups * 8 > s.sms &&
              s.num_groups * 8 <= 2 * s.sms && s.l2;
     },
     [](const Situation& s) -> Pick {
       const int iters = static_cast<int>(std::clamp<int64_t>(s.nvec / 8 / 256 / 4, 4, 8));
       return make_config(F::Stream, s.vec, 8, 256, 256, iters);
     }},
    // fp32 groups of more than 2 MB in a tensor L2 cannot hold: one pipelined launch, chunks of
    // 64 KB (512 threads holding 8 vectors each, 2 CTAs per SM). kjit-bench --sweep:
    // 1x128x512x512/G32 92.8 against 95.0 in 32 KB chunks and 107.2 staged in 16-CTA clusters
    // (torch.compile 105.7); 1x64x1024x1024/G32 180.3 against 204.8 and 214.7 streamed;
    // 1x128x1024x1024/G32 390.0 against 440.1 and 420.5 streamed. At 2 MB (1x256x256x256) 50.2
    // against 49.7 staged: staging keeps those. bf16 gained nothing (1x128x512x512: 62.5 vs 63.8).
    {F::Pipe,
     [](const Situation& s) {
       return s.cc >= 90 && s.f32 && s.nvec > 131072 && s.vec == 4 && !s.l2 && s.eligible(F::Pipe);
     },
     [](const Situation& s) -> Pick { return gn::chunk_config(F::Pipe, s.p, s.aligned, 512, 8); }},
    // 4-byte types in 512-thread CTAs that hold 8 (slices of 64-128 KB) or 16 (128-256 KB)
    // vectors per thread in registers and stage the rest in shared memory: groups of 8192-16384
    // vectors (128-256 KB) in pairs, groups of 1-4 MB in 16-CTA clusters (17-33 of these in a
    // tensor L2 keeps stream instead, above). 16x512x64x64 f32 77.4 us vs 79.0 for 8-CTA
    // clusters, 2x320x64x64 f32 10.9 vs 11.8; 1x256x256x256/G32 f32 50.6 vs 57.2 for the best
    // streaming config (torch.compile 56.7), 1x128x512x512/G32 f32 108.3 vs 111.8 (now
    // pipelined, above; this is its capture fallback).
    {F::Smem,
     [](const Situation& s) {
       const bool pair = s.nvec > 8192 && s.nvec <= 16384;
       return s.staged && s.f32 && (pair || (s.nvec > 65536 && s.nvec <= 262144));
     },
     [](const Situation& s) -> Pick {
       const bool pair = s.nvec > 8192 && s.nvec <= 16384;
       GroupNormConfig c = gn::staged_config(s.p, pair ? 2 : 16, 512);
       c.held = ceil_div(s.nvec, c.cluster) <= 8192 ? 8 : 16;
       if (group_norm_smem_bytes(s.p, c) > kMaxSmemBytes) return std::nullopt;
       return c;
     }},
    // Groups of >= 64 KB of vectors on sm_90: staged in shared memory by bulk copies, in slices
    // of ~32 KB (clusters up to 16) with 16 vectors per thread; groups of 64-128 KB in pairs of
    // CTAs with 8 per thread. 16x512x64x64 f32 85 us vs 102 us held in registers, bf16 47 vs
    // 72; 1x128x256x256 f32 36 vs 45, bf16 20 vs 36; 2x320x64x64 bf16 9.3 vs 10.5. Slices of
    // >= 32 KB in clusters below 16 hold 4 vectors per thread in registers: more CTAs per SM
    // (16x512x64x64 f32 80 us vs 84, bf16 51 vs 54); no gain at 16 (1x128x256x256).
    {F::Smem, [](const Situation& s) { return s.staged && s.nvec >= 4096; },
     [](const Situation& s) -> Pick {
       const int cs = s.nvec >= 8192
                          ? static_cast<int>(std::min<int64_t>(
                                gn::max_cluster(s.cc), gn::pow2_ceil(ceil_div(s.nvec, 2048))))
                          : 2;
       const int64_t share = ceil_div(s.nvec, cs);
       const int per = s.nvec >= 8192 ? 16 : 8;
       GroupNormConfig c = gn::staged_config(
           s.p, cs, static_cast<int>(std::clamp<int64_t>(gn::round_up(share / per, 32), 64, 512)));
       if (share >= 2048 && cs < 16 && int64_t{c.threads} * 4 < share) c.held = 4;
       if (share > 4096 || group_norm_smem_bytes(s.p, c) > kMaxSmemBytes) return std::nullopt;
       return c;
     }},
    // Held in registers: few large groups (>= 4096 vectors) spread over clusters while the grid
    // is under ~2 CTAs per SM and every CTA keeps >= 1024 vectors (smaller groups lose more to
    // the cluster exchange, ~1 us, than they gain: 2x1280x16x16 5.8 us alone vs 8.1 us in
    // pairs), then the cluster grows until the group fits: 32 floats per thread in CTAs of up to
    // 512 threads first (more warps beat deeper per-thread queues), then 64 in up to 256.
    {F::Registers, [](const Situation&) { return true; },
     [](const Situation& s) -> Pick {
       const int cmax = gn::max_cluster(s.cc);
       int cs = 1;
       while (cs < cmax && s.nvec >= 4096 && s.num_groups * cs < 2 * s.sms &&
              s.nvec / (2 * cs) >= 1024)
         cs *= 2;
       for (;; cs *= 2) {
         GroupNormConfig c = make_config(F::Registers, s.vec, cs, 256, 256, 4);
         const int64_t m = ceil_div(s.nvec, cs);
         if (gn::fit_cta(m, c.vec, 512, 32, &c.threads, &c.iters) ||
             gn::fit_cta(m, c.vec, 256, 64, &c.threads, &c.iters)) {
           c.team = c.threads;
           return c;
         }
         if (cs >= cmax) return std::nullopt;
       }
     }},
    // Groups no cluster's registers hold: streamed by the largest cluster.
    {F::Stream, [](const Situation&) { return true; },
     [](const Situation& s) -> Pick {
       return make_config(F::Stream, s.vec, gn::max_cluster(s.cc), 512, 512, 4);
     }},
};

// The first row that applies and picks a config; rows of families that need a workspace only
// when `workspace` (not for the capture fallback).
GroupNormConfig choose(const GroupNormProblem& p, const Target& t, bool aligned, bool workspace) {
  validate(p);
  const Situation s = situation(p, t, aligned);
  for (const Rule& r : kRules) {
    if (!workspace && gn::family(r.family)->has(gn::kWorkspace)) continue;
    if (!r.applies(s)) continue;
    if (Pick c = r.pick(s)) {
      gn::set_affine_smem(p, &*c);
      return *c;
    }
  }
  throw Error(Errc::InvalidArgument, "group_norm: no rule picks a config for " + p.describe());
}

}  // namespace

GroupNormConfig group_norm_heuristic(const GroupNormProblem& p, const Target& t, bool aligned) {
  return choose(p, t, aligned, true);
}

GroupNormConfig group_norm_capture_fallback(const GroupNormProblem& p, const Target& t,
                                            bool aligned) {
  return choose(p, t, aligned, false);
}

GroupNormConfig group_norm_heuristic(const GroupNormProblem& p, int cc, bool aligned) {
  return group_norm_heuristic(p, Target::for_cc(cc), aligned);
}

GroupNormConfig group_norm_capture_fallback(const GroupNormProblem& p, int cc, bool aligned) {
  return group_norm_capture_fallback(p, Target::for_cc(cc), aligned);
}

// The heuristic's config first, then (when it needs a workspace) its capture fallback, then what
// each family offers, in the families' order, each config once. The register-held variants start
// from the heuristic's one-kernel config minus the staging; where that holds groups in warp teams
// (small groups) only the families with kWarpTeams offer any.
std::vector<GroupNormConfig> group_norm_candidates(const GroupNormProblem& p, const Target& t,
                                                   bool aligned) {
  const GroupNormConfig first = group_norm_heuristic(p, t, aligned);
  std::vector<GroupNormConfig> out{first};
  const GroupNormConfig one_kernel =
      first.needs_workspace() ? group_norm_capture_fallback(p, t, aligned) : first;
  GroupNormConfig h = one_kernel;
  h.family = one_kernel.family == F::Stream ? F::Stream : F::Registers;
  h.held = 0;
  const gn::AddCandidate add = [&](GroupNormConfig c) {
    gn::set_affine_smem(p, &c);
    for (const auto& o : out)
      if (o.describe() == c.describe()) return;
    out.push_back(c);
  };
  if (first.needs_workspace()) add(one_kernel);
  const gn::CandidateBase base{p, t, aligned, h, gn::group_len(p) / h.vec};
  const bool warp_teams = h.team <= 32;
  for (const gn::FamilyRow& f : gn::families())
    if ((f.has(gn::kWarpTeams) || !warp_teams) && f.eligible(p, t, aligned))
      f.candidates(base, add);
  return out;
}

std::vector<GroupNormConfig> group_norm_candidates(const GroupNormProblem& p, int cc,
                                                   bool aligned) {
  return group_norm_candidates(p, Target::for_cc(cc), aligned);
}

}  // namespace kjit::ops
