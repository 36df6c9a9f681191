// GroupNorm: problem validation, config validation, and what a config compiles to (through its
// family's row, group_norm_family.cpp). Pure host code: no GPU needed (kjit-precompile uses it).
#include <algorithm>
#include <climits>
#include <iterator>
#include <string_view>

#include "kjit/error.hpp"
#include "kjit/op/checks.hpp"
#include "kjit/op/config_text.hpp"
#include "kjit/op/specs.hpp"
#include "kjit/op/target.hpp"
#include "kjit/ops/group_norm.hpp"
#include "ops/group_norm_family.hpp"

namespace kjit::ops {

using gn::group_len;

namespace {

constexpr int64_t kMaxGroupLen = (int64_t{1} << 31) - (int64_t{1} << 18);

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

// The family's words around " held=N": the order every record and log has always had.
std::string GroupNormConfig::describe() const {
  const gn::FamilyRow* f = gn::family(family);
  return "threads=" + std::to_string(threads) + " team=" + std::to_string(team) +
         " vec=" + std::to_string(vec) + " iters=" + std::to_string(iters) +
         " cluster=" + std::to_string(cluster) +
         (f ? f->words_before_held : " family=" + std::to_string(static_cast<int>(family))) +
         (held > 0 ? " held=" + std::to_string(held) : "") + (f ? f->words_after_held : "") +
         (affine_smem ? "" : " gmem-affine");
}

namespace {

constexpr const char* kFamilyWords[] = {"stream", "smem", "split", "pipe", "coop"};

// Whether the blank-separated words of `part` (" smem", " split coop") include `w`.
bool has_word(std::string_view part, std::string_view w) {
  for (size_t i = 0; i < part.size();) {
    const size_t end = std::min(part.find(' ', i), part.size());
    if (part.substr(i, end - i) == w) return true;
    i = end + 1;
  }
  return false;
}

// Bit k set: f's describe() writes kFamilyWords[k].
unsigned family_words(const gn::FamilyRow& f) {
  unsigned bits = 0;
  for (size_t k = 0; k < std::size(kFamilyWords); ++k)
    if (has_word(f.words_before_held, kFamilyWords[k]) ||
        has_word(f.words_after_held, kFamilyWords[k]))
      bits |= 1u << k;
  return bits;
}

}  // namespace

GroupNormConfig parse_group_norm_config(std::string_view text) {
  op::ConfigText t("group_norm", text);
  GroupNormConfig c;
  c.threads = t.integer("threads", 1, 1024);
  c.team = t.integer("team", 1, 1024);
  c.vec = t.integer("vec", 1, 16);
  // iters 0: the heuristic's config of an empty problem. The families' own rules (validate_config)
  // bound iters, cluster and held where a config is used.
  c.iters = t.integer("iters", 0, INT_MAX);
  c.cluster = t.integer("cluster", 1, INT_MAX);
  c.held = t.integer("held", 0, 0, INT_MAX);
  c.affine_smem = !t.flag("gmem-affine");
  unsigned given = 0;  // as family_words
  for (size_t k = 0; k < std::size(kFamilyWords); ++k)
    if (t.flag(kFamilyWords[k])) given |= 1u << k;
  t.finish(
      "threads, team, vec, iters, cluster, held, gmem-affine, and a family's words: "
      "none (registers), stream, smem, smem coop, pipe, split, split coop");
  for (const gn::FamilyRow& f : gn::families())
    if (family_words(f) == given) {
      c.family = f.family;
      return c;
    }
  std::string words;
  for (size_t k = 0; k < std::size(kFamilyWords); ++k)
    if (given & (1u << k)) words += std::string(words.empty() ? "" : " ") + kFamilyWords[k];
  t.bad("the words \"" + words +
        "\" name no family (registers: none; stream; smem; smem coop; pipe; split; split coop)");
}

void pin_config_text(std::string_view text, GroupNormOptions* opt) {
  opt->config = parse_group_norm_config(text);
}

bool GroupNormConfig::needs_workspace() const {
  const gn::FamilyRow* f = gn::family(family);
  return f && f->has(gn::kWorkspace);
}

bool GroupNormConfig::cooperative() const {
  const gn::FamilyRow* f = gn::family(family);
  return f && f->has(gn::kCooperative);
}

bool GroupNormConfig::staged() const {
  const gn::FamilyRow* f = gn::family(family);
  return f && f->has(gn::kStaged);
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

namespace {

// The rules every family shares, in the order validate_config has always applied them (the first
// broken one is reported).
void check_shared(const gn::Check& k, const gn::FamilyRow& f) {
  const GroupNormConfig& c = k.c;
  const int full_vec = gn::full_vec(k.p);
  if (c.threads < 32 || c.threads > 1024 || c.threads % 32 != 0)
    k.bad("threads = " + std::to_string(c.threads) + " must be a multiple of 32 in [32, 1024]");
  const bool warp_team = c.team >= 1 && c.team <= 32 && (c.team & (c.team - 1)) == 0;
  if (!(warp_team || c.team == c.threads))
    k.bad("team = " + std::to_string(c.team) + " must be a power of two <= 32 or equal threads");
  if (c.vec != 1 && c.vec != full_vec)
    k.bad("vec = " + std::to_string(c.vec) + " must be 1 or " + std::to_string(full_vec));
  if (c.vec > 1 && c.vec != gn::vec_width(k.p, k.aligned))
    k.bad("vec = " + std::to_string(c.vec) +
          " needs 16-byte aligned pointers and whole vectors per group" +
          (k.p.layout == Layout::NHWC ? " row (C/G and C multiples of it)"
                                      : " (C/G * S a multiple)"));
  // A staged coop group's CTAs meet through global memory: no hardware cluster limits them, only
  // the merge every warp does (at most kMaxSplitChunks partials).
  const int64_t max_parts = f.coop_parts ? f.coop_parts : gn::max_cluster(k.cc);
  if (c.cluster < 1 || c.cluster > max_parts || (c.cluster & (c.cluster - 1)) != 0)
    k.bad("cluster = " + std::to_string(c.cluster) +
          " must be a power of two <= " + std::to_string(max_parts) +
          (f.coop_parts ? " (CTAs per group)" : "") + " on sm_" + std::to_string(k.cc));
  if ((c.cluster > 1 || f.has(gn::kCtaTeam)) && c.team != c.threads)
    k.bad("clusters, streaming and smem staging need team == threads");
  if (c.iters < 1) k.bad("iters = " + std::to_string(c.iters) + " must be >= 1");
  if (c.held != 0 && !f.has(gn::kStaged))
    k.bad("held = " + std::to_string(c.held) + " needs smem staging");
  // A word no kernel reads is refused, not ignored: two texts would pin one kernel as two plans,
  // and a caller would believe it chose something.
  if (!c.affine_smem && c.family != GroupNormFamily::Registers &&
      c.family != GroupNormFamily::Stream)
    k.bad(
        "gmem-affine changes only the registers and stream families' kernel (gn_fwd); this "
        "family's kernels do not read it");
}

}  // namespace

void validate_config(const GroupNormProblem& p, const GroupNormConfig& c, int cc, bool aligned) {
  validate(p);
  const gn::Check k{p, c, cc, aligned};
  const gn::FamilyRow* f = gn::family(c.family);
  if (!f) k.bad(gn::unknown_family(c.family));
  check_shared(k, *f);
  f->check(k);
}

int64_t group_norm_split_chunks(const GroupNormProblem& p, const GroupNormConfig& c) {
  if (!gn::row(c).has(gn::kChunked)) return 0;
  return gn::ceil_div(group_len(p) / c.vec, int64_t{c.threads} * c.iters);
}

int64_t group_norm_smem_bytes(const GroupNormProblem& p, const GroupNormConfig& c) {
  return gn::row(c).smem_bytes(p, c);
}

std::vector<Spec> group_norm_specs(const GroupNormProblem& p, const GroupNormConfig& c) {
  return gn::row(c).specs(p, c);
}

std::vector<GroupNormConfig> group_norm_configs_for(const GroupNormProblem& p, const Target& t,
                                                    const GroupNormOptions& opt, bool aligned) {
  // A forced config is checked here too, so that a manifest never compiles one the op refuses.
  if (opt.config) validate_config(p, *opt.config, t.cc, aligned);
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
