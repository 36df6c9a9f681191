// The tools' manifest code, in process: the op registry derives exactly what the runtime compiles,
// manifests and --problem strings parse, sizes and durations parse.
#include <doctest/doctest.h>

#include <set>

#include "kjit/kjit.hpp"
#include "kjit/op/registry.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/ops/layer_norm.hpp"
#include "kjit/ops/linear_gn_min.hpp"
#include "manifest.hpp"
#include "test_util.hpp"
#include "tool_util.hpp"

using namespace kjit::tools;
using kjit::ops::GroupNormConfig;
using kjit::ops::GroupNormProblem;
using kjit::ops::LinearGnMinProblem;
using nlohmann::json;

namespace {

std::set<std::string> names(const std::vector<kjit::Spec>& specs) {
  std::set<std::string> out;
  for (const auto& s : specs) out.insert(s.instantiation());
  return out;
}

// The field an entry's error names ("<none>" when it does not fail).
std::string error_field(const json& problem) {
  try {
    problem_specs(problem, OpContext{});
  } catch (const EntryError& e) {
    return e.field();
  }
  return "<none>";
}

// `j` with field `k` set to `v`.
json with(json j, const char* k, json v) {
  j[k] = std::move(v);
  return j;
}

}  // namespace

TEST_CASE("group_norm entries derive the runtime's specializations (random problems)") {
  using kjit_test::uniform;
  for (int iter = 0; iter < 40; ++iter) {
    const char* dtypes[] = {"f32", "f16", "bf16"};
    const std::string dtype = dtypes[uniform(0, 2)];
    const bool nhwc = uniform(0, 3) == 0;
    const int64_t groups = uniform(1, 64), cg = uniform(1, 16), N = uniform(1, 16);
    const int64_t H = uniform(1, 40), W = uniform(1, 40);
    const int64_t C = groups * cg;
    const auto act = static_cast<kjit::Activation>(uniform(0, 4));  // any of the five
    const bool affine = uniform(0, 1);
    json j = {{"op", "group_norm"},
              {"dtype", dtype},
              {"layout", nhwc ? "nhwc" : "nchw"},
              {"shape", nhwc ? json{N, H, W, C} : json{N, C, H, W}},
              {"groups", groups},
              {"activation", kjit::activation_name(act)},
              {"affine", affine}};
    GroupNormProblem p = GroupNormProblem::from_shape(
        nhwc ? std::vector<int64_t>{N, H, W, C} : std::vector<int64_t>{N, C, H, W}, groups,
        kjit::parse_dtype(dtype), nhwc ? kjit::ops::Layout::NHWC : kjit::ops::Layout::NCHW);
    p.activation = act;
    p.has_weight = p.has_bias = affine;
    INFO(j.dump(), " ", p.describe());
    for (int cc : {80, 90}) {
      OpContext ctx;
      ctx.target = kjit::Target::for_cc(cc);
      OpSpecs os = problem_specs(j, ctx);
      REQUIRE(os.specs.size() == 1);
      CHECK(os.specs[0].instantiation() ==
            group_norm_specs(p, group_norm_heuristic(p, cc, true)).at(0).instantiation());
      // The register-held family, or (sm_90, groups of >= 64 KB) the shared-memory-staged one.
      CHECK(os.specs[0].header() == (group_norm_heuristic(p, cc, true).staged()
                                         ? "kjit/group_norm_smem.cuh"
                                         : "kjit/group_norm.cuh"));

      ctx.unaligned = true;
      std::set<std::string> want = {
          group_norm_specs(p, group_norm_heuristic(p, cc, true)).at(0).instantiation(),
          group_norm_specs(p, group_norm_heuristic(p, cc, false)).at(0).instantiation()};
      CHECK(names(problem_specs(j, ctx).specs) == want);

      ctx.unaligned = false;
      ctx.all_candidates = true;
      want.clear();
      for (const auto& c : group_norm_candidates(p, cc, true))
        for (const kjit::Spec& spec : group_norm_specs(p, c)) want.insert(spec.instantiation());
      const auto all = problem_specs(j, ctx).specs;
      CHECK(names(all) == want);
      CHECK(all.size() == want.size());  // no duplicates
      CHECK(all[0].instantiation() ==    // the heuristic's pick first
            group_norm_specs(p, group_norm_heuristic(p, cc, true)).at(0).instantiation());
    }
  }
}

// A few large groups run as two kernels with a workspace; a capture on a stream without one runs
// the one-kernel fallback, so precompiling covers all three.
TEST_CASE("a split group_norm entry derives both kernels and the capture fallback") {
  const json j = {{"op", "group_norm"}, {"shape", {1, 64, 256, 256}}, {"groups", 16}};
  const GroupNormProblem p = GroupNormProblem::from_shape({1, 64, 256, 256}, 16, kjit::DType::F32);
  OpContext ctx;
  ctx.target = kjit::Target::for_cc(90);
  const GroupNormConfig h = group_norm_heuristic(p, 90, true);
  REQUIRE(h.family == kjit::ops::GroupNormFamily::Split);
  const GroupNormConfig fb = group_norm_capture_fallback(p, 90, true);
  CHECK_FALSE(fb.needs_workspace());
  std::set<std::string> want;
  for (const auto& c : {h, fb})
    for (const kjit::Spec& s : group_norm_specs(p, c)) want.insert(s.instantiation());
  CHECK(want.size() == 3);
  CHECK(names(problem_specs(j, ctx).specs) == want);
}

// 32 such groups in 16-bit: one cooperative kernel, with the same capture fallback rule.
TEST_CASE("a cooperative group_norm entry derives its kernel and the capture fallback") {
  const json j = {
      {"op", "group_norm"}, {"shape", {1, 128, 256, 256}}, {"groups", 32}, {"dtype", "bf16"}};
  const GroupNormProblem p =
      GroupNormProblem::from_shape({1, 128, 256, 256}, 32, kjit::DType::BF16);
  OpContext ctx;
  ctx.target = kjit::Target::for_cc(90);
  const GroupNormConfig h = group_norm_heuristic(p, 90, true);
  REQUIRE(h.family == kjit::ops::GroupNormFamily::SplitCoop);
  std::set<std::string> want;
  for (const auto& c : {h, group_norm_capture_fallback(p, 90, true)})
    for (const kjit::Spec& s : group_norm_specs(p, c)) want.insert(s.instantiation());
  CHECK(want.size() == 2);
  CHECK(names(problem_specs(j, ctx).specs) == want);
}

TEST_CASE("an empty tensor needs no kernel; bad entries name their field") {
  CHECK(problem_specs(json{{"op", "group_norm"}, {"shape", {0, 64, 8, 8}}, {"groups", 8}}, {})
            .specs.empty());
  const json ok = {{"op", "group_norm"}, {"shape", {2, 64, 8, 8}}, {"groups", 8}};
  CHECK(error_field(ok) == "<none>");
  CHECK(error_field(with(ok, "groups", 7)) == "groups");  // C % G != 0
  CHECK(error_field(with(ok, "groups", 0)) == "groups");
  CHECK(error_field(with(ok, "groups", "8")) == "groups");
  CHECK(error_field(with(ok, "shape", {2})) == "shape");
  CHECK(error_field(with(ok, "shape", {2, -64, 8})) == "shape");
  CHECK(error_field(with(ok, "shape", "2x64")) == "shape");
  CHECK(error_field(with(ok, "dtype", "f64")) == "dtype");
  CHECK(error_field(with(ok, "param_dtype", 3)) == "param_dtype");
  CHECK(error_field(with(ok, "layout", "ncwh")) == "layout");
  CHECK(error_field(with(ok, "activation", "swish")) == "activation");
  CHECK(error_field(with(ok, "activation", 1)) == "activation");
  CHECK(error_field(with(ok, "affine", 1)) == "affine");
  CHECK(error_field(with(ok, "groupz", 8)) == "groupz");
  CHECK(error_field(with(ok, "op", "linear_gn_minimum")) == "op");
  CHECK(error_field(with(ok, "op", 5)) == "op");
  json no_groups = ok;
  no_groups.erase("groups");
  CHECK(error_field(no_groups) == "groups");
  CHECK(error_field(json{{"shape", {2, 64}}}) == "op");
  CHECK(error_field(json::array()) == "");
}

TEST_CASE("linear_gn_min entries derive the runtime's specializations (random problems)") {
  using kjit_test::uniform;
  for (int iter = 0; iter < 40; ++iter) {
    const int64_t G = uniform(1, 1024), cg = uniform(1, 32);
    const int64_t Ms[] = {1, 3, 7, 64, 100, 1024, 4096};
    LinearGnMinProblem p;
    p.M = Ms[uniform(0, 6)];
    p.K = uniform(1, 8192);
    p.N = G * cg;
    p.G = G;
    const char* precs[] = {"fp32", "tf32", "bf16-inputs"};
    const int pr = static_cast<int>(uniform(0, 2));
    p.precision = pr == 0   ? kjit::ops::Precision::Fp32
                  : pr == 1 ? kjit::ops::Precision::Tf32
                            : kjit::ops::Precision::Bf16Inputs;
    json j = {{"op", "linear_gn_min"}, {"M", p.M}, {"K", p.K}, {"N", p.N}, {"groups", p.G}};
    if (pr == 2)
      j["dtype"] = "bf16";  // implies precision bf16-inputs
    else
      j["precision"] = precs[pr];
    INFO(j.dump(), " ", p.describe());
    for (int cc : {80, 90}) {
      for (int sms : {132, 114, 1}) {
        OpContext ctx;
        ctx.target = kjit::Target::for_cc(cc);
        ctx.target.sm_count = sms;
        OpSpecs os = problem_specs(j, ctx);
        const auto h = kjit::ops::gn_min_heuristic(p, cc, sms, true);
        // The fused kernel, then the broadcast kernel when the config splits.
        REQUIRE(os.specs.size() == (h.split ? 2u : 1u));
        CHECK(os.specs[0].instantiation() == gn_min_spec(p, h).instantiation());
        for (const auto& s : os.specs) CHECK(s.header() == "kjit/gn_min.cuh");
        CHECK(os.describe == "linear_gn_min " + p.describe());

        ctx.unaligned = true;
        std::set<std::string> want;
        for (bool aligned : {true, false})
          for (const auto& s : gn_min_specs(p, kjit::ops::gn_min_heuristic(p, cc, sms, aligned)))
            want.insert(s.instantiation());
        CHECK(names(problem_specs(j, ctx).specs) == want);

        ctx.unaligned = false;
        ctx.all_candidates = true;
        want.clear();
        // Autotuning also tries the GEMM without the bias epilogue (the kernel adds it).
        for (auto c : kjit::ops::gn_min_candidates(p, cc, sms, true))
          for (bool lb : {false, true}) {
            c.linear_bias = lb;
            for (const auto& s : gn_min_specs(p, c)) want.insert(s.instantiation());
          }
        const auto all = problem_specs(j, ctx).specs;
        CHECK(names(all) == want);
        CHECK(all.size() == want.size());  // no duplicates
        CHECK(all[0].instantiation() == gn_min_spec(p, h).instantiation());
      }
    }
  }
}

TEST_CASE("bad linear_gn_min entries name their field") {
  const json ok = {{"op", "linear_gn_min"}, {"dtype", "f32"}, {"M", 1024}, {"K", 8192}, {"N", 8192},
                   {"groups", 512}};
  CHECK(error_field(ok) == "<none>");
  CHECK(error_field(with(ok, "groups", 500)) == "groups");  // N % G != 0
  CHECK(error_field(with(ok, "groups", 0)) == "groups");
  CHECK(error_field(with(ok, "M", 0)) == "M");
  CHECK(error_field(with(ok, "M", "1024")) == "M");
  CHECK(error_field(with(ok, "K", -1)) == "K");
  CHECK(error_field(with(ok, "K", int64_t{1} << 40)) == "K");  // cuBLASLt's int range
  CHECK(error_field(with(ok, "N", int64_t{1} << 25)) == "N");  // N > 2^24 (divisible by G)
  CHECK(error_field(with(ok, "dtype", "f16")) == "dtype");
  CHECK(error_field(with(ok, "precision", "fp64")) == "precision");
  CHECK(error_field(with(ok, "precision", "bf16-inputs")) == "precision");  // with dtype f32
  CHECK(error_field(with(ok, "precision", "tf32")) == "<none>");
  CHECK(error_field(with(ok, "dtype", "bf16")) == "<none>");
  CHECK(error_field(with(ok, "G", 512)) == "G");  // the field is "groups" (g=/G= in the short form)
  CHECK(error_field(with(ok, "bias_add", "later")) == "bias_add");
  CHECK(error_field(with(ok, "bias_add", "Kernel")) == "<none>");
  // fp32x3's kernel adds the bias after undoing the split's scales: no epilogue.
  CHECK(error_field(with(with(ok, "precision", "fp32x3"), "bias_add", "epilogue")) == "bias_add");
  CHECK(error_field(with(with(ok, "precision", "fp32x3"), "bias_add", "kernel")) == "<none>");
  json no_k = ok;
  no_k.erase("K");
  CHECK(error_field(no_k) == "K");
  try {
    problem_specs(with(ok, "groups", 500), OpContext{});
    FAIL("expected an EntryError");
  } catch (const EntryError& e) {
    CHECK(std::string(e.what()) == "N = 8192 is not divisible by groups = 500");
  }
}

TEST_CASE("linear_gn_min bias_add picks the kernels that add the Linear's bias, or not") {
  const json seed = {
      {"op", "linear_gn_min"}, {"M", 1024}, {"K", 8192}, {"N", 8192}, {"groups", 512}};
  kjit::ops::LinearGnMinProblem p;
  p.M = 1024;
  p.K = 8192;
  p.N = 8192;
  p.G = 512;
  OpContext ctx;
  ctx.target = kjit::Target::for_cc(90);
  ctx.target.sm_count = 132;
  auto specs_of = [&](kjit::ops::GnMinConfig c, bool lb) {
    c.linear_bias = lb;
    return names(gn_min_specs(p, c));
  };
  const auto h = kjit::ops::gn_min_heuristic(p, 90, 132, true);
  // auto and epilogue: what a call compiles by default (cuBLASLt's epilogue adds the bias).
  CHECK(names(problem_specs(seed, ctx).specs) == specs_of(h, false));
  CHECK(names(problem_specs(with(seed, "bias_add", "epilogue"), ctx).specs) == specs_of(h, false));
  // kernel: the row kernel adds it (the broadcast kernel is the same either way).
  const auto k = names(problem_specs(with(seed, "bias_add", "kernel"), ctx).specs);
  CHECK(k == specs_of(h, true));
  CHECK(k != specs_of(h, false));
  // Every candidate: auto tries both variants, epilogue and kernel one each.
  ctx.all_candidates = true;
  std::set<std::string> both, without, with_lb;
  for (const auto& c : kjit::ops::gn_min_candidates(p, 90, 132, true)) {
    for (const auto& s : specs_of(c, false)) without.insert(s);
    for (const auto& s : specs_of(c, true)) with_lb.insert(s);
  }
  both = without;
  both.insert(with_lb.begin(), with_lb.end());
  CHECK(names(problem_specs(seed, ctx).specs) == both);
  CHECK(names(problem_specs(with(seed, "bias_add", "epilogue"), ctx).specs) == without);
  CHECK(names(problem_specs(with(seed, "bias_add", "kernel"), ctx).specs) == with_lb);
}

TEST_CASE("manifests: object or array, optional archs, default manifest holds known ops") {
  Manifest m =
      parse_manifest(R"({"problems": [{"op": "group_norm"}, 3], "archs": ["sm_80"]})", "x.json");
  REQUIRE(m.problems.size() == 2);
  CHECK(m.problems[1].name() == "x.json: problems[1]");
  CHECK(m.archs == std::vector<std::string>{"sm_80"});
  CHECK(parse_manifest(R"([{"op": "group_norm"}])", "a.json").problems.size() == 1);
  CHECK_THROWS_AS(parse_manifest("{", "bad.json"), ManifestError);
  CHECK_THROWS_AS(parse_manifest(R"({"problem": []})", "bad.json"), ManifestError);
  CHECK_THROWS_AS(parse_manifest(R"({"problems": {}})", "bad.json"), ManifestError);
  CHECK_THROWS_AS(parse_manifest(R"({"problems": [], "archs": "sm_90"})", "bad.json"),
                  ManifestError);
  CHECK_THROWS_AS(load_manifest_file("/nonexistent/m.json"), ManifestError);
  CHECK_THROWS_WITH_AS(load_manifest_file("/tmp"), doctest::Contains("is a directory"),
                       ManifestError);
  // Nesting deep enough to overflow the stack when copied is refused at parse time.
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  CHECK_THROWS_WITH_AS(parse_manifest(deep, "deep.json"), doctest::Contains("nested deeper"),
                       ManifestError);
  CHECK_THROWS_WITH_AS(parse_problem_arg(R"({"op": "group_norm", "affine": )" +
                                         std::string(100, '[') + std::string(100, ']') + "}"),
                       doctest::Contains("nested deeper"), EntryError);

  Manifest d = default_manifest();
  REQUIRE(d.problems.size() == 2);  // the two seed workloads
  CHECK(d.problems[0].problem["op"] == "group_norm");
  CHECK(d.problems[1].problem["op"] == "linear_gn_min");
  for (const auto& pe : d.problems) {
    CHECK(kjit::op::find_op(pe.problem["op"].get<std::string>()).name == pe.problem["op"]);
    CHECK_FALSE(problem_specs(pe.problem, OpContext{}).specs.empty());
  }
}

// Every kjit::Activation by its name: a gelu problem compiles GroupNorm with GELU's policy, the
// runtime's own specialization; a name outside the list fails its problem, naming it.
TEST_CASE("group_norm entries take every activation by name; a bad name is the activation's") {
  const json j = {{"op", "group_norm"},
                  {"dtype", "bf16"},
                  {"shape", {2, 64, 8, 8}},
                  {"groups", 8},
                  {"activation", "GELU"}};
  GroupNormProblem p = GroupNormProblem::from_shape({2, 64, 8, 8}, 8, kjit::DType::BF16);
  p.activation = kjit::Activation::GeluErf;
  OpContext ctx;
  ctx.target = kjit::Target::for_cc(90);
  const OpSpecs os = problem_specs(j, ctx);
  REQUIRE(os.specs.size() == 1);
  CHECK(os.specs[0].instantiation() ==
        group_norm_specs(p, group_norm_heuristic(p, 90, true)).at(0).instantiation());
  CHECK(os.specs[0].instantiation().find("kjit::act::GeluErf") != std::string::npos);
  CHECK(os.describe.find(" gelu ") != std::string::npos);
  for (const char* name : {"none", "silu", "gelu_tanh", "gelu_erf", "relu"})
    CHECK(problem_specs(with(j, "activation", name), ctx).specs.size() == 1);
  try {
    problem_specs(with(j, "activation", "swish"), ctx);
    FAIL("activation 'swish' accepted");
  } catch (const EntryError& e) {
    CHECK(e.field() == "activation");
    CHECK(std::string(e.what()).find("'swish'") != std::string::npos);
    CHECK(std::string(e.what()).find("gelu_tanh") != std::string::npos);
  }
  CHECK(parse_problem_arg("group_norm 2x64x8x8 g=8 GELU_TANH")["activation"] == "gelu_tanh");
  CHECK(parse_problem_arg("group_norm 2x64x8x8 g=8 gelu_erf")["activation"] == "gelu");
  CHECK(parse_problem_arg("group_norm 2x64x8x8 g=8 relu")["activation"] == "relu");
  CHECK_THROWS_AS(parse_problem_arg("group_norm 2x64x8x8 g=8 swish"), EntryError);
}

TEST_CASE("--problem short form") {
  json j = parse_problem_arg("group_norm bf16 NHWC 4x9x9x32 g=4 none noaffine eps=1");
  CHECK(j == json{{"op", "group_norm"},
                  {"dtype", "bf16"},
                  {"layout", "nhwc"},
                  {"shape", {4, 9, 9, 32}},
                  {"groups", 4},
                  {"activation", "none"},
                  {"affine", false},
                  {"eps", 1}});
  CHECK(parse_problem_arg("group_norm shape=8x256 groups=32 affine=true")["affine"] == true);
  CHECK(parse_problem_arg(R"( {"op": "x", "M": 3} )") == json{{"op", "x"}, {"M", 3}});
  CHECK(parse_problem_arg("linear_gn_min f32 M=1024 K=8192 N=8192 G=512") ==
        json{{"op", "linear_gn_min"},
             {"dtype", "f32"},
             {"M", 1024},
             {"K", 8192},
             {"N", 8192},
             {"groups", 512}});
  CHECK(names(problem_specs(parse_problem_arg("linear_gn_min f32 M=1024 K=8192 N=8192 G=512"),
                            OpContext{})
                  .specs) ==
        names(problem_specs(default_manifest().problems.at(1).problem, OpContext{}).specs));
  CHECK_THROWS_AS(parse_problem_arg("group_norm 8x256 wat"), EntryError);
  CHECK_THROWS_AS(parse_problem_arg("group_norm f32 f16"), EntryError);  // dtype twice
  CHECK_THROWS_AS(parse_problem_arg("{nope"), EntryError);
  CHECK_THROWS_AS(parse_problem_arg("  "), EntryError);
}

TEST_CASE("targets, sizes and durations") {
  CHECK(parse_target("sm_90").cc == 90);
  CHECK(parse_target("sm_90").sm_count == kjit::Target::kDefaultSmCount);
  CHECK(parse_target("sm_90:114").sm_count == 114);  // an H100 PCIe
  CHECK(parse_target("sm_90a:114").cc == 90);
  CHECK(parse_target("sm_90:100000").sm_count == 100000);  // --sm-count's limit
  for (const char* bad :
       {"sm_90:", "sm_90:0", "sm_90:x", "sm_90:-4", "sm_90:100001", "sm_90:1234567"}) {
    CHECK_KJIT_ERROR(parse_target(bad), kjit::Errc::InvalidArgument);
    try {
      parse_target(bad);
    } catch (const kjit::Error& e) {  // the rule the value breaks, not a rule it keeps
      CHECK(std::string(e.what()).find("an integer in [1, 100000]") != std::string::npos);
    }
  }
  CHECK(parse_target("sm_90a").cc == 90);
  CHECK(parse_target("sm_80").arch == "sm_80");
  CHECK(parse_target("compute_90").cc == 90);
  CHECK_KJIT_ERROR(parse_target("sm_1"), kjit::Errc::Unsupported);
  CHECK_KJIT_ERROR(parse_target("hopper"), kjit::Errc::InvalidArgument);
  CHECK_KJIT_ERROR(parse_target("sm_90x"), kjit::Errc::InvalidArgument);
  CHECK(parse_target("compute_90a").cc == 90);  // as the runtime and NVRTC take it
  // The 'a' variants start at sm_90 and the 'f' ones at sm_100: refused before any compile.
  CHECK_THROWS_WITH_AS(parse_target("sm_80a"), doctest::Contains("only for sm_90 and newer"),
                       kjit::Error);
  CHECK_KJIT_ERROR(parse_target("sm_90f"), kjit::Errc::Unsupported);
  CHECK_KJIT_ERROR(parse_target("sm_090"), kjit::Errc::InvalidArgument);  // one spelling per arch

  CHECK(parse_size("123") == 123u);
  CHECK(parse_size("64K") == 64u * 1024);
  CHECK(parse_size("64KiB") == 64u * 1024);
  CHECK(parse_size("2m") == 2u << 20);
  CHECK(parse_size("4G") == 4ull << 30);
  CHECK(parse_size("1T") == 1ull << 40);
  CHECK(parse_size("100B") == 100u);
  CHECK_FALSE(parse_size(""));
  CHECK_FALSE(parse_size("G"));
  CHECK_FALSE(parse_size("12Q"));
  CHECK_FALSE(parse_size("-1"));
  CHECK_FALSE(parse_size("99999999999999999999999"));
  CHECK_FALSE(parse_size("20000000000T"));
  // One implementation with the cache's KJIT_CACHE_MAX_SIZE (kjit::cache::parse_size).
  CHECK(kjit::cache::parse_size("64Ki") == 64u * 1024);
  CHECK(kjit::cache::parse_size("3kb") == 3u * 1024);
  CHECK(kjit::cache::parse_size("100b") == 100u);
  CHECK(kjit::cache::parse_size("18446744073709551615") == UINT64_MAX);
  CHECK(kjit::cache::parse_size("000000000000000000000012") == 12u);
  CHECK(kjit::cache::parse_size("16777215T") == 16777215ull << 40);
  CHECK_FALSE(kjit::cache::parse_size("18446744073709551616"));
  CHECK_FALSE(kjit::cache::parse_size("16777216T"));
  for (const char* bad : {"1KiBB", "1BB", "1Bi", "1iB", "1 K", "1.5G", "1E", "+1", "K1"})
    CHECK_MESSAGE(!kjit::cache::parse_size(bad), bad);

  CHECK(parse_duration("90") == std::chrono::seconds(90));
  CHECK(parse_duration("90s") == std::chrono::seconds(90));
  CHECK(parse_duration("90m") == std::chrono::seconds(90 * 60));
  CHECK(parse_duration("12h") == std::chrono::seconds(12 * 3600));
  CHECK(parse_duration("30d") == std::chrono::seconds(30 * 86400));
  CHECK(parse_duration("2w") == std::chrono::seconds(14 * 86400));
  CHECK_FALSE(parse_duration("d"));
  CHECK_FALSE(parse_duration("3y"));
  CHECK_FALSE(parse_duration("99999999999d"));

  CHECK(format_bytes(812) == "812 B");
  CHECK(format_bytes(4200) == "4.1 KiB");
  CHECK(format_age(45) == "45s");
  CHECK(format_age(3 * 86400) == "3d");
}

// The error a problem of manifest text `problem` gives: "<field>: <message>", "<none>" when it
// passes. parse_manifest must not throw for it: a bad value fails its problem, not the file.
std::string manifest_problem_error(const std::string& problem) {
  const Manifest m = parse_manifest(R"({"problems": [)" + problem + "]}", "m.json");
  REQUIRE(m.problems.size() == 1);
  try {
    problem_specs(m.problems[0].problem, OpContext{});
  } catch (const EntryError& e) {
    return e.field() + ": " + e.what();
  }
  return "<none>";
}

TEST_CASE("every bad value in a manifest fails its own problem, naming the value and the rule") {
  const std::string gn = R"("op": "group_norm", "shape": [2, 64, 8, 8])";
  const std::string lgm = R"("op": "linear_gn_min", "K": 64, "N": 256, "groups": 16)";
  const std::vector<std::pair<std::string, std::string>> cases = {
      // Numbers no double holds: nlohmann refused the whole text for them.
      {"{" + gn + R"(, "groups": 1e400})", "groups: 1e400 is out of range"},
      {"{" + gn + R"(, "groups": -1e400})", "groups: -1e400 is out of range"},
      {"{" + gn + R"(, "groups": 8, "affine": 1E+999})", "affine: 1E+999 is out of range"},
      {"{" + gn + ", \"groups\": " + std::string(400, '9') + "}", "groups: 999"},
      {"{" + lgm + R"(, "M": [1e400]})", "M: 1e400 is out of range"},
      {"1e400", ": 1e400 is out of range"},
      // Integers past int64_t, and non-integers, where an integer is needed.
      {"{" + gn + R"(, "groups": 18446744073709551615})",
       "groups: 18446744073709551615 is out of range (an integer here is at most 2^63-1)"},
      {"{" + gn + R"(, "groups": 1e20})", "groups: 1e+20 is out of range"},
      {"{" + gn + R"(, "groups": 8.5})", "groups: must be an integer, got 8.5"},
      {"{" + gn + R"(, "groups": 8.0})", "groups: must be an integer, got 8.0"},
      {"{" + gn + R"(, "groups": 1e-400})", "groups: must be an integer, got 0.0"},
      {"{" + lgm + R"(, "M": "64"})", "M: must be an integer, got \"64\""},
      {"{" + lgm + R"(, "M": null})", "M: must be an integer, got null"},
      {"{" + lgm + R"(, "M": true})", "M: must be an integer, got true"},
      // Negative values.
      {"{" + gn + R"(, "groups": -8})", "groups: must be > 0, got -8"},
      {R"({"op": "group_norm", "shape": [2, -64, 8, 8], "groups": 8})", "shape[1] = -64"},
      {"{" + lgm + R"(, "M": -9223372036854775808})", "M: must be >= 1"},
      // Wrong JSON types, and a key given twice (also a whole-file error before).
      {"{" + gn + R"(, "groups": {"n": 8}})", "groups: must be an integer, got {\"n\":8}"},
      {"{" + gn + R"(, "groups": 8, "layout": ["nchw"]})", "layout: must be a string"},
      {"{" + gn + R"(, "groups": 8, "groups": 4})", ": key 'groups' appears twice"},
      {"{" + gn + R"(, "groups": 8, "dtype": {"a": 1, "a": 2}})",
       "dtype: key 'a' appears twice in one object"},
      {R"("group_norm")", ": must be a JSON object"},
  };
  for (const auto& c : cases) {
    // Not a structured binding: clang 14 cannot capture one in doctest's CAPTURE lambda.
    const std::string& problem = c.first;
    const std::string& error = c.second;
    CAPTURE(problem);
    std::string got;
    REQUIRE_NOTHROW(got = manifest_problem_error(problem));
    CHECK_MESSAGE(got.find(error) != std::string::npos, got);
  }
  // A file-level value that is out of range is still a file error, and names the file.
  CHECK_THROWS_WITH_AS(parse_manifest(R"({"problems": [], "archs": [1e400]})", "x.json"),
                       doctest::Contains("x.json: \"archs\": 1e400 is out of range"),
                       ManifestError);
  CHECK_THROWS_WITH_AS(parse_manifest(R"({"problems": [], "problems": []})", "x.json"),
                       doctest::Contains("x.json: key 'problems' appears twice"), ManifestError);
  // NaN and Infinity are not JSON: the file does not parse (a --problem fails alone).
  CHECK_THROWS_WITH_AS(parse_manifest(R"([{"groups": NaN}])", "x.json"),
                       doctest::Contains("not valid JSON"), ManifestError);
  // Strict parsing (kjit-bench's shape files) reports an out-of-range number as a JsonError.
  CHECK_THROWS_WITH_AS(parse_json("[1e400]"), doctest::Contains("out of range"), JsonError);
  // Only marked values are marks: a number-like string is a string.
  CHECK_FALSE(json_mark(parse_json(R"("1e400")", BadValues::Mark)));
  CHECK(parse_json(R"({"a": "1e400", "b": 1e400})", BadValues::Mark)["a"] == "1e400");
}

TEST_CASE("--problem short form: numbers as JSON reads them, bad values fail the problem") {
  auto error_of = [](const std::string& arg) {
    try {
      problem_specs(parse_problem_arg(arg), OpContext{});
    } catch (const EntryError& e) {
      return e.field() + ": " + e.what();
    }
    return std::string("<none>");
  };
  CHECK(error_of("group_norm 2x64x8x8 g=8") == "<none>");
  CHECK(error_of("group_norm 2x64x8x8 g=1e400").find("groups: 1e400 is out of range") == 0);
  CHECK(error_of("group_norm 2x64x8x8 g=99999999999999999999").find("groups: 1e+20 is out") == 0);
  CHECK(error_of("group_norm 2x64x8x8 g=9223372036854775808").find("is out of range") !=
        std::string::npos);
  CHECK(error_of("group_norm 2x64x8x8 g=2.5") == "groups: must be an integer, got 2.5");
  CHECK(error_of("group_norm 2x64x8x8 g=nan") == "groups: must be an integer, got \"nan\"");
  CHECK(error_of("group_norm 2x-64x8x8 g=8").find("shape[1] = -64 is negative") !=
        std::string::npos);
  CHECK(error_of("group_norm 2x99999999999999999999 g=8") ==
        "shape: dimension 99999999999999999999 of 2x99999999999999999999 is out of range (at "
        "most 2^63-1)");
  CHECK(error_of("group_norm 2x6.4 g=8") == "shape: dimension '6.4' of 2x6.4 is not an integer");
  CHECK(error_of("group_norm 2x64x8x8 g=8 shape=2x64") ==
        "shape: given twice (token "
        "'shape=2x64', had [2,64,8,8])");
  // Bytes that are not UTF-8 are named, not turned into nlohmann's type_error.
  CHECK(error_of("group_norm 2x64x8x8 g=8 layout=\xff layout=x").find("layout: given twice") == 0);
  CHECK(error_of("group_norm 2x64x8x8 g=\xff").find("groups: must be an integer, got \"") == 0);
  CHECK(error_of(R"({"op": "group_norm", "shape": [2, 64, 8, 8], "groups": 1e400})")
            .find("groups: 1e400 is out of range") == 0);
}

TEST_CASE(
    "layer_norm and rms_norm entries derive the runtime's specializations (random problems)") {
  using kjit::ops::LayerNormProblem;
  for (int i = 0; i < 200; ++i) {
    const bool rms = kjit_test::uniform(0, 1) == 1;
    const kjit::DType dt = std::vector<kjit::DType>{kjit::DType::F32, kjit::DType::F16,
                                                    kjit::DType::BF16}[kjit_test::uniform(0, 2)];
    const int64_t rows = kjit_test::uniform(0, 70000), width = kjit_test::uniform(1, 1 << 20);
    const bool residual = kjit_test::uniform(0, 1) == 1;
    json j = {{"op", rms ? "rms_norm" : "layer_norm"},
              {"dtype", kjit::dtype_name(dt)},
              {"rows", rows},
              {"width", width},
              {"residual", residual}};
    LayerNormProblem p = rms ? LayerNormProblem::rms_norm(rows, width, dt)
                             : LayerNormProblem::layer_norm(rows, width, dt);
    p.residual = residual;
    OpContext ctx;
    ctx.unaligned = kjit_test::uniform(0, 1) == 1;
    ctx.target = kjit::Target::for_arch(kjit_test::uniform(0, 1) ? "sm_90" : "sm_80");
    CAPTURE(j.dump());
    std::set<std::string> want;
    for (bool aligned : {true, false})
      if (aligned || ctx.unaligned)
        for (const auto& s : kjit::ops::layer_norm_specs_for(p, ctx.target, {}, aligned))
          want.insert(s.instantiation());
    const OpSpecs os = problem_specs(j, ctx);
    CHECK(names(os.specs) == want);
    CHECK(os.describe == p.describe());  // the op named once
  }
  // The short form reaches the registry's parser as well; a field RMSNorm does not have fails.
  CHECK_FALSE(problem_specs(parse_problem_arg("layer_norm bf16 rows=64 width=4096 gelu"), {})
                  .specs.empty());
  CHECK_THROWS_WITH_AS(problem_specs(parse_problem_arg("rms_norm rows=4 width=8 bias=true"), {}),
                       doctest::Contains("unknown field for op rms_norm"), EntryError);
}

// A manifest entry's "config" pins it: exactly that config's kernels, as the runtime loads for a
// call given that config; a text that is no config fails the entry, naming "config".
TEST_CASE("a manifest entry with a config derives that config's kernels") {
  const kjit::Target t = kjit::Target::for_arch("sm_90");
  const kjit::ops::LayerNormProblem p =
      kjit::ops::LayerNormProblem::layer_norm(1, 65536, kjit::DType::F32);
  const auto cands = kjit::ops::layer_norm_candidates(p, t, true);
  REQUIRE(cands.size() > 2);
  const json base = {{"op", "layer_norm"}, {"rows", 1}, {"width", 65536}};
  OpContext ctx{t, true, false, false};
  const auto plain = problem_specs(base, ctx);
  for (const kjit::ops::LayerNormConfig& c : cands) {
    CAPTURE(c.describe());
    kjit::ops::LayerNormOptions opt;
    opt.config = c;
    const auto got = problem_specs(with(base, "config", c.describe()), ctx);
    CHECK(names(got.specs) == names(kjit::ops::layer_norm_specs_for(p, t, opt, true)));
  }
  CHECK(names(problem_specs(with(base, "config", cands.back().describe()), ctx).specs) !=
        names(plain.specs));
  CHECK(error_field(with(base, "config", "threads=256")) == "config");
  CHECK(error_field(with(base, "config", 256)) == "config");
  // A config the op would refuse is refused here, naming its field: never compiled.
  CHECK(error_field(with(base, "config", "threads=33 team=7 vec=3 iters=1 cluster=1")) ==
        "threads");
  const json gn = {{"op", "group_norm"}, {"shape", {2, 64, 16, 16}}, {"groups", 8}};
  CHECK(error_field(
            with(gn, "config", "threads=256 team=256 vec=4 iters=1 cluster=16 smem held=60")) !=
        "<none>");
  const json lgm = {{"op", "linear_gn_min"}, {"M", 64}, {"K", 32}, {"N", 1024}, {"groups", 32}};
  CHECK(error_field(with(lgm, "config", "threads=256 slice=5 sub=7 seq=1 vec=3")) != "<none>");
  // linear-bias settles who adds the Linear's bias; it cannot say the opposite of bias_add.
  json epi = with(lgm, "bias_add", "epilogue");
  CHECK(error_field(with(epi, "config", "threads=256 slice=256 sub=8 seq=1 vec=4 linear-bias")) ==
        "config");
}
