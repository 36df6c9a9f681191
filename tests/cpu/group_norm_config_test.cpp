#include <doctest/doctest.h>

#include <chrono>
#include <climits>

#include "compile_probe.hpp"
#include "group_norm_families.hpp"
#include "kjit/kjit.hpp"
#include "kjit/ops/group_norm.hpp"
#include "test_util.hpp"

using kjit::ops::GroupNormConfig;
using F = kjit::ops::GroupNormFamily;

namespace {

// c with a staged config's iters as its kernel derives them (the slice's vectors per thread):
// validate_config refuses any other, so a test that reshapes a staged config sets them again.
GroupNormConfig with_staged_iters(GroupNormConfig c, const kjit::ops::GroupNormProblem& p) {
  const int64_t nvec = p.C / p.groups * p.S / c.vec;  // NCHW: a group is contiguous
  const int64_t share = (nvec + c.cluster - 1) / c.cluster;
  c.iters = static_cast<int>((share + c.threads - 1) / c.threads);
  return c;
}

}  // namespace
using kjit::ops::GroupNormProblem;
using kjit::ops::Layout;

namespace {

GroupNormProblem random_problem() {
  using kjit_test::uniform;
  GroupNormProblem p;
  const kjit::DType types[] = {kjit::DType::F32, kjit::DType::F16, kjit::DType::BF16};
  p.dtype = types[uniform(0, 2)];
  p.param_dtype = uniform(0, 1) ? p.dtype : kjit::DType::F32;
  p.layout = uniform(0, 3) == 0 ? Layout::NHWC : Layout::NCHW;
  p.groups = uniform(1, 64);
  const int64_t cg = uniform(0, 3) == 0 ? 1 : uniform(1, 96);
  p.C = p.groups * cg;
  // Spatial sizes across regimes: none, tiny, prime, medium, large.
  const int64_t choices[] = {1, 7, 49, 97, 576, 1024, 4093, 4096, 16384, 65536};
  p.S = choices[uniform(0, 9)];
  p.N = uniform(1, 16);
  p.activation = static_cast<kjit::ops::Activation>(uniform(0, 4));  // any of the five
  p.has_weight = uniform(0, 3) != 0;
  p.has_bias = uniform(0, 3) != 0;
  return p;
}

// Every config must cover each element of a group exactly once.
void check_covers(const GroupNormProblem& p, const GroupNormConfig& c) {
  const int64_t L = p.C / p.groups * p.S;
  CHECK(L % c.vec == 0);
  CHECK(c.threads % 32 == 0);
  CHECK((c.team == c.threads || (c.team <= 32 && (c.team & (c.team - 1)) == 0)));
  // Streaming loops over its share; the chunked families launch a CTA per chunk, as many as
  // cover a group.
  const bool chunked = c.family == F::Pipe || c.family == F::Split || c.family == F::SplitCoop;
  if (c.family != F::Stream && !chunked) CHECK(int64_t{c.iters} * c.team * c.cluster * c.vec >= L);
  if (chunked) CHECK((c.cluster == 1 && c.team == c.threads));
  if (!c.staged()) CHECK(c.held == 0);
  CHECK(c.threads <= 1024);
  CHECK(c.cluster <= (c.family == F::SmemCoop ? 64 : 16));  // staged coop: CTAs per group
}

}  // namespace

TEST_CASE("group_norm validation names the bad value and the rule") {
  GroupNormProblem p = GroupNormProblem::from_shape({8, 256, 24, 24}, 32, kjit::DType::F32);
  CHECK(p.S == 576);
  kjit::ops::validate(p);
  p.groups = 30;
  try {
    kjit::ops::validate(p);
    FAIL("C % G accepted");
  } catch (const kjit::Error& e) {
    CHECK(e.code() == kjit::Errc::InvalidArgument);
    CHECK(std::string(e.what()).find("C = 256 must be divisible by groups = 30") !=
          std::string::npos);
  }
  p.groups = 0;
  CHECK_KJIT_ERROR(kjit::ops::validate(p), kjit::Errc::InvalidArgument);
  p.groups = 32;
  p.C = 0;
  CHECK_KJIT_ERROR(kjit::ops::validate(p), kjit::Errc::InvalidArgument);
  CHECK_KJIT_ERROR(GroupNormProblem::from_shape({8}, 1, kjit::DType::F32),
                   kjit::Errc::InvalidArgument);
  CHECK_KJIT_ERROR(GroupNormProblem::from_shape({8, -4, 3}, 1, kjit::DType::F32),
                   kjit::Errc::InvalidArgument);
  GroupNormProblem huge =
      GroupNormProblem::from_shape({1, 1, 1 << 16, 1 << 16}, 1, kjit::DType::F32);
  CHECK_KJIT_ERROR(kjit::ops::validate(huge), kjit::Errc::InvalidArgument);  // group > 2^31
  // The largest group: 32-bit vector indices keep room for one CTA's stride past its end.
  constexpr int64_t kMaxGroup = (int64_t{1} << 31) - (int64_t{1} << 18);
  GroupNormProblem edge = GroupNormProblem::from_shape({1, 2, kMaxGroup / 2}, 1, kjit::DType::F32);
  kjit::ops::validate(edge);
  edge.S += 1;
  CHECK_THROWS_WITH_AS(kjit::ops::validate(edge),
                       doctest::Contains("a group of 2147221506 elements (C/G * S) exceeds the "
                                         "supported 2^31 - 2^18 = 2147221504"),
                       kjit::Error);
  // Channels are indexed in 32 bits (weight and bias): C <= 2^31-1 even when groups are small.
  GroupNormProblem many =
      GroupNormProblem::from_shape({1, int64_t{1} << 31, 1}, int64_t{1} << 30, kjit::DType::F16);
  CHECK_THROWS_WITH_AS(kjit::ops::validate(many),
                       doctest::Contains("C = 2147483648 exceeds 2^31-1"), kjit::Error);
  many.C = INT_MAX - 1;
  many.groups = many.C / 2;
  kjit::ops::validate(many);
  GroupNormProblem deep = GroupNormProblem::from_shape({1, 4, 1}, 1, kjit::DType::F32);
  deep.S = INT64_MAX / 2;
  CHECK_THROWS_WITH_AS(kjit::ops::validate(deep),
                       doctest::Contains("C/G * S = 4 * 4611686018427387903 overflows 64 bits"),
                       kjit::Error);
  // Enumerators from a cast integer are named, not compiled or run as another one.
  GroupNormProblem e = GroupNormProblem::from_shape({2, 8, 4}, 2, kjit::DType::F32);
  e.dtype = static_cast<kjit::DType>(7);
  CHECK_THROWS_WITH_AS(kjit::ops::validate(e),
                       doctest::Contains("dtype = 7 must be F32, F16 or BF16"), kjit::Error);
  e.dtype = kjit::DType::F32;
  e.param_dtype = static_cast<kjit::DType>(-1);
  CHECK_THROWS_WITH_AS(kjit::ops::validate(e), doctest::Contains("param_dtype = -1"), kjit::Error);
  e.param_dtype = kjit::DType::F32;
  e.layout = static_cast<Layout>(5);
  CHECK_THROWS_WITH_AS(kjit::ops::validate(e), doctest::Contains("layout = 5 must be NCHW or NHWC"),
                       kjit::Error);
  e.layout = Layout::NCHW;
  e.activation = static_cast<kjit::ops::Activation>(9);
  CHECK_THROWS_WITH_AS(kjit::ops::validate(e),
                       doctest::Contains("activation = 9 must be None, SiLU, GeluTanh, GeluErf "
                                         "or ReLU"),
                       kjit::Error);
  // Element counts whose byte counts overflow 64 bits, with and without a spatial size.
  GroupNormProblem wide =
      GroupNormProblem::from_shape({67108864, 64, 1073741824}, 64, kjit::DType::F32);
  CHECK_THROWS_WITH_AS(kjit::ops::validate(wide),
                       doctest::Contains("N * C * S = 67108864 * 64 * 1073741824 exceeds 2^59"),
                       kjit::Error);
  GroupNormProblem empty =
      GroupNormProblem::from_shape({int64_t{1} << 40, int64_t{1} << 30, 0}, 1, kjit::DType::F32);
  CHECK_THROWS_WITH_AS(kjit::ops::validate(empty), doctest::Contains("N * C = "), kjit::Error);
  // What a call checks before it needs a device: eps, null and misaligned pointers, overlap.
  GroupNormProblem ok = GroupNormProblem::from_shape({2, 8, 4}, 2, kjit::DType::F32);
  ok.has_weight = ok.has_bias = false;
  alignas(16) static float buf[256];
  kjit::ops::validate_call(ok, buf, buf + 128, nullptr, nullptr, 1e-5f);
  kjit::ops::validate_call(ok, buf, buf, nullptr, nullptr, 1e-5f);  // in place
  CHECK_THROWS_WITH_AS(kjit::ops::validate_call(ok, nullptr, buf, nullptr, nullptr, 1e-5f),
                       doctest::Contains("x is null"), kjit::Error);
  CHECK_THROWS_WITH_AS(kjit::ops::validate_call(ok, buf, buf + 8, nullptr, nullptr, 1e-5f),
                       doctest::Contains("overlap"), kjit::Error);
  CHECK_THROWS_WITH_AS(kjit::ops::validate_call(ok, buf, buf + 128, nullptr, nullptr, -1.f),
                       doctest::Contains("eps = "), kjit::Error);
  CHECK_THROWS_WITH_AS(kjit::ops::validate_call(ok, reinterpret_cast<char*>(buf) + 1, buf + 128,
                                                nullptr, nullptr, 1e-5f),
                       doctest::Contains("not aligned"), kjit::Error);
  GroupNormProblem nhwc =
      GroupNormProblem::from_shape({2, 5, 7, 64}, 8, kjit::DType::BF16, Layout::NHWC);
  CHECK(nhwc.C == 64);
  CHECK(nhwc.S == 35);
}

TEST_CASE("the heuristic covers every regime the issue names") {
  auto cfg = [](std::vector<int64_t> shape, int64_t g) {
    return kjit::ops::group_norm_heuristic(GroupNormProblem::from_shape(shape, g, kjit::DType::F32),
                                           90);
  };
  GroupNormConfig tiny = cfg({4, 32, 7, 7}, 8);
  CHECK(tiny.team < tiny.threads);  // several groups per CTA
  GroupNormConfig seed = cfg({8, 256, 24, 24}, 32);
  CHECK(seed.team == seed.threads);
  CHECK(seed.cluster <= 2);
  CHECK(seed.family == F::Registers);
  // 32 groups of 1 MB in a 32 MB tensor: 8 staged slices of 128 KB per group, 512 threads holding
  // 8 vectors each, meeting in one cooperative launch (256 CTAs); inside a capture on a stream
  // without a workspace, streamed in 8-CTA clusters, the second read from L2.
  const GroupNormProblem big_p =
      GroupNormProblem::from_shape({1, 128, 256, 256}, 32, kjit::DType::F32);
  GroupNormConfig big = kjit::ops::group_norm_heuristic(big_p, 90);
  CHECK((big.family == F::SmemCoop && big.cluster == 8 && big.threads == 512 && big.held == 8));
  GroupNormConfig big_capture = kjit::ops::group_norm_capture_fallback(big_p, 90);
  CHECK(big_capture.cluster == 8);
  CHECK(big_capture.family == F::Stream);
  // Groups of 512 KB-1 MB: 8 slices each (partial last ones here); 512 KB and 2 MB groups stream.
  auto f32 = [](std::vector<int64_t> shape, int64_t g) {
    return kjit::ops::group_norm_heuristic(GroupNormProblem::from_shape(shape, g, kjit::DType::F32),
                                           90);
  };
  const GroupNormConfig g977 = f32({1, 128, 250, 250}, 32);
  CHECK((g977.family == F::SmemCoop && g977.cluster == 8));
  const GroupNormConfig g625 = f32({1, 128, 200, 200}, 32);
  CHECK((g625.family == F::SmemCoop && g625.cluster == 8 && g625.held == 8));
  CHECK(f32({1, 128, 128, 256}, 32).family == F::Stream);
  CHECK(f32({1, 68, 256, 512}, 17).family == F::Stream);
  // 64 groups of 1 MB (the grid would need 4 CTAs of 512 threads per SM): not staged coop.
  CHECK_FALSE(cfg({1, 256, 256, 256}, 64).cooperative());
  // 16 of them: two kernels, the second read from L2; inside a capture on a stream without a
  // workspace, staged in 16-CTA clusters.
  const GroupNormProblem fewer =
      GroupNormProblem::from_shape({1, 64, 256, 256}, 16, kjit::DType::F32);
  GroupNormConfig split = kjit::ops::group_norm_heuristic(fewer, 90);
  CHECK(split.family == F::Split);
  CHECK(split.cluster == 1);
  CHECK(split.threads * split.iters == 2048);  // 32 KB chunks
  GroupNormConfig split_fallback = kjit::ops::group_norm_capture_fallback(fewer, 90);
  CHECK(split_fallback.family == F::Smem);
  CHECK(split_fallback.cluster == 16);
  // 16-bit: 32 KB chunks (4096 vectors) while they give every SM one, else 16 KB.
  auto heur = [](std::vector<int64_t> shape, int64_t g, kjit::DType t) {
    return kjit::ops::group_norm_heuristic(GroupNormProblem::from_shape(shape, g, t), 90);
  };
  const GroupNormConfig b16 = heur({1, 64, 256, 256}, 16, kjit::DType::BF16);  // 256 chunks
  CHECK((b16.family == F::Split && b16.threads == 256 && b16.iters == 8));
  const GroupNormConfig b8 = heur({1, 32, 256, 256}, 8, kjit::DType::BF16);  // 128 of 32 KB
  CHECK((b8.family == F::Split && b8.threads == 256 && b8.iters == 4));
  // 32 groups of 512 KB in 16-bit: one cooperative kernel (512 chunks of 32 KB); fp32's 1024
  // chunks are more than it holds: streamed (above).
  const GroupNormConfig b32 = heur({1, 128, 256, 256}, 32, kjit::DType::F16);
  CHECK((b32.family == F::SplitCoop && b32.threads == 256 && b32.iters == 8 && b32.vec == 8));
  const GroupNormConfig b32_fallback = kjit::ops::group_norm_capture_fallback(
      GroupNormProblem::from_shape({1, 128, 256, 256}, 32, kjit::DType::F16), 90);
  CHECK((b32_fallback.family == F::Stream && b32_fallback.cluster == 8));
  // Unaligned pointers: scalar accesses, nothing that needs a workspace (no split of either
  // kind).
  CHECK_FALSE(
      kjit::ops::group_norm_heuristic(
          GroupNormProblem::from_shape({1, 128, 256, 256}, 32, kjit::DType::BF16), 90, false)
          .needs_workspace());
  // 64 of them: staged in shared memory, a 16-CTA cluster per group.
  GroupNormConfig bigger = cfg({2, 128, 256, 256}, 32);
  CHECK(bigger.cluster == 16);
  CHECK(bigger.family == F::Smem);
  // fp32 groups of 1-2 MB in tensors L2 cannot keep: 16-CTA clusters of 512 threads, half of
  // each 128 KB slice held in registers. Larger ones: one pipelined launch of 64 KB chunks, and
  // inside a capture on a stream without a workspace, staged in 16-CTA clusters (slices of 256
  // KB, half held) or streamed where no cluster holds the group.
  GroupNormConfig two_mb = cfg({1, 256, 256, 256}, 32);
  CHECK((two_mb.family == F::Smem && two_mb.cluster == 16 && two_mb.threads == 512 &&
         two_mb.held == 8));
  const GroupNormProblem four_mb_p =
      GroupNormProblem::from_shape({1, 128, 512, 512}, 32, kjit::DType::F32);
  GroupNormConfig four_mb = kjit::ops::group_norm_heuristic(four_mb_p, 90);
  CHECK((four_mb.family == F::Pipe && four_mb.threads == 512 && four_mb.iters == 8 &&
         four_mb.vec == 4));
  CHECK(four_mb.needs_workspace());
  CHECK(kjit::ops::group_norm_split_chunks(four_mb_p, four_mb) == 64);
  GroupNormConfig four_mb_capture = kjit::ops::group_norm_capture_fallback(four_mb_p, 90);
  CHECK((four_mb_capture.family == F::Smem && four_mb_capture.cluster == 16 &&
         four_mb_capture.held == 16));
  CHECK(kjit::ops::group_norm_smem_bytes(four_mb_p, four_mb_capture) <= 227 * 1024);
  // Not for 16-bit types, sm_80, unaligned pointers, or a tensor L2 holds.
  CHECK(kjit::ops::group_norm_heuristic(
            GroupNormProblem::from_shape({1, 128, 512, 512}, 32, kjit::DType::BF16), 90)
            .family != F::Pipe);
  CHECK(kjit::ops::group_norm_heuristic(four_mb_p, 80).family != F::Pipe);
  CHECK(kjit::ops::group_norm_heuristic(four_mb_p, 90, false).family != F::Pipe);
  CHECK(cfg({1, 32, 512, 512}, 8).family != F::Pipe);  // 32 MB
  GroupNormConfig huge = cfg({1, 64, 1024, 1024}, 1);
  CHECK(huge.family == F::Pipe);
  CHECK(kjit::ops::group_norm_capture_fallback(
            GroupNormProblem::from_shape({1, 64, 1024, 1024}, 1, kjit::DType::F32), 90)
            .family == F::Stream);  // beyond a cluster's registers and shared memory
  GroupNormConfig ampere = kjit::ops::group_norm_heuristic(
      GroupNormProblem::from_shape({1, 128, 256, 256}, 32, kjit::DType::F32), 80);
  CHECK(ampere.cluster == 1);  // no clusters before sm_90
  GroupNormConfig unaligned = kjit::ops::group_norm_heuristic(
      GroupNormProblem::from_shape({8, 256, 24, 24}, 32, kjit::DType::F32), 90, false);
  CHECK(unaligned.vec == 1);
  GroupNormConfig odd = cfg({2, 6, 7}, 3);  // L = 14: not a whole number of float4s
  CHECK(odd.vec == 1);
}

// The list the activation tests run every kernel family through (CPU: compiled; GPU: run) has a
// problem whose config is of each family the runtime knows (describe() names an unknown one
// "family=N"), so that a new family cannot be left out of them.
TEST_CASE("the test families cover every GroupNorm kernel family") {
  int known = 0;
  for (int i = 0; i < 64; ++i) {
    GroupNormConfig c;
    c.family = static_cast<F>(i);
    if (c.describe().find(" family=") != std::string::npos) break;
    ++known;
    bool covered = false;
    for (const kjit_test::GnFamily& f : kjit_test::gn_families()) {
      const GroupNormProblem p =
          kjit_test::gn_family_problem(f, kjit::DType::F32, kjit::ops::Activation::SiLU);
      const auto k = kjit_test::gn_family_config(f, p, 90);
      covered = covered || (k && k->family == c.family);
    }
    CAPTURE(i);
    CHECK(covered);
  }
  CHECK(known == 7);
}

TEST_CASE("a forced config is checked against the problem, naming the field and the rule") {
  const GroupNormProblem p = GroupNormProblem::from_shape({2, 64, 32, 32}, 8, kjit::DType::F32);
  const GroupNormConfig h = kjit::ops::group_norm_heuristic(p, 90);
  kjit::ops::validate_config(p, h, 90, true);
  auto expect = [&](GroupNormConfig c, const char* text, int cc = 90, bool aligned = true) {
    const std::string want = text;
    CAPTURE(want);
    try {
      kjit::ops::validate_config(p, c, cc, aligned);
      FAIL("accepted " << c.describe());
    } catch (const kjit::Error& e) {
      CHECK(e.code() == kjit::Errc::InvalidArgument);
      CAPTURE(std::string(e.what()));
      CHECK(std::string(e.what()).find(text) != std::string::npos);
    }
  };
  GroupNormConfig c = h;
  c.threads = 48;
  expect(c, "threads = 48 must be a multiple of 32");
  c = h;
  c.team = 24;
  expect(c, "team = 24 must be a power of two");
  c = h;
  c.iters = 1;
  expect(c, "must cover a group");
  c = h;
  expect(c, "vec = 4 needs 16-byte aligned pointers", 90, false);
  c = h;
  c.cluster = 2;
  expect(c, "cluster = 2 must be a power of two <= 1 on sm_80", 80);
  c = h;
  c.cluster = 32;
  expect(c, "cluster = 32");
  // A streaming config unrolls iters loads of vec elements per thread: bounded, not a compile
  // that runs for minutes.
  const GroupNormProblem few =
      GroupNormProblem::from_shape({1, 128, 256, 256}, 32, kjit::DType::F32);
  GroupNormConfig st = kjit::ops::group_norm_capture_fallback(few, 90);
  REQUIRE(st.family == F::Stream);
  kjit::ops::validate_config(few, st, 90, true);
  st.iters = 4096;
  CHECK_THROWS_WITH_AS(kjit::ops::validate_config(few, st, 90, true),
                       doctest::Contains("elements in flight per thread exceeds 128"), kjit::Error);
  // Split: NCHW, one CTA per chunk, a bounded number of values per thread.
  GroupNormConfig sp = kjit::ops::group_norm_heuristic(
      GroupNormProblem::from_shape({1, 64, 256, 256}, 16, kjit::DType::F32), 90);
  REQUIRE(sp.family == F::Split);
  kjit::ops::validate_config(few, sp, 90, true);
  sp.cluster = 2;
  CHECK_THROWS_WITH_AS(kjit::ops::validate_config(few, sp, 90, true),
                       doctest::Contains("split runs one CTA per chunk"), kjit::Error);
  sp.cluster = 1;
  sp.iters = 32;
  CHECK_THROWS_WITH_AS(kjit::ops::validate_config(few, sp, 90, true),
                       doctest::Contains("held per thread exceeds 64"), kjit::Error);
  sp.iters = 8;
  sp.threads = sp.team = 1024;
  CHECK_THROWS_WITH_AS(kjit::ops::validate_config(few, sp, 90, true),
                       doctest::Contains("split needs threads <= 512"), kjit::Error);
  // gn_apply merges all of a group's partials in every warp: bounded.
  sp.threads = sp.team = 32;
  sp.iters = 1;
  CHECK(kjit::ops::group_norm_split_chunks(few, sp) == 65536 / 32);
  CHECK_THROWS_WITH_AS(kjit::ops::validate_config(few, sp, 90, true),
                       doctest::Contains("2048 chunks of threads * iters vectors, more than 64"),
                       kjit::Error);
  sp.threads = sp.team = 256;
  sp.iters = 8;
  // coop: the one-kernel form of split, with acquire/release atomics.
  GroupNormConfig co = sp;
  co.family = F::SplitCoop;
  kjit::ops::validate_config(few, co, 90, true);
  kjit::ops::validate_config(few, co, 70, true);
  CHECK_THROWS_WITH_AS(kjit::ops::validate_config(few, co, 60, true),
                       doctest::Contains("coop needs sm_70"), kjit::Error);
  // A family from a cast integer is named, not run as another one.
  co.family = static_cast<F>(9);
  CHECK(co.describe().find(" family=9") != std::string::npos);
  CHECK_THROWS_WITH_AS(kjit::ops::validate_config(few, co, 90, true),
                       doctest::Contains("family = 9 must be Registers, Stream, Smem, SmemCoop, "
                                         "Pipe, Split or SplitCoop"),
                       kjit::Error);
  CHECK_KJIT_ERROR(kjit::ops::group_norm_specs(few, co), kjit::Errc::InvalidArgument);
  int coop_90 = 0;
  for (const GroupNormConfig& k : kjit::ops::group_norm_candidates(few, 90))
    coop_90 += k.cooperative();
  CHECK(coop_90 > 0);
  for (const GroupNormConfig& k : kjit::ops::group_norm_candidates(few, 60))
    CHECK_FALSE(k.cooperative());
  const GroupNormProblem nhwc =
      GroupNormProblem::from_shape({1, 256, 256, 128}, 32, kjit::DType::F32, Layout::NHWC);
  CHECK_THROWS_WITH_AS(kjit::ops::validate_config(nhwc, sp, 90, true),
                       doctest::Contains("split needs NCHW"), kjit::Error);
  GroupNormConfig sm;
  for (const auto& k : kjit::ops::group_norm_candidates(p, 90))
    if (k.family == F::Smem && k.cluster == 1 && sm.family != F::Smem) sm = k;
  REQUIRE(sm.family == F::Smem);
  kjit::ops::validate_config(p, sm, 90, true);
  // gmem-affine changes only gn_fwd (registers, stream): on another family it is refused, not
  // ignored.
  GroupNormConfig gmem = sm;
  gmem.affine_smem = false;
  expect(gmem, "gmem-affine changes only the registers and stream families' kernel", 90);
  for (const GroupNormConfig& k : kjit::ops::group_norm_candidates(p, 90))
    if (k.family == F::Registers || k.family == F::Stream) {
      GroupNormConfig g = k;
      g.affine_smem = false;
      CHECK_NOTHROW(kjit::ops::validate_config(p, g, 90, true));
    }
  expect(sm, "smem staging needs sm_90", 80);
  const GroupNormProblem big = GroupNormProblem::from_shape({1, 64, 512, 512}, 1, kjit::DType::F32);
  GroupNormConfig whole = sm;
  whole.cluster = 1;
  whole = with_staged_iters(whole, big);
  try {
    kjit::ops::validate_config(big, whole, 90, true);
    FAIL("a 64 MB slice accepted");
  } catch (const kjit::Error& e) {
    CHECK(std::string(e.what()).find("bytes of shared memory") != std::string::npos);
  }
}

// The largest groups validate accepts: every candidate's loop (a stride of threads * iters
// vectors, a chunk of as many) ends within 32-bit vector indices, in every dtype and width, also
// the forced iters * vec limits (64 held, 128 streamed) at 1024 threads.
TEST_CASE("the largest groups keep every candidate's vector indices within 32 bits") {
  constexpr int64_t kMaxGroup = (int64_t{1} << 31) - (int64_t{1} << 18);
  for (kjit::DType t : {kjit::DType::F32, kjit::DType::F16})
    for (int64_t c : {int64_t{1}, int64_t{4}, int64_t{64}}) {
      const GroupNormProblem p = GroupNormProblem::from_shape({1, c, kMaxGroup / c}, 1, t);
      kjit::ops::validate(p);
      for (int cc : {80, 90})
        for (bool aligned : {true, false})
          for (const GroupNormConfig& k : kjit::ops::group_norm_candidates(p, cc, aligned)) {
            CAPTURE(p.describe());
            CAPTURE(k.describe());
            CHECK_NOTHROW(kjit::ops::validate_config(p, k, cc, aligned));
            CHECK(kMaxGroup / k.vec + int64_t{k.threads} * k.iters <= INT_MAX);
          }
      CHECK(kMaxGroup + int64_t{1024} * 128 <= INT_MAX);  // streamed, vec 1: the longest stride
    }
}

TEST_CASE("heuristic and candidates cover every element, over random problems") {
  for (int i = 0; i < 500; ++i) {
    GroupNormProblem p = random_problem();
    CAPTURE(p.describe());
    for (int cc : {80, 90})
      for (bool aligned : {true, false})
        for (const GroupNormConfig& c : kjit::ops::group_norm_candidates(p, cc, aligned)) {
          CAPTURE(c.describe());
          check_covers(p, c);
          CHECK_NOTHROW(kjit::ops::validate_config(p, c, cc, aligned));
          if (c.staged()) CHECK(cc >= 90);
          CHECK(kjit::ops::parse_group_norm_config(c.describe()) == c);  // pinnable as reported
        }
  }
}

// Random problems rarely hit the narrow rules (17-33 groups of exactly 1 MB, <= 16 groups of
// >= 512 KB): every candidate of a problem from each rule must validate, and a heuristic that
// needs a workspace must list its capture fallback second. (A staged coop heuristic once seeded
// the register-held variants with coop set: 23 invalid candidates, which autotuning then picked.)
TEST_CASE("candidates validate for a problem of every heuristic rule, in every dtype") {
  const std::vector<std::pair<std::vector<int64_t>, int64_t>> problems = {
      {{8, 256, 24, 24}, 32},   {{1, 128, 256, 256}, 32}, {{1, 64, 256, 256}, 16},
      {{1, 32, 256, 256}, 8},   {{16, 512, 64, 64}, 32},  {{2, 320, 64, 64}, 32},
      {{1, 256, 256, 256}, 32}, {{1, 128, 512, 512}, 32}, {{1, 512, 128, 128}, 32},
      {{4, 32, 7, 7}, 8},       {{1, 4096, 8, 8}, 32},    {{1, 124, 250, 250}, 31}};
  int workspace_heuristics = 0;
  for (const auto& [shape, groups] : problems)
    for (kjit::DType t : {kjit::DType::F32, kjit::DType::BF16, kjit::DType::F16})
      for (int cc : {80, 90})
        for (bool aligned : {true, false}) {
          const GroupNormProblem p = GroupNormProblem::from_shape(shape, groups, t);
          CAPTURE(p.describe());
          CAPTURE(cc);
          CAPTURE(aligned);
          const auto cands = kjit::ops::group_norm_candidates(p, cc, aligned);
          for (const GroupNormConfig& c : cands) {
            CAPTURE(c.describe());
            check_covers(p, c);
            CHECK_NOTHROW(kjit::ops::validate_config(p, c, cc, aligned));
          }
          if (cands[0].needs_workspace()) {
            ++workspace_heuristics;
            REQUIRE(cands.size() >= 2);
            CHECK(cands[1].describe() ==
                  kjit::ops::group_norm_capture_fallback(p, cc, aligned).describe());
            CHECK_FALSE(cands[1].needs_workspace());
          }
        }
  CHECK(workspace_heuristics >= 8);
}

TEST_CASE("candidates validate for groups with very many channels (large affine staging)") {
  // The staged kernel keeps weight and bias for C/G channels next to the slice: with C/G in the
  // 100 000s that alone is up to 8 MB, so every staged candidate must check the total.
  for (const auto& [shape, groups] : {std::pair{std::vector<int64_t>{2, 131072, 1}, int64_t{1}},
                                      std::pair{std::vector<int64_t>{1, 1048576, 16}, int64_t{32}},
                                      std::pair{std::vector<int64_t>{4, 8192, 64}, int64_t{2}}}) {
    for (kjit::DType t : {kjit::DType::F32, kjit::DType::BF16}) {
      const GroupNormProblem p = GroupNormProblem::from_shape(shape, groups, t);
      CAPTURE(p.describe());
      for (const GroupNormConfig& c : kjit::ops::group_norm_candidates(p, 90)) {
        CAPTURE(c.describe());
        CHECK_NOTHROW(kjit::ops::validate_config(p, c, 90, true));
        if (c.staged()) CHECK(kjit::ops::group_norm_smem_bytes(p, c) <= 227 * 1024);
      }
    }
  }
}

TEST_CASE("held slices: up to 16 vectors, more than 8 only up to 512 threads") {
  const GroupNormProblem p =
      GroupNormProblem::from_shape({16, 512, 64, 64}, 32, kjit::DType::F32);  // 16384 vectors
  GroupNormConfig c = kjit::ops::group_norm_heuristic(p, 90);
  REQUIRE(c.family == F::Smem);
  CHECK(c.held == 8);
  CHECK(c.threads == 512);
  CHECK(c.cluster == 2);
  c.held = 16;
  c.threads = c.team = 256;
  c = with_staged_iters(c, p);
  CHECK_NOTHROW(kjit::ops::validate_config(p, c, 90, true));
  c.iters += 1;  // a staged kernel derives its vectors per thread: iters is checked, not ignored
  CHECK_THROWS_WITH_AS(kjit::ops::validate_config(p, c, 90, true),
                       doctest::Contains("must be the slice's vectors per thread"), kjit::Error);
  c = with_staged_iters(c, p);
  c.held = 17;
  CHECK_THROWS_WITH_AS(kjit::ops::validate_config(p, c, 90, true),
                       doctest::Contains("must be in [0, 16]"), kjit::Error);
  c.held = 12;
  c.threads = c.team = 1024;
  c.cluster = 1;  // a 16384-vector slice: 12288 held, 4096 staged
  c = with_staged_iters(c, p);
  CHECK_THROWS_WITH_AS(kjit::ops::validate_config(p, c, 90, true),
                       doctest::Contains("needs threads <= 512, not 1024"), kjit::Error);
  // 16-bit types are offered held 4 only (8 and 16 spill).
  const GroupNormProblem h = GroupNormProblem::from_shape({16, 512, 64, 64}, 32, kjit::DType::BF16);
  for (const GroupNormConfig& k : kjit::ops::group_norm_candidates(h, 90)) CHECK(k.held <= 4);
}

// Staged coop: a group's CTAs meet through global memory, so no hardware cluster limit applies,
// only the per-warp merge's 64 partials; a CTA per group has no one to meet.
TEST_CASE("staged cooperative GroupNorm configs: rules, candidates, kernels") {
  const GroupNormProblem p =
      GroupNormProblem::from_shape({1, 128, 256, 256}, 32, kjit::DType::F32);  // 65536 vectors
  GroupNormConfig c;
  c.family = F::SmemCoop;
  c.vec = 4;
  c.threads = c.team = 256;
  c.held = 4;
  c.cluster = 32;  // 2048-vector slices, 1024 of them held
  kjit::ops::validate_config(p, with_staged_iters(c, p), 90, true);
  c.cluster = 64;
  c.held = 0;
  kjit::ops::validate_config(p, with_staged_iters(c, p), 90, true);
  c.cluster = 128;
  CHECK_THROWS_WITH_AS(kjit::ops::validate_config(p, c, 90, true),
                       doctest::Contains("cluster = 128 must be a power of two <= 64 (CTAs per "
                                         "group)"),
                       kjit::Error);
  c.cluster = 1;
  CHECK_THROWS_WITH_AS(kjit::ops::validate_config(p, c, 90, true),
                       doctest::Contains("coop with smem staging needs cluster >= 2"), kjit::Error);
  c.cluster = 16;
  c = with_staged_iters(c, p);
  CHECK_THROWS_WITH_AS(kjit::ops::validate_config(p, c, 80, true),
                       doctest::Contains("smem staging needs sm_90"), kjit::Error);
  GroupNormConfig plain = c;
  plain.family = F::Smem;
  plain.cluster = 32;  // a hardware cluster stays <= 16
  CHECK_THROWS_WITH_AS(kjit::ops::validate_config(p, plain, 90, true),
                       doctest::Contains("cluster = 32 must be a power of two <= 16"), kjit::Error);

  // Candidates: slices of 1024-8192 vectors, at most 8 CTAs per SM over the whole grid, and only
  // for tensors the device can hold (the 40 MB streaming bound).
  int staged_coop = 0;
  for (const GroupNormConfig& k : kjit::ops::group_norm_candidates(p, 90)) {
    if (k.family != F::SmemCoop) continue;
    ++staged_coop;
    kjit::ops::validate_config(p, k, 90, true);
    CHECK(k.cluster * 32 <= 8 * 132);
    CHECK(kjit::ops::group_norm_specs(p, k).at(0).instantiation().rfind("kjit::gn_coop_smem<", 0) ==
          0);
  }
  CHECK(staged_coop >= 8);
  const GroupNormProblem big =
      GroupNormProblem::from_shape({1, 256, 256, 256}, 32, kjit::DType::F32);  // 64 MB
  for (const GroupNormConfig& k : kjit::ops::group_norm_candidates(big, 90))
    CHECK(k.family != F::SmemCoop);
  for (const GroupNormConfig& k : kjit::ops::group_norm_candidates(p, 80)) CHECK_FALSE(k.staged());
}

// Every staged coop candidate of a few problems compiles: each dtype, partial last slices, a
// vector across two channels (S % 8 != 0), fp32 parameters with 16-bit data, no affine.
TEST_CASE("staged cooperative GroupNorm kernels compile with NVRTC for every dtype") {
  kjit_test::CompileProbe probe;
  int configs = 0;
  for (kjit::DType t : {kjit::DType::F32, kjit::DType::F16, kjit::DType::BF16}) {
    GroupNormProblem p = GroupNormProblem::from_shape({1, 9, 40000}, 3, t);
    p.param_dtype = kjit::DType::F32;
    p.has_weight = t != kjit::DType::F16;
    p.activation =
        t == kjit::DType::BF16 ? kjit::ops::Activation::None : kjit::ops::Activation::SiLU;
    for (const GroupNormConfig& c : kjit::ops::group_norm_candidates(p, 90)) {
      if (c.family != F::SmemCoop) continue;
      const kjit::Spec s = kjit::ops::group_norm_specs(p, c).at(0);
      CAPTURE(s.instantiation());
      CHECK(probe.compile(s, "sm_90").binary.size() > 0);
      ++configs;
    }
  }
  CHECK(configs >= 12);
  MESSAGE(probe.summary("staged cooperative GroupNorm kernels"));
}

TEST_CASE("pipelined GroupNorm configs: rules, candidates, kernels") {
  const GroupNormProblem p =
      GroupNormProblem::from_shape({1, 128, 512, 512}, 32, kjit::DType::F32);  // 262144 vectors
  GroupNormConfig c = kjit::ops::group_norm_heuristic(p, 90);
  REQUIRE(c.family == F::Pipe);
  kjit::ops::validate_config(p, c, 90, true);
  kjit::ops::validate_config(p, c, 70, true);
  CHECK_THROWS_WITH_AS(kjit::ops::validate_config(p, c, 61, true),
                       doctest::Contains("pipe needs sm_70"), kjit::Error);
  GroupNormConfig bad = c;
  bad.cluster = 2;
  CHECK_THROWS_WITH_AS(
      kjit::ops::validate_config(p, bad, 90, true),
      doctest::Contains("pipe takes chunks of threads * iters vectors a CTA at a time"),
      kjit::Error);
  bad = c;
  bad.team = 32;
  CHECK_THROWS_WITH_AS(
      kjit::ops::validate_config(p, bad, 90, true),
      doctest::Contains("pipe takes chunks of threads * iters vectors a CTA at a time"),
      kjit::Error);
  bad = c;
  bad.iters = 32;
  CHECK_THROWS_WITH_AS(kjit::ops::validate_config(p, bad, 90, true),
                       doctest::Contains("iters * vec = 128 held per thread exceeds 64"),
                       kjit::Error);
  bad = c;
  bad.threads = bad.team = 1024;
  CHECK_THROWS_WITH_AS(kjit::ops::validate_config(p, bad, 90, true),
                       doctest::Contains("pipe needs threads <= 512"), kjit::Error);
  // Two 32-bit tickets per chunk: 2^31 chunks of 32 elements is beyond them.
  GroupNormProblem many =
      GroupNormProblem::from_shape({int64_t{1} << 27, 16, 1024}, 1, kjit::DType::F32);
  GroupNormConfig small = c;
  small.threads = small.team = 32;
  small.iters = 1;
  CHECK_THROWS_WITH_AS(kjit::ops::validate_config(many, small, 90, true),
                       doctest::Contains("more than 2^30 (two 32-bit tickets per chunk)"),
                       kjit::Error);
  GroupNormProblem nhwc = p;
  nhwc.layout = Layout::NHWC;
  CHECK_THROWS_WITH_AS(kjit::ops::validate_config(nhwc, c, 90, true),
                       doctest::Contains("pipe needs NCHW"), kjit::Error);

  // Candidates: chunks of 256 or 512 threads holding 4 or 8 vectors, also for unaligned pointers
  // (scalar accesses) and 16-bit types; none for NHWC, groups under 32768 vectors, or sm_61.
  for (bool aligned : {true, false}) {
    for (kjit::DType t : {kjit::DType::F32, kjit::DType::BF16}) {
      const GroupNormProblem q = GroupNormProblem::from_shape({1, 128, 512, 512}, 32, t);
      int pipes = 0;
      for (const GroupNormConfig& k : kjit::ops::group_norm_candidates(q, 90, aligned)) {
        if (k.family != F::Pipe) continue;
        ++pipes;
        kjit::ops::validate_config(q, k, 90, aligned);
        CHECK(k.iters * k.vec <= 32);
        const std::vector<kjit::Spec> specs = kjit::ops::group_norm_specs(q, k);
        REQUIRE(specs.size() == 1u);
        CHECK(specs[0].instantiation().rfind("kjit::gn_pipe_fwd<", 0) == 0);
        CHECK(kjit::ops::group_norm_smem_bytes(q, k) == 0);
      }
      CHECK(pipes == (aligned && t == kjit::DType::BF16 ? 2 : 4));
    }
  }
  for (const GroupNormConfig& k : kjit::ops::group_norm_candidates(nhwc, 90))
    CHECK(k.family != F::Pipe);
  for (const GroupNormConfig& k : kjit::ops::group_norm_candidates(
           GroupNormProblem::from_shape({16, 512, 64, 64}, 32, kjit::DType::F32), 90))
    CHECK(k.family != F::Pipe);  // 32768 elements a group: 8192 vectors
}

// Every pipe candidate of a few problems compiles: each dtype, 16-byte vectors and scalar
// accesses, a short last chunk and a vector across two channels (S % 8 != 0), fp32 parameters
// with 16-bit data, no affine.
TEST_CASE("pipelined GroupNorm kernels compile with NVRTC for every dtype and access width") {
  kjit_test::CompileProbe probe;
  int configs = 0;
  for (kjit::DType t : {kjit::DType::F32, kjit::DType::F16, kjit::DType::BF16}) {
    for (bool aligned : {true, false}) {
      GroupNormProblem p = GroupNormProblem::from_shape({2, 40, 40001}, 5, t);
      p.param_dtype = t == kjit::DType::F32 ? t : kjit::DType::F32;
      p.has_weight = aligned;
      p.activation = aligned ? kjit::ops::Activation::SiLU : kjit::ops::Activation::None;
      for (const GroupNormConfig& c : kjit::ops::group_norm_candidates(p, 90, aligned)) {
        if (c.family != F::Pipe) continue;
        const kjit::Spec s = kjit::ops::group_norm_specs(p, c).at(0);
        CAPTURE(s.instantiation());
        CHECK(probe.compile(s, "sm_90").binary.size() > 0);
        ++configs;
      }
    }
  }
  CHECK(configs >= 16);
  MESSAGE(probe.summary("pipelined GroupNorm kernels"));
}

// The random specializations above reach split configs only now and then: every split candidate
// (the pair and the cooperative kernel) of a few fixed problems, in every dtype, with 16-byte
// vectors, scalar accesses, vectors across two channels (S % 8 != 0), fp32 parameters with 16-bit
// data, and no affine.
TEST_CASE("split GroupNorm kernels compile with NVRTC for every dtype and access width") {
  kjit_test::CompileProbe probe;
  int configs = 0, coop = 0;
  for (kjit::DType t : {kjit::DType::F32, kjit::DType::F16, kjit::DType::BF16}) {
    for (bool aligned : {true, false}) {
      GroupNormProblem p = GroupNormProblem::from_shape({2, 40, 5001}, 5, t);
      p.param_dtype = t == kjit::DType::F32 ? t : kjit::DType::F32;
      p.has_bias = aligned;
      p.activation = aligned ? kjit::ops::Activation::SiLU : kjit::ops::Activation::None;
      for (const GroupNormConfig& c : kjit::ops::group_norm_candidates(p, 90, aligned)) {
        if ((c.family != F::Split && c.family != F::SplitCoop) || c.threads != 256) continue;
        CHECK(c.vec == (aligned ? 16 / static_cast<int>(kjit::dtype_size(t)) : 1));
        const std::vector<kjit::Spec> specs = kjit::ops::group_norm_specs(p, c);
        CHECK(specs.size() == (c.family == F::SplitCoop ? 1u : 2u));
        for (const kjit::Spec& s : specs) {
          CAPTURE(s.instantiation());
          const std::string name = s.instantiation().substr(0, s.instantiation().find('<'));
          CHECK(name == (c.family == F::SplitCoop ? "kjit::gn_coop"
                         : &s == &specs.front()   ? "kjit::gn_partials"
                                                  : "kjit::gn_apply"));
          CHECK(probe.compile(s, "sm_90").binary.size() > 0);
        }
        ++configs;
        coop += c.family == F::SplitCoop;
      }
    }
  }
  CHECK(configs >= 24);
  CHECK(coop >= 12);
  MESSAGE(probe.summary("split GroupNorm kernels"));
}

TEST_CASE("GroupNorm templates compile with NVRTC for sm_90 over >= 100 random specializations") {
  kjit_test::CompileProbe probe;
  for (int i = 0; i < 110; ++i) {
    GroupNormProblem p = random_problem();
    const bool aligned = kjit_test::uniform(0, 4) != 0;
    auto cands = kjit::ops::group_norm_candidates(p, 90, aligned);
    // Every third pick from the shared-memory-staged kernel, and every third from the split
    // pair, when the problem has any.
    std::vector<GroupNormConfig> smem, split;
    for (const auto& c : cands) {
      if (c.staged()) smem.push_back(c);
      if (c.family == F::Split || c.family == F::SplitCoop) split.push_back(c);
    }
    if (i % 3 == 1 && !smem.empty()) cands = smem;
    if (i % 3 == 2 && !split.empty()) cands = split;
    const GroupNormConfig& c = cands[kjit_test::uniform(0, static_cast<int64_t>(cands.size()) - 1)];
    const std::vector<kjit::Spec> specs = kjit::ops::group_norm_specs(p, c);
    CHECK(specs.size() == (c.family == F::Split ? 2u : 1u));
    for (const kjit::Spec& s : specs) {
      CAPTURE(s.instantiation());
      CHECK(probe.compile(s, i % 10 == 0 ? "sm_80" : "sm_90").binary.size() > 0);
    }
  }
  MESSAGE(probe.summary("GroupNorm specializations"));
  CHECK(probe.count() >= 100);
}
