// GroupNorm's kernel families as one table (group_norm_family.cpp): for each family what it can
// serve, the candidates it offers, the rules its numbers keep, its shared memory and the kernels
// it compiles to. Validation, the heuristic and the candidates look a config's family up here
// instead of testing combinations of switches. Pure host code.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kjit/dtype.hpp"
#include "kjit/op/target.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/spec.hpp"

namespace kjit::ops::gn {

// Shared memory one block may use on sm_90 (227 KB); every config stays within it.
constexpr int64_t kMaxSmemBytes = 227 * 1024;
// Every warp of gn_apply (and of the cooperative kernels) merges all of its group's partials:
// bounded, so that the merge stays a few loads per lane (at 64 chunks, 1/4 of a 16 KB chunk's
// bytes again in L2 reads).
constexpr int64_t kMaxSplitChunks = 64;
// Pipe: ticket numbers (two per chunk) within 32 bits.
constexpr int64_t kMaxPipeChunks = int64_t{1} << 30;

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
inline int64_t round_up(int64_t a, int64_t b) {
  return ceil_div(a, b) * b;
}
inline int pow2_ceil(int64_t v) {
  int p = 1;
  while (p < v) p <<= 1;
  return p;
}

// Elements per group (C/G * S).
inline int64_t group_len(const GroupNormProblem& p) {
  return p.C / p.groups * p.S;
}
// Elements in a 16-byte vector of p's dtype.
inline int full_vec(const GroupNormProblem& p) {
  return 16 / static_cast<int>(dtype_size(p.dtype));
}
// The vector width p allows: 16 bytes where pointers and every group's rows are aligned, else 1.
int vec_width(const GroupNormProblem& p, bool aligned);
// CTAs a thread-block cluster may have on a device of compute capability cc.
inline int max_cluster(int cc) {
  return cc >= 90 ? 16 : 1;
}
// Whether the whole tensor fits what streaming may keep in L2 between its two reads.
bool fits_stream_l2(const GroupNormProblem& p);
// Threads and vectors per thread for m vectors in one CTA of at most max_threads, holding at
// most max_floats per thread (fit_cta in group_norm_family.cpp says which it prefers). Returns
// false, leaving threads and iters alone, when m does not fit.
bool fit_cta(int64_t m, int vec, int max_threads, int max_floats, int* threads, int* iters);
// Registers, Stream: weight and bias of a CTA's groups in shared memory while they fit 40 KB;
// the other families are given true (staged: always kept there; chunked: unused).
void set_affine_smem(const GroupNormProblem& p, GroupNormConfig* c);

// Configs the heuristic's rules and the candidates share.
// Smem (SmemCoop with coop): `parts` CTAs per group, `threads` per CTA, nothing held.
GroupNormConfig staged_config(const GroupNormProblem& p, int parts, int threads, bool coop = false);
// Pipe, Split or SplitCoop: chunks of threads * iters vectors, one CTA each.
GroupNormConfig chunk_config(GroupNormFamily f, const GroupNormProblem& p, bool aligned,
                             int threads, int iters);

// A config checked against a problem, and how a check fails: InvalidArgument naming the rule,
// the config and the problem.
struct Check {
  const GroupNormProblem& p;
  const GroupNormConfig& c;
  int cc;
  bool aligned;
  [[noreturn]] void bad(const std::string& what) const;
};

// What a problem's candidates start from: the heuristic's one-kernel config without staging
// (Registers or Stream), and its vectors per group.
struct CandidateBase {
  const GroupNormProblem& p;
  const Target& t;
  bool aligned;
  const GroupNormConfig& h;
  int64_t nvec;
};
using AddCandidate = std::function<void(GroupNormConfig)>;

// What a family's kernels are, for the code that launches and checks them.
enum Trait : unsigned {
  kWorkspace = 1,    // partial statistics (and counters) in a per-stream workspace
  kCooperative = 2,  // one cooperative launch: every CTA resident at once
  kStaged = 4,       // slices in shared memory, of which `held` vectors per thread in registers
  kChunked = 8,      // one CTA per chunk of threads * iters vectors (group_norm_split_chunks)
  // team == threads, checked with the rules every family shares (the chunked families check it
  // with their chunk rule).
  kCtaTeam = 16,
  kWarpTeams = 32,  // also offers candidates when the heuristic holds groups in warp teams
};

// One family: its traits and the functions that answer for it.
struct FamilyRow {
  GroupNormFamily family;
  const char* name;  // the enumerator's name
  // describe()'s words for the family, before and after " held=N".
  const char* words_before_held;
  const char* words_after_held;
  unsigned traits;
  // CTAs per group meeting through global memory, up to this many (0: `cluster` is a hardware
  // cluster, at most max_cluster(cc)).
  int64_t coop_parts;
  // Which problems, targets and pointer alignments it can serve at all (the candidates' and the
  // heuristic's precondition; validation has its own rules and messages).
  bool (*eligible)(const GroupNormProblem& p, const Target& t, bool aligned);
  void (*candidates)(const CandidateBase& base, const AddCandidate& add);
  // The family's own rules, after the shared ones (validate_config).
  void (*check)(const Check& k);
  int64_t (*smem_bytes)(const GroupNormProblem& p, const GroupNormConfig& c);
  // Every kernel it launches, in launch order.
  std::vector<Spec> (*specs)(const GroupNormProblem& p, const GroupNormConfig& c);

  bool has(Trait t) const { return (traits & t) != 0; }
};

constexpr size_t kFamilies = 7;
// Every family, in the order their candidates are listed.
const std::array<FamilyRow, kFamilies>& families();
// The row of f; nullptr for a value outside the enum (a cast integer).
const FamilyRow* family(GroupNormFamily f);
// "family = N must be Registers, Stream, ..." for a value outside the enum.
std::string unknown_family(GroupNormFamily f);
// Its row, for a family validate_config accepted (InvalidArgument otherwise).
const FamilyRow& row(const GroupNormConfig& c);

}  // namespace kjit::ops::gn
