// LayerNorm / RMSNorm without a GPU: validation names the field, the heuristic's configs are ones
// the kernels accept, specs_for is deterministic, and random specializations compile with NVRTC.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "compile_probe.hpp"
#include "kjit/kjit.hpp"
#include "kjit/ops/layer_norm.hpp"
#include "test_util.hpp"

using kjit::DType;
using kjit::ops::Activation;
using kjit::ops::LayerNormConfig;
using kjit::ops::LayerNormProblem;
using kjit::ops::NormKind;

namespace {

// The field an InvalidArgument names, or "<no error>" / "<other error>".
template <class F>
std::string field_of(F&& f) {
  try {
    f();
  } catch (const kjit::Error& e) {
    return e.code() == kjit::Errc::InvalidArgument ? e.field() : "<other error>";
  }
  return "<no error>";
}

LayerNormProblem random_problem() {
  using kjit_test::uniform;
  const DType types[] = {DType::F32, DType::F16, DType::BF16};
  const Activation acts[] = {Activation::None, Activation::SiLU, Activation::GeluTanh,
                             Activation::GeluErf, Activation::ReLU};
  LayerNormProblem p;
  p.kind = uniform(0, 1) ? NormKind::RMSNorm : NormKind::LayerNorm;
  p.dtype = types[uniform(0, 2)];
  p.param_dtype = uniform(0, 2) == 0 ? DType::F32 : p.dtype;
  // Widths across the regimes: a thread per row, sub-warps, warps, CTAs, clusters, streaming.
  const int64_t widths[] = {1,    3,    8,    96,   128,   333,   768,    1024,
                            1032, 4096, 5000, 8192, 16384, 65536, 131072, 1 << 20};
  p.width = widths[uniform(0, 15)];
  p.rows = uniform(0, 3) == 0 ? 1 : uniform(1, 40000);
  p.has_weight = uniform(0, 3) != 0;
  p.has_bias = p.kind == NormKind::LayerNorm && uniform(0, 3) != 0;
  p.residual = uniform(0, 2) == 0;
  p.activation = acts[uniform(0, 4)];
  return p;
}

// A config holds every element of a row exactly once (or streams it) within the kernels' limits.
void check_config(const LayerNormProblem& p, const LayerNormConfig& c, int cc, bool aligned) {
  CAPTURE(c.describe());
  kjit::ops::validate_config(p, c, cc, aligned);
  if (!c.stream) CHECK(int64_t{c.team} * c.iters * c.cluster * c.coop * c.vec >= p.width);
  if (c.coop > 1) CHECK((c.cluster == 1 && c.replicas == 1 && c.team == c.threads && cc >= 70));
  // Registers: 1024 threads may hold 8 values each, fewer threads 32 (see the heuristic).
  if (!c.stream && c.team == c.threads) CHECK((c.threads <= 512 || c.iters * c.vec <= 8));
  if (cc < 90) CHECK(c.cluster == 1);
  CHECK(c.iters * c.vec <= 32);
}

}  // namespace

TEST_CASE("layer_norm validation names the field and the rule") {
  const LayerNormProblem ok = LayerNormProblem::layer_norm(8, 768, DType::BF16);
  kjit::ops::validate(ok);
  kjit::ops::validate(LayerNormProblem::rms_norm(0, 1, DType::F32));  // no rows: nothing to do
  auto with = [&](auto change) {
    LayerNormProblem p = ok;
    change(p);
    return field_of([&] { kjit::ops::validate(p); });
  };
  CHECK(with([](LayerNormProblem& p) { p.kind = static_cast<NormKind>(7); }) == "kind");
  CHECK(with([](LayerNormProblem& p) { p.dtype = static_cast<DType>(9); }) == "dtype");
  CHECK(with([](LayerNormProblem& p) { p.param_dtype = DType::F16; }) == "param_dtype");
  CHECK(with([](LayerNormProblem& p) { p.activation = static_cast<Activation>(9); }) ==
        "activation");
  CHECK(with([](LayerNormProblem& p) { p.kind = NormKind::RMSNorm; }) == "has_bias");
  CHECK(with([](LayerNormProblem& p) { p.rows = -1; }) == "rows");
  CHECK(with([](LayerNormProblem& p) { p.width = 0; }) == "width");
  CHECK(with([](LayerNormProblem& p) { p.width = kjit::ops::layer_norm_max_width() + 1; }) ==
        "width");
  CHECK(with([](LayerNormProblem& p) { p.width = kjit::ops::layer_norm_max_width(); }) ==
        "<no error>");
  CHECK(with([](LayerNormProblem& p) { p.rows = int64_t{1} << 53; }) == "rows");  // > 2^59
  // The bound: 2^59 elements, so that their bytes (4 each at most) never overflow a size_t.
  CHECK(with([](LayerNormProblem& p) { p.rows = (int64_t{1} << 59) / 768; }) == "<no error>");
  CHECK(with([](LayerNormProblem& p) { p.rows = (int64_t{1} << 59) / 768 + 1; }) == "rows");
  try {
    LayerNormProblem p = ok;
    p.width = -3;
    kjit::ops::validate(p);
    FAIL("negative width accepted");
  } catch (const kjit::Error& e) {
    CHECK(std::string(e.what()).find("width = -3 must be >= 1") != std::string::npos);
    CHECK(std::string(e.what()).find("layer_norm") != std::string::npos);
  }
  CHECK(field_of([] { kjit::ops::parse_norm_kind("batch_norm"); }) == "kind");
  CHECK(kjit::ops::parse_norm_kind("RMS_NORM") == NormKind::RMSNorm);
  CHECK(std::string(kjit::ops::norm_kind_name(NormKind::LayerNorm)) == "layer_norm");
}

TEST_CASE("layer_norm validate_call: null, misaligned and overlapping pointers") {
  LayerNormProblem p = LayerNormProblem::layer_norm(4, 64, DType::F16);
  p.residual = true;
  p.param_dtype = DType::F32;
  // Fake device addresses: validate_call only does arithmetic on them.
  const uintptr_t kBytes = 4 * 64 * 2, X = 0x100000, R = 0x200000, Y = 0x300000, S = 0x400000,
                  W = 0x500000, B = 0x600000;
  auto at = [](uintptr_t a) { return reinterpret_cast<void*>(a); };
  auto call = [&](uintptr_t x, uintptr_t r, uintptr_t y, uintptr_t s, uintptr_t w, uintptr_t b,
                  float eps = 1e-5f) {
    return field_of(
        [&] { kjit::ops::validate_call(p, at(x), at(r), at(y), at(s), at(w), at(b), eps); });
  };
  CHECK(call(X, R, Y, S, W, B) == "<no error>");
  CHECK(call(X, R, X, S, W, B) == "<no error>");  // y in place over x
  CHECK(call(X, R, R, S, W, B) == "<no error>");  // y over residual
  CHECK(call(X, R, Y, X, W, B) == "<no error>");  // sum over x
  CHECK(call(X, R, Y, R, W, B) == "<no error>");  // sum over residual
  CHECK(call(X, X, Y, S, W, B) == "<no error>");  // x + x
  CHECK(call(X, R, Y, S, W, B, -1.f) == "eps");
  CHECK(call(X, R, Y, S, W, B, NAN) == "eps");
  CHECK(call(0, R, Y, S, W, B) == "x");
  CHECK(call(X + 1, R, Y, S, W, B) == "x");  // not aligned to 2 bytes
  CHECK(call(X, 0, Y, S, W, B) == "residual");
  CHECK(call(X, R, 0, S, W, B) == "y");
  CHECK(call(X, R, Y, 0, W, B) == "sum");
  CHECK(call(X, R, Y, S, 0, B) == "weight");
  CHECK(call(X, R, Y, S, W + 2, B) == "weight");  // fp32 params: 4-byte alignment
  CHECK(call(X, R, Y, S, W, 0) == "bias");
  CHECK(call(X, R, X + 64, S, W, B) == "y");            // part of x
  CHECK(call(X, R, Y, Y, W, B) == "sum");               // both outputs in one place
  CHECK(call(X, R, Y, Y + kBytes - 2, W, B) == "sum");  // the outputs overlap by an element
  CHECK(call(X, X + 2, Y, S, W, B) == "residual");      // x and residual shifted
  CHECK(call(X, R, Y, S, Y + 16, B) == "weight");       // a parameter inside an output
  CHECK(call(X, R, Y, S, W, S) == "bias");
  CHECK(call(X, R, Y, S, X, B) == "<no error>");  // parameters may overlap inputs
  // What the problem does not use is not checked.
  p.residual = false;
  p.has_bias = false;
  CHECK(call(X, 0, Y, 0, W, 0) == "<no error>");
  p.rows = 0;  // an empty tensor: overlaps cannot happen, null pointers still are errors
  CHECK(call(X, 0, X + 2, 0, W, 0) == "<no error>");
  CHECK(call(0, 0, Y, 0, W, 0) == "x");
}

TEST_CASE("layer_norm validate_config names the field") {
  const LayerNormProblem p = LayerNormProblem::layer_norm(64, 4096, DType::F32);
  LayerNormConfig good;
  good.threads = good.team = 256;
  good.vec = 4;
  good.iters = 4;
  kjit::ops::validate_config(p, good, 90, true);
  auto with = [&](auto change, int cc = 90, bool aligned = true) {
    LayerNormConfig c = good;
    change(c);
    return field_of([&] { kjit::ops::validate_config(p, c, cc, aligned); });
  };
  CHECK(with([](LayerNormConfig& c) { c.threads = c.team = 48; }) == "threads");
  CHECK(with([](LayerNormConfig& c) { c.threads = c.team = 2048; }) == "threads");
  CHECK(with([](LayerNormConfig& c) { c.team = 3; }) == "team");
  CHECK(with([](LayerNormConfig& c) { c.team = 64; }) == "team");
  CHECK(with([](LayerNormConfig& c) { c.vec = 2; }) == "vec");
  CHECK(with([](LayerNormConfig&) {}, 90, false) == "vec");  // 16-byte vectors, unaligned
  CHECK(with([](LayerNormConfig& c) { c.iters = 0; }) == "iters");
  CHECK(with([](LayerNormConfig& c) { c.iters = 3; }) == "iters");  // holds 3072 < 4096
  CHECK(with([](LayerNormConfig& c) { c.vec = 1, c.iters = 65; }) == "iters");
  CHECK(with([](LayerNormConfig& c) { c.cluster = 17; }) == "cluster");
  CHECK(with([](LayerNormConfig& c) { c.cluster = 2; }, 80) == "cluster");
  CHECK(with([](LayerNormConfig& c) { c.cluster = 2, c.team = 32; }) == "team");
  CHECK(with([](LayerNormConfig& c) { c.stream = true, c.team = 32; }) == "team");
  CHECK(with([](LayerNormConfig& c) { c.stream = true, c.iters = 1; }) == "<no error>");
  CHECK(with([](LayerNormConfig& c) { c.replicas = 0; }) == "replicas");
  CHECK(with([](LayerNormConfig& c) { c.replicas = 17; }) == "replicas");
  CHECK(with([](LayerNormConfig& c) { c.replicas = 2, c.team = 32; }) == "team");
  CHECK(with([](LayerNormConfig& c) { c.replicas = 16, c.cluster = 16; }) == "<no error>");
  CHECK(with([](LayerNormConfig& c) { c.coop = 0; }) == "coop");
  CHECK(with([](LayerNormConfig& c) { c.coop = 1025; }) == "coop");
  CHECK(with([](LayerNormConfig& c) { c.coop = 2; }, 60) == "coop");  // acquire/release: sm_70
  CHECK(with([](LayerNormConfig& c) { c.coop = 2, c.cluster = 2; }) == "coop");
  CHECK(with([](LayerNormConfig& c) { c.coop = 2, c.replicas = 2; }) == "coop");
  CHECK(with([](LayerNormConfig& c) { c.coop = 2, c.team = 32; }) == "coop");
  CHECK(with([](LayerNormConfig& c) { c.coop = 2, c.iters = 2; }) == "<no error>");  // 2 x 2048
  CHECK(with([](LayerNormConfig& c) { c.coop = 3, c.iters = 1; }) == "iters");       // 3072 < 4096
  CHECK(with([](LayerNormConfig& c) { c.coop = 4, c.iters = 1; }, 80) == "<no error>");
  // A width that is not a whole number of vectors takes the scalar path.
  LayerNormProblem odd = p;
  odd.width = 4098;
  CHECK(field_of([&] { kjit::ops::validate_config(odd, good, 90, true); }) == "vec");
}

TEST_CASE("layer_norm heuristic: the regimes of the transformer shapes") {
  const kjit::Target h200 = kjit::Target::for_cc(90, 132), a100 = kjit::Target::for_cc(80, 108);
  for (DType t : {DType::F32, DType::BF16}) {
    CAPTURE(kjit::dtype_name(t));
    auto cfg = [&](int64_t rows, int64_t width, const kjit::Target& tg = kjit::Target::for_cc(90)) {
      const LayerNormProblem p = LayerNormProblem::layer_norm(rows, width, t);
      const LayerNormConfig c = kjit::ops::layer_norm_heuristic(p, tg, true);
      check_config(p, c, tg.cc, true);
      return c;
    };
    CHECK(cfg(32768, 128).team < 32);  // a few threads per row
    CHECK(cfg(4096, 768).team == 32);
    CHECK(cfg(8192, 1024).team == 32);
    const LayerNormConfig medium = cfg(16384, 4096);
    CHECK((medium.team == medium.threads && medium.cluster == 1));
    CHECK(medium.stream == (t == DType::F32));            // fp32 rows of 4096 in many waves stream
    CHECK(cfg(16384, 3076).stream == (t == DType::F32));  // the same held kernel
    CHECK(!cfg(16384, 3072).stream);                      // 256 threads x 3: held
    CHECK(!cfg(4000, 4096).stream);                       // under 32 rows per SM: held
    CHECK(!cfg(8192, 8192).stream);                       // 512-thread CTAs hold it faster
    if (t == DType::F32) {  // LayerNorm streams 256 x 4; RMSNorm 512 x 2 where the row fills it
      CHECK((medium.threads == 256 && medium.iters == 4));
      auto rms = [&](int64_t rows, int64_t width) {
        const LayerNormProblem p = LayerNormProblem::rms_norm(rows, width, t);
        const LayerNormConfig c =
            kjit::ops::layer_norm_heuristic(p, kjit::Target::for_cc(90), true);
        check_config(p, c, 90, true);
        return c;
      };
      CHECK((rms(16384, 4096).threads == 512 && rms(16384, 4096).iters == 2));
      CHECK((rms(16384, 4096).stream && rms(8192, 4096).threads == 512));
      CHECK((rms(16384, 3200).threads == 256 && rms(16384, 3200).stream));
    }
    CHECK(cfg(2048, 8192).cluster == 1);
    // One row over 16 SMs, replicated 4 times, 16 values per thread.
    const LayerNormConfig one_row = cfg(1, 65536, h200);
    CHECK((one_row.cluster == 16 && !one_row.stream && one_row.replicas == 4));
    CHECK(one_row.iters * one_row.vec == 16);
    CHECK(one_row.threads == 256);
    CHECK(cfg(1, 8192, a100).cluster == 1);  // no clusters before sm_90
    // Rows no cluster holds, few of them: a CTA per SM in a cooperative launch, holding its share
    // of a row where it can.
    const LayerNormConfig huge = cfg(1, 1 << 20, h200);
    CHECK((huge.coop == 132 && !huge.stream && huge.cluster == 1 && huge.replicas == 1));
    CHECK((cfg(2, 1 << 20, h200).coop == 66 && cfg(3, 1 << 20, h200).coop == 44));
    CHECK(cfg(1, 1 << 20, a100).coop == 108);  // and before sm_90, which has no clusters
    CHECK(cfg(1, 65536, a100).coop == 108);
    CHECK(cfg(1, 1 << 22, h200).stream);  // 32 values a thread hold 2^21 on 132 x 512 threads
    CHECK(cfg(1, 1 << 22, h200).coop == 132);
    CHECK(cfg(66, 1 << 20, h200).coop == 2);
    CHECK(cfg(67, 1 << 20, h200).coop == 1);  // rows for half the SMs or more: clusters
    CHECK(cfg(1, 262144, h200).coop == 1);    // a 16-CTA cluster holds it
    CHECK(cfg(1, 65536, kjit::Target::for_cc(60, 56)).coop == 1);  // no acquire/release
    CHECK(cfg(4, 65536, h200).replicas == 2);                      // 64 CTAs: twice fills 128 SMs
    CHECK(cfg(5, 65536, h200).replicas == 1);                      // 80 CTAs
    CHECK(cfg(1000, 1 << 20, h200).cluster == 1);                  // enough rows to fill the SMs
    CHECK(cfg(1000, 1 << 20, h200).replicas == 1);
    CHECK(cfg(64, 4096, h200).cluster == 2);  // 64 rows over 128 SMs
    CHECK(cfg(64, 4096, h200).replicas == 1);
    CHECK(cfg(4, 128).replicas == 1);  // warp teams: never
    // A width that is not a whole number of 16-byte vectors runs scalar accesses.
    CHECK(cfg(8, 771).vec == 1);
  }
}

TEST_CASE("layer_norm configs_for and specs_for: deterministic, one kernel per config") {
  int problems = 0, portable = 0, replicated = 0, cooperative = 0;
  for (int i = 0; i < 400; ++i) {
    const LayerNormProblem p = random_problem();
    CAPTURE(p.describe());
    for (int cc : {80, 90})
      for (bool aligned : {true, false}) {
        const kjit::Target t = kjit::Target::for_cc(cc, cc == 90 ? 132 : 108);
        const auto configs = kjit::ops::layer_norm_configs_for(p, t, {}, aligned);
        REQUIRE(!configs.empty());
        for (const LayerNormConfig& c : configs) {
          check_config(p, c, cc, aligned);
          // A config with replicas comes with the one a call in place runs instead.
          const LayerNormConfig in_place = kjit::ops::without_replicas(c);
          replicated += c.replicas > 1;
          CHECK(std::any_of(configs.begin(), configs.end(), [&](const LayerNormConfig& o) {
            return o.describe() == in_place.describe();
          }));
        }
        if (configs[0].cluster > 8) {  // then the same row on a portable cluster
          ++portable;
          REQUIRE(configs.size() > 1);
          CHECK(configs[1].cluster <= 8);
        }
        if (configs[0].coop > 1) {  // then the same row without coop: the capture fallback
          ++cooperative;
          REQUIRE(configs.size() > 1);
          CHECK(configs[1].coop == 1);
          for (size_t k = 1; k < configs.size(); ++k) CHECK(configs[k].coop == 1);
        }
        const auto a = kjit::ops::layer_norm_specs_for(p, t, {}, aligned);
        const auto b = kjit::ops::layer_norm_specs_for(p, t, {}, aligned);
        REQUIRE(a.size() == b.size());
        CHECK(a.size() == (p.rows == 0 ? 0 : configs.size()));
        for (size_t k = 0; k < a.size(); ++k) CHECK(a[k].instantiation() == b[k].instantiation());
        ++problems;
      }
  }
  CHECK(portable > 0);
  CHECK(replicated > 0);
  CHECK(cooperative > 0);
  MESSAGE(problems << " problem/target pairs, " << portable << " with a portable-cluster fallback, "
                   << replicated << " configs with replicas, " << cooperative << " cooperative");
  // A cooperative config's text reads back; coop=1 is left out.
  LayerNormConfig co{512, 512, 4, 4, 1, false};
  co.coop = 132;
  CHECK(co.describe() == "threads=512 team=512 vec=4 iters=4 cluster=1 coop=132");
  CHECK(kjit::ops::parse_layer_norm_config(co.describe()) == co);
  co.coop = 1;
  CHECK(co.describe().find("coop") == std::string::npos);
  // A forced config is the one config (and kernel) a call uses.
  LayerNormProblem p = LayerNormProblem::rms_norm(10, 4096, DType::F16);
  kjit::ops::LayerNormOptions opt;
  opt.config = LayerNormConfig{512, 512, 8, 1, 1, false};
  const auto configs = kjit::ops::layer_norm_configs_for(p, kjit::Target::for_cc(90), opt, true);
  REQUIRE(configs.size() == 1);
  CHECK(configs[0].describe() == opt.config->describe());
  // Parameters unused: one kernel for either parameter dtype.
  p.has_weight = false;
  LayerNormProblem q = p;
  q.param_dtype = DType::F32;
  CHECK(kjit::ops::layer_norm_spec(p, configs[0]).instantiation() ==
        kjit::ops::layer_norm_spec(q, configs[0]).instantiation());
}

// A cluster's or a cooperative row's kernel is compiled for its row's width (the last template
// argument), any other kernel for any width (0): nearby widths share it.
TEST_CASE("layer_norm_spec: split rows are specialized on the width, other kernels are not") {
  const auto last_arg = [](const kjit::Spec& s) {
    const std::string n = s.instantiation();
    const size_t comma = n.rfind(", ");
    REQUIRE(comma != std::string::npos);
    return n.substr(comma + 2, n.size() - comma - 3);  // between ", " and the closing '>'
  };
  int clusters = 0, others = 0;
  for (int i = 0; i < 400; ++i) {
    const LayerNormProblem p = random_problem();
    CAPTURE(p.describe());
    for (const LayerNormConfig& c :
         kjit::ops::layer_norm_configs_for(p, kjit::Target::for_cc(90, 132), {}, true)) {
      CAPTURE(c.describe());
      const bool split = c.cluster > 1 || c.coop > 1;
      const std::string arg = last_arg(kjit::ops::layer_norm_spec(p, c));
      CHECK(arg == (split ? std::to_string(p.width) : "0"));
      ++(split ? clusters : others);
      LayerNormProblem wider = p;  // one width more: another kernel exactly for split rows
      wider.width = p.width + 1;
      CHECK((kjit::ops::layer_norm_spec(p, c).instantiation() ==
             kjit::ops::layer_norm_spec(wider, c).instantiation()) == !split);
    }
  }
  CHECK(clusters > 0);
  CHECK(others > 0);
}

// CPU CI has NVRTC and no GPU: what random problems compile to must compile, for sm_90 and for
// sm_80 (no clusters there).
TEST_CASE("layer_norm: >= 100 random specializations compile with NVRTC") {
  kjit_test::CompileProbe probe;
  std::set<std::string> seen;
  int attempts = 0;
  while (probe.count() < 110 && attempts++ < 2000) {
    const LayerNormProblem p = random_problem();
    const bool aligned = kjit_test::uniform(0, 3) != 0;
    const int cc = probe.count() % 8 == 7 ? 80 : 90;
    const kjit::Target t = kjit::Target::for_cc(cc);
    for (const kjit::Spec& s : kjit::ops::layer_norm_specs_for(p, t, {}, aligned)) {
      if (!seen.insert(t.arch + s.instantiation()).second) continue;
      CAPTURE(p.describe());
      CAPTURE(s.instantiation());
      CHECK(probe.compile(s, t.arch).binary.size() > 0);
    }
  }
  CHECK(probe.count() >= 100);
  MESSAGE(probe.summary("LayerNorm/RMSNorm kernels"));
}

TEST_CASE("layer_norm autotune candidates: the heuristic's first, each valid and distinct") {
  int total = 0;
  size_t most = 0;
  for (int i = 0; i < 300; ++i) {
    const LayerNormProblem p = random_problem();
    CAPTURE(p.describe());
    for (int cc : {80, 90}) {
      const bool aligned = kjit_test::uniform(0, 1) == 1;
      const kjit::Target t = kjit::Target::for_cc(cc);
      const auto cands = kjit::ops::layer_norm_candidates(p, t, aligned);
      REQUIRE(!cands.empty());
      CHECK(cands[0].describe() == kjit::ops::layer_norm_heuristic(p, t, aligned).describe());
      std::set<std::string> names;
      for (const LayerNormConfig& c : cands) {
        check_config(p, c, cc, aligned);
        CHECK(names.insert(c.describe()).second);
        CHECK(kjit::ops::parse_layer_norm_config(c.describe()) == c);  // pinnable as reported
      }
      // configs_for with autotune names every candidate (what kjit-precompile compiles).
      kjit::ops::LayerNormOptions opt;
      opt.autotune = true;
      std::set<std::string> listed;
      for (const auto& c : kjit::ops::layer_norm_configs_for(p, t, opt, aligned))
        listed.insert(c.describe());
      for (const auto& n : names) CHECK(listed.count(n) == 1);
      total += static_cast<int>(cands.size());
      most = std::max(most, cands.size());
    }
  }
  MESSAGE(total << " candidates over 600 problem/target pairs, at most " << most);
  // A short row gets every team size; a long one on sm_90 clusters and streaming configs.
  const auto short_row = kjit::ops::layer_norm_candidates(
      LayerNormProblem::layer_norm(4096, 128, DType::F32), kjit::Target::for_cc(90), true);
  std::set<int> teams;
  for (const auto& c : short_row) teams.insert(c.team);
  CHECK(teams.count(8) == 1);
  CHECK(teams.count(32) == 1);
  const auto long_row = kjit::ops::layer_norm_candidates(
      LayerNormProblem::rms_norm(1, 1 << 20, DType::BF16), kjit::Target::for_cc(90), true);
  bool cluster = false, stream = false, coop_held = false, coop_stream = false;
  for (const auto& c : long_row) {
    cluster |= c.cluster > 1;
    stream |= c.stream;
    coop_held |= c.coop > 1 && !c.stream;
    coop_stream |= c.coop > 1 && c.stream;
  }
  CHECK(cluster);
  CHECK(stream);
  CHECK(coop_held);
  CHECK(coop_stream);
}

// Held LayerNorm clusters (the row's sums, one exchange, and the exact pass's second) in every
// dtype, with and without a residual and replicas: the random problems above may miss them.
TEST_CASE("layer_norm: held cluster kernels compile for sm_90 in every dtype") {
  kjit_test::CompileProbe probe;
  const kjit::Target t = kjit::Target::for_cc(90);
  for (DType d : {DType::F32, DType::F16, DType::BF16})
    for (bool residual : {false, true}) {
      LayerNormProblem p = LayerNormProblem::layer_norm(1, 65536, d);
      p.residual = residual;
      kjit::ops::LayerNormOptions opt;
      opt.config = LayerNormConfig{256,
                                   256,
                                   16 / static_cast<int>(kjit::dtype_size(d)),
                                   d == DType::F32 ? 4 : 2,
                                   16,
                                   false,
                                   residual ? 1 : 4};
      for (const kjit::Spec& s : kjit::ops::layer_norm_specs_for(p, t, opt, true)) {
        INFO(s.instantiation());
        CHECK_FALSE(probe.compile(s, t.arch).binary.empty());
      }
    }
  CHECK(probe.count() >= 6);
  MESSAGE(probe.summary("held LayerNorm cluster kernels"));
}

// The GPU test of rownorm::cta_moments launches kjit::test_cta_moments at these sizes.
TEST_CASE("layer_norm: the cta_moments test kernel compiles for sm_90 and sm_80") {
  kjit_test::CompileProbe probe;
  for (int threads : {32, 64, 96, 256, 1024})
    for (const char* arch : {"sm_90", "sm_80"}) {
      kjit::Spec s("kjit/test_row_norm.cuh", "kjit::test_cta_moments");
      s.value(threads);
      INFO(s.instantiation() << " " << arch);
      CHECK_FALSE(probe.compile(s, arch).binary.empty());
    }
  MESSAGE(probe.summary("cta_moments test kernels"));
}
