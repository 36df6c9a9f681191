// One small problem per GroupNorm kernel family and that family's config among the problem's
// candidates: the activation tests (CPU: every family compiles; GPU: every family runs) reach
// each template's store path through the same list.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kjit/ops/group_norm.hpp"

namespace kjit_test {

struct GnFamily {
  const char* name;
  std::vector<int64_t> shape;
  int64_t groups;
  kjit::ops::Layout layout;
  int min_cc;  // the family's kernels need this compute capability
  bool (*pick)(const kjit::ops::GroupNormConfig&);
};

inline const std::vector<GnFamily>& gn_families() {
  using C = kjit::ops::GroupNormConfig;
  using F = kjit::ops::GroupNormFamily;
  using kjit::ops::Layout;
  static const std::vector<GnFamily> families = {
      {"registers, a few threads per group",
       {4, 64, 3, 3},
       32,
       Layout::NCHW,
       70,
       [](const C& c) { return c.family == F::Registers && c.team < c.threads; }},
      {"registers, channels last",
       {2, 7, 7, 64},
       8,
       Layout::NHWC,
       70,
       [](const C& c) { return c.family == F::Registers; }},
      {"registers, a cluster per group",
       {2, 64, 64, 64},
       4,
       Layout::NCHW,
       90,
       [](const C& c) { return c.family == F::Registers && c.cluster > 1; }},
      {"streaming",
       {1, 64, 16387},
       2,
       Layout::NCHW,
       70,
       [](const C& c) { return c.family == F::Stream; }},
      {"shared memory",
       {2, 64, 64, 64},
       8,
       Layout::NCHW,
       90,
       [](const C& c) { return c.family == F::Smem; }},
      {"shared memory, cooperative",
       {1, 9, 40000},
       1,
       Layout::NCHW,
       90,
       [](const C& c) { return c.family == F::SmemCoop && c.cluster <= 16; }},
      {"split pair",
       {2, 40, 5001},
       5,
       Layout::NCHW,
       70,
       [](const C& c) { return c.family == F::Split; }},
      {"split, cooperative",
       {2, 40, 5001},
       5,
       Layout::NCHW,
       70,
       [](const C& c) { return c.family == F::SplitCoop; }},
      {"pipelined",
       {1, 24, 40003},
       3,
       Layout::NCHW,
       70,
       [](const C& c) { return c.family == F::Pipe; }},
  };
  return families;
}

inline kjit::ops::GroupNormProblem gn_family_problem(const GnFamily& f, kjit::DType t,
                                                     kjit::ops::Activation a) {
  auto p = kjit::ops::GroupNormProblem::from_shape(f.shape, f.groups, t, f.layout);
  p.activation = a;
  return p;
}

// The first of p's candidates (16-byte aligned pointers) in family f, if any.
inline std::optional<kjit::ops::GroupNormConfig> gn_family_config(
    const GnFamily& f, const kjit::ops::GroupNormProblem& p, int cc) {
  for (const kjit::ops::GroupNormConfig& c : kjit::ops::group_norm_candidates(p, cc))
    if (f.pick(c)) return c;
  return std::nullopt;
}

}  // namespace kjit_test
