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
  using kjit::ops::Layout;
  static const std::vector<GnFamily> families = {
      {"registers, a few threads per group",
       {4, 64, 3, 3},
       32,
       Layout::NCHW,
       70,
       [](const C& c) { return c.team < c.threads && !c.stream && !c.smem; }},
      {"registers, channels last",
       {2, 7, 7, 64},
       8,
       Layout::NHWC,
       70,
       [](const C& c) { return !c.stream && !c.smem && !c.split && !c.pipe; }},
      {"registers, a cluster per group",
       {2, 64, 64, 64},
       4,
       Layout::NCHW,
       90,
       [](const C& c) { return c.cluster > 1 && !c.stream && !c.smem && !c.coop; }},
      {"streaming", {1, 64, 16387}, 2, Layout::NCHW, 70, [](const C& c) { return c.stream; }},
      {"shared memory",
       {2, 64, 64, 64},
       8,
       Layout::NCHW,
       90,
       [](const C& c) { return c.smem && !c.coop; }},
      {"shared memory, cooperative",
       {1, 9, 40000},
       1,
       Layout::NCHW,
       90,
       [](const C& c) { return c.smem && c.coop && c.cluster <= 16; }},
      {"split pair",
       {2, 40, 5001},
       5,
       Layout::NCHW,
       70,
       [](const C& c) { return c.split && !c.coop; }},
      {"split, cooperative",
       {2, 40, 5001},
       5,
       Layout::NCHW,
       70,
       [](const C& c) { return c.coop && !c.smem; }},
      {"pipelined", {1, 24, 40003}, 3, Layout::NCHW, 70, [](const C& c) { return c.pipe; }},
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
