// GroupNorm's kernel families (group_norm_family.hpp): one section per family, then the table.
// Pure host code: no GPU needed (kjit-precompile uses it).
#include "ops/group_norm_family.hpp"

#include <algorithm>
#include <array>
#include <climits>

#include "kjit/error.hpp"

namespace kjit::ops::gn {

int vec_width(const GroupNormProblem& p, bool aligned) {
  const int v = full_vec(p);
  if (!aligned) return 1;
  const int64_t cg = p.C / p.groups;
  if (p.layout == Layout::NCHW) return group_len(p) % v == 0 ? v : 1;
  return (cg % v == 0 && p.C % v == 0) ? v : 1;
}

// Tensors up to this size stream through L2 (60 MB on the H200, 50 MB on the H100): x stays there
// between the two reads while y goes out.
constexpr int64_t kStreamL2Bytes = int64_t{40} << 20;

bool fits_stream_l2(const GroupNormProblem& p) {
  return p.N * p.C * p.S * static_cast<int64_t>(dtype_size(p.dtype)) <= kStreamL2Bytes;
}

namespace {

// Registers per thread spent on the held slice: what fits next to the kernel's own ~40 while
// keeping two CTAs per SM (65536 registers): 64 floats up to 256 threads, 32 up to 512.
int max_held_floats(int64_t threads) {
  return threads <= 256 ? 64 : threads <= 512 ? 32 : 16;
}

constexpr int kAffineSmemBytes = 40 * 1024;

}  // namespace

// The least idle slots, then the most vectors per thread (more loads in flight, fewer warps to
// merge).
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

void set_affine_smem(const GroupNormProblem& p, GroupNormConfig* c) {
  if (c->family != GroupNormFamily::Registers && c->family != GroupNormFamily::Stream) {
    c->affine_smem = true;
    return;
  }
  const int64_t teams = c->threads / c->team;
  c->affine_smem = teams * 2 * (p.C / p.groups) * 4 <= kAffineSmemBytes;
}

GroupNormConfig staged_config(const GroupNormProblem& p, int parts, int threads, bool coop) {
  GroupNormConfig c;
  c.family = coop ? GroupNormFamily::SmemCoop : GroupNormFamily::Smem;
  c.vec = full_vec(p);
  c.cluster = parts;
  c.threads = c.team = threads;
  c.iters = static_cast<int>(ceil_div(ceil_div(group_len(p) / c.vec, parts), threads));
  return c;
}

GroupNormConfig chunk_config(GroupNormFamily f, const GroupNormProblem& p, bool aligned,
                             int threads, int iters) {
  GroupNormConfig c;
  c.family = f;
  c.vec = vec_width(p, aligned);
  c.threads = c.team = threads;
  c.iters = iters;
  c.cluster = 1;
  return c;
}

void Check::bad(const std::string& what) const {
  throw Error(Errc::InvalidArgument,
              "group_norm config: " + what + " (" + c.describe() + "; " + p.describe() + ")");
}

namespace {

bool always(const GroupNormProblem&, const Target&, bool) {
  return true;
}
int64_t no_dynamic_smem(const GroupNormProblem&, const GroupNormConfig&) {
  return 0;  // static shared memory only
}

void check_held_per_thread(const Check& k, int64_t limit) {
  const int64_t held = int64_t{k.c.iters} * k.c.vec;
  if (held > limit)
    k.bad("iters * vec = " + std::to_string(held) + " held per thread exceeds " +
          std::to_string(limit));
}

// ---- Registers and Stream: gn_fwd (group_norm.cuh) ----

// Scratch, and with affine_smem the scale and shift of every channel of the CTA's groups.
int64_t gn_fwd_smem_bytes(const GroupNormProblem& p, const GroupNormConfig& c) {
  const bool affine = p.has_weight || p.has_bias;
  const int64_t teams = c.threads / c.team;
  return (128 + (affine && c.affine_smem ? teams * 2 * (p.C / p.groups) : 0)) * 4;
}

void check_gn_fwd_smem(const Check& k) {
  const int64_t bytes = gn_fwd_smem_bytes(k.p, k.c);
  if (bytes > kMaxSmemBytes)
    k.bad("needs " + std::to_string(bytes) +
          " bytes of shared memory (scratch, and with affine_smem the scale and shift of every "
          "channel of its threads / team groups), more than " +
          std::to_string(kMaxSmemBytes));
}

std::vector<Spec> gn_fwd_specs(const GroupNormProblem& p, const GroupNormConfig& c) {
  const bool affine = p.has_weight || p.has_bias;
  const bool stream = c.family == GroupNormFamily::Stream;
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
      .value(stream)
      .value(p.has_weight)
      .value(p.has_bias)
      .type(activation_policy(p.activation))
      .value(affine && c.affine_smem)
      .value(stream && fits_stream_l2(p));
  return {s};
}

// Registers: a team (part of a warp, a CTA, or a cluster of CTAs) holds its group.
// Warp teams: other team sizes and CTA sizes. Whole-CTA teams: every cluster size, each with
// the CTA fit_cta finds for 64 and for 32 floats per thread.
void registers_candidates(const CandidateBase& b, const AddCandidate& add) {
  const GroupNormConfig& h = b.h;
  if (h.team <= 32) {
    for (int team : {1, 2, 4, 8, 16, 32}) {
      if (ceil_div(b.nvec, team) * h.vec > 64) continue;
      for (int threads : {64, 128, 256}) {
        GroupNormConfig c = h;
        c.team = team;
        c.threads = threads;
        c.iters = static_cast<int>(ceil_div(b.nvec, team));
        add(c);
      }
    }
    return;
  }
  for (int cs = 1; cs <= max_cluster(b.t.cc); cs *= 2) {
    for (int max_threads : {128, 256, 512, 1024}) {
      GroupNormConfig c = h;
      c.family = GroupNormFamily::Registers;
      c.cluster = cs;
      if (!fit_cta(ceil_div(b.nvec, cs), h.vec, max_threads, 64, &c.threads, &c.iters)) continue;
      c.team = c.threads;
      add(c);
      if (!fit_cta(ceil_div(b.nvec, cs), h.vec, max_threads, 32, &c.threads, &c.iters)) continue;
      c.team = c.threads;
      add(c);
    }
  }
}

void check_registers(const Check& k) {
  const GroupNormConfig& c = k.c;
  const int64_t L = group_len(k.p);
  if (int64_t{c.iters} * c.team * c.cluster * c.vec < L)
    k.bad("iters * team * cluster * vec = " +
          std::to_string(int64_t{c.iters} * c.team * c.cluster * c.vec) +
          " must cover a group of " + std::to_string(L) + " elements");
  check_held_per_thread(k, 64);
  check_gn_fwd_smem(k);
}

// Stream: groups too large to hold on chip, read twice (the second read from L2 when the tensor
// fits there). Candidates for groups no cluster holds, and as contenders.
void stream_candidates(const CandidateBase& b, const AddCandidate& add) {
  for (int cs : {4, 8, 16}) {
    if (cs > max_cluster(b.t.cc) || b.nvec < int64_t{cs} * 4096) continue;
    for (const auto& [threads, iters] :
         {std::pair{512, 4}, {512, 8}, {256, 4}, {256, 8}, {256, 16}, {128, 8}, {128, 16}}) {
      GroupNormConfig c = b.h;
      c.family = GroupNormFamily::Stream;
      c.cluster = cs;
      c.threads = c.team = threads;
      c.iters = iters;
      add(c);
    }
  }
}

void check_stream(const Check& k) {
  const int64_t in_flight = int64_t{k.c.iters} * k.c.vec;
  if (in_flight > 128)  // each streamed batch is unrolled in registers
    k.bad("iters * vec = " + std::to_string(in_flight) +
          " elements in flight per thread exceeds 128 for a streaming config");
  check_gn_fwd_smem(k);
}

// ---- Smem and SmemCoop: gn_fwd_smem and gn_coop_smem (group_norm_smem.cuh) ----

// Bulk copies (sm_90) of whole 16-byte vectors from NCHW groups.
bool staged_eligible(const GroupNormProblem& p, const Target& t, bool aligned) {
  return t.cc >= 90 && p.layout == Layout::NCHW && vec_width(p, aligned) == full_vec(p);
}
// Cooperative: only for tensors the device can hold on chip at once.
bool staged_coop_eligible(const GroupNormProblem& p, const Target& t, bool aligned) {
  return staged_eligible(p, t, aligned) && fits_stream_l2(p);
}

// GnSmemLayout in group_norm_smem.cuh: 512 bytes of barriers and scratch, the affine parameters
// (128-byte rounded), then the slice less its held part.
int64_t staged_smem_bytes(const GroupNormProblem& p, const GroupNormConfig& c) {
  const bool affine = p.has_weight || p.has_bias;
  const int64_t share = ceil_div(group_len(p) / c.vec, c.cluster);
  return 512 + (affine ? round_up(p.C / p.groups * 8, 128) : 0) +
         (share - int64_t{c.threads} * c.held) * 16;
}

void check_staged(const Check& k) {
  const GroupNormConfig& c = k.c;
  if (k.cc < 90) k.bad("smem staging needs sm_90 (bulk copies)");
  if (k.p.layout != Layout::NCHW || c.vec != full_vec(k.p))
    k.bad("smem staging needs NCHW and full 16-byte vectors");
  const int64_t share = ceil_div(group_len(k.p) / c.vec, c.cluster);
  // The kernel takes the slice's vectors per thread from the problem, not from iters: any other
  // value would be a word that changes nothing (staged_config writes this one).
  if (c.iters != ceil_div(share, c.threads))
    k.bad("iters = " + std::to_string(c.iters) + " must be the slice's vectors per thread, " +
          "ceil(" + std::to_string(share) + " / threads) = " +
          std::to_string(ceil_div(share, c.threads)) + " (a staged kernel derives it)");
  if (c.held < 0 || c.held > 16 || int64_t{c.threads} * c.held >= share)
    k.bad("held = " + std::to_string(c.held) + " must be in [0, 16] and leave part of the " +
          std::to_string(share) + "-vector slice to shared memory");
  if (c.held > 8 && c.threads > 512)  // 4 registers per held vector, 64 per thread at 1024
    k.bad("held = " + std::to_string(c.held) + " needs threads <= 512, not " +
          std::to_string(c.threads));
  if (staged_smem_bytes(k.p, c) > kMaxSmemBytes)
    k.bad("the slice needs " + std::to_string(staged_smem_bytes(k.p, c)) +
          " bytes of shared memory, more than " + std::to_string(kMaxSmemBytes));
}

// The group's CTAs meet at a barrier in global memory (acquire/release atomics).
void check_staged_coop(const Check& k) {
  if (k.c.cluster < 2)
    k.bad("coop with smem staging needs cluster >= 2 CTAs per group to meet, not " +
          std::to_string(k.c.cluster));
  if (k.cc < 70) k.bad("coop needs sm_70 (acquire/release atomics)");
  check_staged(k);
}

// Slices of 16-64 KB (smaller only when a whole group is smaller) in clusters of 1..16, with
// 8, 16 or 32 vectors per thread (the sweep on the H200 found 16 best: fewer threads wait on
// longer shared-memory loops, more pay more for the CTA reduction). 4-byte types also in slices
// of up to 256 KB, half of it held in registers (512 threads, 16 vectors each).
void staged_candidates(const CandidateBase& b, const AddCandidate& add) {
  const GroupNormProblem& p = b.p;
  const int64_t nvec = group_len(p) / full_vec(p);
  const int64_t max_share = dtype_size(p.dtype) == 4 ? 16384 : 8192;
  for (int cs = 1; cs <= max_cluster(b.t.cc); cs *= 2) {
    const int64_t share = ceil_div(nvec, cs);
    if (cs > 1 && share < 1024) break;
    if (share > max_share) continue;
    for (int per : {8, 16, 32}) {
      const int threads = static_cast<int>(std::clamp<int64_t>(round_up(share / per, 32), 64, 512));
      GroupNormConfig c = staged_config(p, cs, threads);
      if (share <= 4096 && staged_smem_bytes(p, c) <= kMaxSmemBytes) add(c);
      // Slices of >= 32 KB also with 4 vectors per thread held in registers; 4-byte types also
      // with 8 or 16 (slices of up to 128 KB: half in registers, half in shared memory). 16-bit
      // types spill with 8 or more (their conversions take registers), and never won a sweep.
      for (int held : {4, 8, 16}) {
        c.held = held;
        if (held > 4 && dtype_size(p.dtype) != 4) break;
        if (share >= 2048 && int64_t{threads} * held < share &&
            (share <= 4096 || int64_t{threads} * held * 2 >= share) &&
            staged_smem_bytes(p, c) <= kMaxSmemBytes)
          add(c);
      }
    }
  }
}

// Staged slices of 16-128 KB whose group's CTAs meet through global memory in one cooperative
// launch (no cluster), for a few large groups: at most 8 CTAs per SM (a plan skips a grid the
// device cannot hold, Kernel::fits).
void staged_coop_candidates(const CandidateBase& b, const AddCandidate& add) {
  const GroupNormProblem& p = b.p;
  const int64_t nvec = group_len(p) / full_vec(p);
  const int64_t num_groups = p.N * p.groups;
  for (int parts = 2; parts <= kMaxSplitChunks; parts *= 2) {
    const int64_t share = ceil_div(nvec, parts);
    if (share > 8192) continue;
    if (share < 1024 || num_groups * parts > 8 * int64_t{b.t.sm_count}) break;
    for (int threads : {256, 512}) {
      GroupNormConfig c = staged_config(p, parts, threads, true);
      for (int held : {0, 4, 8}) {
        if (held > 4 && dtype_size(p.dtype) != 4) break;
        c.held = held;
        if (int64_t{threads} * held < share && (held == 0 || share >= 2048) &&
            staged_smem_bytes(p, c) <= kMaxSmemBytes)
          add(c);
      }
    }
  }
}

std::vector<Spec> staged_specs(const GroupNormProblem& p, const GroupNormConfig& c) {
  const bool coop = c.family == GroupNormFamily::SmemCoop;
  Spec s("kjit/group_norm_smem.cuh", coop ? "kjit::gn_coop_smem" : "kjit::gn_fwd_smem");
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

// ---- Pipe, Split and SplitCoop: one CTA per chunk of threads * iters vectors (NCHW) ----

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

// Pipe (group_norm_pipe.cuh): sm_70 (acquire/release atomics), groups of >= 32768 vectors (the
// only ones it could help), and ticket numbers within 32 bits even for the smallest chunks.
bool pipe_eligible(const GroupNormProblem& p, const Target& t, bool aligned) {
  const int64_t nvec = group_len(p) / vec_width(p, aligned);
  return t.cc >= 70 && p.layout == Layout::NCHW && nvec >= 32768 &&
         p.N * p.groups * ceil_div(nvec, 1024) <= kMaxPipeChunks;
}

void check_pipe(const Check& k) {
  const GroupNormConfig& c = k.c;
  if (k.cc < 70) k.bad("pipe needs sm_70 (acquire/release atomics)");
  if (k.p.layout != Layout::NCHW) k.bad("pipe needs NCHW");
  if (c.cluster != 1 || c.team != c.threads)
    k.bad(
        "pipe takes chunks of threads * iters vectors a CTA at a time: cluster = 1, team = "
        "threads");
  check_held_per_thread(k, 64);
  if (c.threads > 512) k.bad("pipe needs threads <= 512, not " + std::to_string(c.threads));
  const int64_t chunks = k.p.N * k.p.groups * group_norm_split_chunks(k.p, c);
  if (chunks > kMaxPipeChunks)
    k.bad("pipe cuts the tensor into " + std::to_string(chunks) +
          " chunks of threads * iters vectors, more than 2^30 (two 32-bit tickets per chunk)");
}

// Chunks of 16-64 KB (fp32), at most 32 values per thread (64 registers keep 4 CTAs of 256
// threads on an SM).
void pipe_candidates(const CandidateBase& b, const AddCandidate& add) {
  for (int threads : {256, 512})
    for (int iters : {4, 8})
      if (iters * b.h.vec <= 32)
        add(chunk_config(GroupNormFamily::Pipe, b.p, b.aligned, threads, iters));
}

std::vector<Spec> pipe_specs(const GroupNormProblem& p, const GroupNormConfig& c) {
  return {chunk_apply_spec("kjit/group_norm_pipe.cuh", "kjit::gn_pipe_fwd", p, c)};
}

// Split (group_norm_split.cuh): groups of >= 4096 vectors (smaller ones gain nothing from a
// second kernel's launch) in a tensor L2 keeps between the two reads.
bool split_eligible(const GroupNormProblem& p, const Target&, bool aligned) {
  return p.layout == Layout::NCHW && group_len(p) / vec_width(p, aligned) >= 4096 &&
         fits_stream_l2(p);
}
// SplitCoop (group_norm_coop.cuh): the same chunks, meeting at a barrier (sm_70).
bool split_coop_eligible(const GroupNormProblem& p, const Target& t, bool aligned) {
  return split_eligible(p, t, aligned) && t.cc >= 70;
}

void check_split(const Check& k) {
  const GroupNormConfig& c = k.c;
  if (k.p.layout != Layout::NCHW) k.bad("split needs NCHW");
  if (c.cluster != 1 || c.team != c.threads)
    k.bad("split runs one CTA per chunk: cluster = 1, team = threads");
  check_held_per_thread(k, 64);
  if (c.threads > 512)  // 64 values per thread spill under __launch_bounds__(1024)
    k.bad("split needs threads <= 512, not " + std::to_string(c.threads));
  const int64_t chunks = group_norm_split_chunks(k.p, c);
  if (chunks > kMaxSplitChunks)
    k.bad("split cuts each group into " + std::to_string(chunks) +
          " chunks of threads * iters vectors, more than " + std::to_string(kMaxSplitChunks) +
          " (every warp of the apply kernel merges them all)");
}

void check_split_coop(const Check& k) {
  if (k.cc < 70) k.bad("coop needs sm_70 (acquire/release atomics)");
  check_split(k);
}

// Chunks of 4-32 KB, at most kMaxSplitChunks per group. A cooperative grid the device cannot
// hold at once is skipped by the plan (fits).
template <GroupNormFamily F>
void split_candidates(const CandidateBase& b, const AddCandidate& add) {
  for (int threads : {256, 512})
    for (int iters : {2, 4, 8}) {
      const GroupNormConfig c = chunk_config(F, b.p, b.aligned, threads, iters);
      if (iters * b.h.vec <= 64 && group_norm_split_chunks(b.p, c) <= kMaxSplitChunks) add(c);
    }
}

// gn_partials writes each chunk's statistics, then gn_apply (the same launch) writes y.
std::vector<Spec> split_specs(const GroupNormProblem& p, const GroupNormConfig& c) {
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

std::vector<Spec> split_coop_specs(const GroupNormProblem& p, const GroupNormConfig& c) {
  return {chunk_apply_spec("kjit/group_norm_coop.cuh", "kjit::gn_coop", p, c)};
}

using F = GroupNormFamily;

// In the order their candidates are listed.
constexpr std::array<FamilyRow, kFamilies> kRows = {{
    {F::Registers, "Registers", "", "", kWarpTeams, 0, always, registers_candidates,
     check_registers, gn_fwd_smem_bytes, gn_fwd_specs},
    {F::Stream, "Stream", " stream", "", kCtaTeam, 0, always, stream_candidates, check_stream,
     gn_fwd_smem_bytes, gn_fwd_specs},
    {F::Smem, "Smem", " smem", "", kStaged | kCtaTeam | kWarpTeams, 0, staged_eligible,
     staged_candidates, check_staged, staged_smem_bytes, staged_specs},
    {F::SmemCoop, "SmemCoop", " smem", " coop", kWorkspace | kCooperative | kStaged | kCtaTeam,
     kMaxSplitChunks, staged_coop_eligible, staged_coop_candidates, check_staged_coop,
     staged_smem_bytes, staged_specs},
    {F::Pipe, "Pipe", "", " pipe", kWorkspace | kChunked, 0, pipe_eligible, pipe_candidates,
     check_pipe, no_dynamic_smem, pipe_specs},
    {F::Split, "Split", "", " split", kWorkspace | kChunked, 0, split_eligible,
     split_candidates<F::Split>, check_split, no_dynamic_smem, split_specs},
    {F::SplitCoop, "SplitCoop", "", " split coop", kWorkspace | kCooperative | kChunked, 0,
     split_coop_eligible, split_candidates<F::SplitCoop>, check_split_coop, no_dynamic_smem,
     split_coop_specs},
}};

}  // namespace

const std::array<FamilyRow, kFamilies>& families() {
  return kRows;
}

const FamilyRow* family(GroupNormFamily f) {
  for (const FamilyRow& r : families())
    if (r.family == f) return &r;
  return nullptr;
}

std::string unknown_family(GroupNormFamily f) {
  std::string names;
  for (size_t i = 0; i < kRows.size(); ++i)
    names += (i == 0 ? "" : i + 1 == kRows.size() ? " or " : ", ") + std::string(kRows[i].name);
  return "family = " + std::to_string(static_cast<int>(f)) + " must be " + names;
}

const FamilyRow& row(const GroupNormConfig& c) {
  if (const FamilyRow* r = family(c.family)) return *r;
  throw Error::invalid("config", "group_norm config: " + unknown_family(c.family));
}

}  // namespace kjit::ops::gn
