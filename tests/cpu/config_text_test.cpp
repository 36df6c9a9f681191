// A config's text read back (kjit::op::ConfigText and each op's parse_*_config): every rule
// broken is an InvalidArgument on field "config" that names the word and the rule. That every
// candidate's describe() reads back to the same config is checked in each op's config test.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kjit/error.hpp"
#include "kjit/op/config_text.hpp"
#include "kjit/op/target.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/ops/layer_norm.hpp"
#include "kjit/ops/linear_gn_min.hpp"

using kjit::ops::GroupNormConfig;
using kjit::ops::GroupNormFamily;
using kjit::ops::LayerNormConfig;

namespace {

// The message of the InvalidArgument on "config" that f throws ("<no error>" otherwise).
template <class F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const kjit::Error& e) {
    if (e.code() != kjit::Errc::InvalidArgument || e.field() != "config")
      return "<other error> " + std::string(e.what());
    return e.what();
  }
  return "<no error>";
}

std::string ln_refusal(const std::string& text) {
  return refusal([&] { kjit::ops::parse_layer_norm_config(text); });
}

}  // namespace

TEST_CASE("config text: the words' rules, each refusal naming the word") {
  const std::string ok = "threads=256 team=32 vec=4 iters=1 cluster=1";
  CHECK(ln_refusal(ok) == "<no error>");
  CHECK(ln_refusal("  cluster=1   iters=1 vec=4 team=32 threads=256 ") == "<no error>");
  CHECK(ln_refusal("").find("the text is empty") != std::string::npos);
  CHECK(ln_refusal("   ").find("the text is empty") != std::string::npos);
  CHECK(ln_refusal(ok + "\tstream").find("byte 9 at offset 43") != std::string::npos);
  CHECK(ln_refusal(ok + " str\xc3\xa9").find("byte 195") != std::string::npos);
  for (const char* word : {"Threads=256", "=4", "4=4", "thr_eads=2", "threads:256"})
    CHECK(ln_refusal(std::string(word) + " team=32 vec=4 iters=1 cluster=1")
              .find("must be key=value or a flag") != std::string::npos);
  for (const char* value :
       {"", "-1", "+1", "1x", "0x10", "2147483648", "99999999999", "1.0", "0256", "00000000001"})
    CHECK(ln_refusal("threads=" + std::string(value) + " team=32 vec=4 iters=1 cluster=1")
              .find("the value must be a decimal integer in [0, 2^31), without a sign or a "
                    "leading zero") != std::string::npos);
  CHECK(ln_refusal(ok + " team=32").find("\"team\" is given twice") != std::string::npos);
  CHECK(ln_refusal(ok + " stream stream").find("\"stream\" is given twice") != std::string::npos);
  CHECK(ln_refusal(ok + " stream=1").find("\"stream\" is a flag and takes no value") !=
        std::string::npos);
  CHECK(ln_refusal("threads=256 team=32 vec=4 iters=1").find("cluster=<integer> is missing") !=
        std::string::npos);
  CHECK(ln_refusal("threads=256 team=32 vec=4 iters=1 cluster").find("cluster=<integer>") !=
        std::string::npos);
  CHECK(ln_refusal(ok + " replicas").find("\"replicas\" needs a value") != std::string::npos);
  CHECK(ln_refusal(ok + " clusters=2").find("unknown key \"clusters\" (known: threads,") !=
        std::string::npos);
  CHECK(ln_refusal(ok + " streamed").find("unknown word \"streamed\"") != std::string::npos);
  CHECK(ln_refusal("threads=2048 team=32 vec=4 iters=1 cluster=1")
            .find("threads = 2048 must be in [1, 1024]") != std::string::npos);
  CHECK(ln_refusal(ok + " replicas=0").find("replicas = 0 must be in [1, 16]") !=
        std::string::npos);
  // The op and the whole text are in every message; a long text is cut.
  const std::string m = ln_refusal(ok + " x");
  CHECK(m.rfind("layer_norm config: ", 0) == 0);
  CHECK(m.find(ok) != std::string::npos);
  CHECK(ln_refusal(ok + " " + std::string(5000, 'y')).size() < 500);
  std::string many = ok;
  for (int i = 0; i < 40; ++i) many += " w" + std::to_string(i);
  CHECK(ln_refusal(many).find("more than 32 words") != std::string::npos);
  CHECK(ln_refusal(ok + "\nstream").find("\"" + ok + "?stream\"") != std::string::npos);
}

TEST_CASE("config text: a host app's op reads its own config with ConfigText") {
  kjit::op::ConfigText t("my_op", "tile=64 fast");
  CHECK(t.integer("tile", 1, 128) == 64);
  CHECK(t.integer("depth", 3, 1, 8) == 3);  // absent: the fallback
  CHECK(t.flag("fast"));
  CHECK_FALSE(t.flag("slow"));
  CHECK_NOTHROW(t.finish("tile, depth, fast, slow"));
  kjit::op::ConfigText u("my_op", "tile=64 fast");
  u.integer("tile", 1, 128);
  CHECK(refusal([&] { u.finish("tile"); }).find("my_op config: unknown word \"fast\"") == 0);
}

TEST_CASE("config text: layer_norm reads what describe() writes") {
  LayerNormConfig c;
  c.threads = 256, c.team = 256, c.vec = 4, c.iters = 4, c.cluster = 16, c.replicas = 4;
  CHECK(c.describe() == "threads=256 team=256 vec=4 iters=4 cluster=16 replicas=4");
  CHECK(kjit::ops::parse_layer_norm_config(c.describe()) == c);
  CHECK(kjit::ops::parse_layer_norm_config("replicas=4 cluster=16 iters=4 vec=4 team=256 "
                                           "threads=256") == c);  // any order
  LayerNormConfig s = c;
  s.stream = true, s.replicas = 1;
  CHECK(kjit::ops::parse_layer_norm_config(s.describe()) == s);
  CHECK(kjit::ops::parse_layer_norm_config(s.describe()) != c);
}

TEST_CASE("config text: group_norm names its family by words") {
  auto parse = [](const std::string& t) { return kjit::ops::parse_group_norm_config(t); };
  const std::string base = "threads=256 team=256 vec=4 iters=4 cluster=1";
  CHECK(parse(base).family == GroupNormFamily::Registers);
  CHECK(parse(base + " stream").family == GroupNormFamily::Stream);
  CHECK(parse(base + " smem held=2").family == GroupNormFamily::Smem);
  CHECK(parse(base + " smem held=2").held == 2);
  CHECK(parse(base + " coop smem").family == GroupNormFamily::SmemCoop);
  CHECK(parse(base + " pipe").family == GroupNormFamily::Pipe);
  CHECK(parse(base + " split").family == GroupNormFamily::Split);
  CHECK(parse(base + " split coop").family == GroupNormFamily::SplitCoop);
  CHECK(parse(base + " gmem-affine").affine_smem == false);
  CHECK(parse(base).affine_smem == true);
  for (const char* words : {" coop", " stream smem", " pipe split", " stream coop"})
    CHECK(refusal([&] { parse(base + words); }).find("name no family") != std::string::npos);
  CHECK(refusal([&] { parse(base + " held"); }).find("\"held\" needs a value") !=
        std::string::npos);
  for (GroupNormFamily f : {GroupNormFamily::Registers, GroupNormFamily::Stream,
                            GroupNormFamily::Smem, GroupNormFamily::SmemCoop, GroupNormFamily::Pipe,
                            GroupNormFamily::Split, GroupNormFamily::SplitCoop}) {
    GroupNormConfig c;
    c.family = f;
    c.held = c.staged() ? 3 : 0;
    c.affine_smem = f != GroupNormFamily::Stream;
    CAPTURE(c.describe());
    CHECK(parse(c.describe()) == c);
  }
}

TEST_CASE("config text: linear_gn_min's flags, an absent one false") {
  const auto c = kjit::ops::parse_gn_min_config("threads=256 slice=32 sub=4 seq=2 vec=4 pad");
  CHECK(c.pad);
  CHECK(c.smem);
  CHECK_FALSE(c.split);
  CHECK_FALSE(c.affine_smem);
  CHECK_FALSE(kjit::ops::parse_gn_min_config("threads=256 slice=32 sub=4 seq=2 vec=4 global").smem);
  CHECK(refusal([&] {
          kjit::ops::parse_gn_min_config("threads=256 slice=32 sub=4 seq=2");
        }).find("linear_gn_min config: vec=<integer> is missing") == 0);
}

// Every op's options read a config text through pin_config_text, as the C ABI, Python and the
// registry call it: the config the text describes, replacing one set before; refusals as the
// parser's.
TEST_CASE("config text: each op's pin_config_text sets its options' config") {
  const std::string gn = "threads=256 team=256 vec=4 iters=8 cluster=2 smem held=4";
  kjit::ops::GroupNormOptions g;
  g.config = kjit::ops::parse_group_norm_config("threads=128 team=32 vec=1 iters=1 cluster=1");
  kjit::ops::pin_config_text(gn, &g);
  CHECK(g.config == kjit::ops::parse_group_norm_config(gn));
  const std::string ln = "threads=256 team=256 vec=4 iters=4 cluster=16 replicas=4";
  kjit::ops::LayerNormOptions l;
  kjit::ops::pin_config_text(ln, &l);
  CHECK(l.config == kjit::ops::parse_layer_norm_config(ln));
  CHECK(refusal([&] { kjit::ops::pin_config_text("threads=256 tiles=4", &l); })
            .find("layer_norm config:") == 0);
  CHECK(l.config == kjit::ops::parse_layer_norm_config(ln));  // untouched by a refusal
}

// Linear-GN-min's text may name the GEMM after the config (LinearGnMinInfo::pin()): each part is
// read by its own rules, and a prepare's report past "; kernel" is refused, not skipped.
TEST_CASE("config text: linear_gn_min's \"<config>; GEMM <algo>\"") {
  using kjit::ops::GemmAlgo;
  const std::string config = "threads=256 slice=32 sub=4 seq=2 vec=4 pad linear-bias";
  const GemmAlgo algo{21, 20, 8, 1, 0, 2, 13};
  CHECK(algo.describe() == "id=21 tile=20 stages=8 splitk=1 reduction=0 swizzle=2 cluster=13");
  CHECK(kjit::ops::parse_gemm_algo(algo.describe()) == algo);
  CHECK(kjit::ops::parse_gemm_algo("cluster=13 swizzle=2 reduction=0 splitk=1 stages=8 tile=20 "
                                   "id=21") == algo);
  GemmAlgo other = algo;
  other.splitk = 4;
  CHECK(other != algo);

  kjit::ops::LinearGnMinOptions o;
  kjit::ops::pin_config_text(config, &o);
  REQUIRE(o.config);
  CHECK(*o.config == kjit::ops::parse_gn_min_config(config));
  CHECK_FALSE(o.gemm);
  for (const char* sep : {"; GEMM ", ";GEMM ", ";   GEMM "}) {
    CAPTURE(sep);
    kjit::ops::LinearGnMinOptions g;
    kjit::ops::pin_config_text(config + sep + algo.describe(), &g);
    REQUIRE(g.config);
    CHECK(*g.config == kjit::ops::parse_gn_min_config(config));
    CHECK(g.gemm == algo);
    // A text without a GEMM clears one set before: the text is the whole pin.
    kjit::ops::pin_config_text(config, &g);
    CHECK_FALSE(g.gemm);
  }
  // What LinearGnMinInfo writes: pin() reads back; its whole report does not.
  kjit::ops::LinearGnMinInfo info;
  info.config = kjit::ops::parse_gn_min_config(config);
  info.gemm_algo = algo.describe();
  info.gemm_source = "autotuned";
  info.kernel = "kjit::gn_min<...>";
  CHECK(info.pin() == config + "; GEMM " + algo.describe());
  CHECK(info.describe() == info.pin() + "; kernel kjit::gn_min<...>; GEMM from autotuned");
  kjit::ops::LinearGnMinOptions back;
  kjit::ops::pin_config_text(info.pin(), &back);
  CHECK(back.gemm == algo);
  auto pin = [](const std::string& text) {
    return refusal([&] {
      kjit::ops::LinearGnMinOptions r;
      kjit::ops::pin_config_text(text, &r);
    });
  };
  CHECK(pin(info.describe()).find("comes \"GEMM <algorithm>\" and nothing more") !=
        std::string::npos);
  CHECK(pin(config + "; kernel x").find("is its report, not a pin") != std::string::npos);
  CHECK(pin(config + "; gemm " + algo.describe()).find("comes \"GEMM <algorithm>\"") !=
        std::string::npos);
  CHECK(pin(config + ";").find("comes \"GEMM <algorithm>\"") != std::string::npos);
  CHECK(pin(config + "; GEMM ").find("needs the algorithm's words") != std::string::npos);
  CHECK(pin(config + "; GEMM id=21 tile=20").find("stages=<integer> is missing") !=
        std::string::npos);
  CHECK(pin(config + "; GEMM " + algo.describe() + " split").find("unknown word \"split\"") !=
        std::string::npos);
  CHECK(pin(config + "; GEMM " + algo.describe() + " id=3").find("\"id\" is given twice") !=
        std::string::npos);
  CHECK(pin(config + "; GEMM " + algo.describe() + " id=3").find("linear_gn_min GEMM config:") ==
        0);
  // ID and SPLITK_NUM are int32: split-k -1 is cuBLASLt's own value in some TF32 algorithms
  // (H200, cuBLASLt 13.0); the unsigned attributes take no sign.
  const GemmAlgo negative{43, 24, 34, -1, 2, 1, 5};
  CHECK(negative.describe() == "id=43 tile=24 stages=34 splitk=-1 reduction=2 swizzle=1 cluster=5");
  CHECK(kjit::ops::parse_gemm_algo(negative.describe()) == negative);
  kjit::ops::LinearGnMinOptions tf32;
  kjit::ops::pin_config_text(config + "; GEMM " + negative.describe(), &tf32);
  CHECK(tf32.gemm == negative);
  CHECK(pin(config + "; GEMM id=43 tile=-24 stages=34 splitk=-1 reduction=2 swizzle=1 cluster=5")
            .find("word \"tile=-24\": the value must be a decimal integer in [0, 2^31), without "
                  "a sign") != std::string::npos);
  for (const char* v : {"-0", "-", "--1", "-01", "+1"})
    CHECK(pin(config + "; GEMM id=43 tile=24 stages=34 splitk=" + v +
              " reduction=2 swizzle=1 cluster=5")
              .find("the value must be a decimal integer") != std::string::npos);
  CHECK(pin("; GEMM " + algo.describe()).find("the config's words come before ';'") !=
        std::string::npos);
  CHECK(pin(config + "; GEMM   ").find("\"GEMM\" needs the algorithm's words") !=
        std::string::npos);
  CHECK(pin("threads=256; GEMM " + algo.describe()).find("slice=<integer> is missing") !=
        std::string::npos);  // the config's own rules first
  // A pinned GEMM without a config settles bias_add auto as a plain call's: the epilogue
  // (fp32x3: the kernel, which always adds it there).
  kjit::ops::LinearGnMinProblem q;
  q.M = 8, q.K = 16, q.N = 8, q.G = 2;
  kjit::ops::LinearGnMinOptions g;
  g.gemm = algo;
  CHECK(kjit::ops::with_pinned_bias_add(q, g).bias_add == kjit::ops::LinearBiasAdd::Epilogue);
  g.bias_add = kjit::ops::LinearBiasAdd::Kernel;
  CHECK(kjit::ops::with_pinned_bias_add(q, g).bias_add == kjit::ops::LinearBiasAdd::Kernel);
  g.bias_add = kjit::ops::LinearBiasAdd::Auto;
  q.precision = kjit::ops::Precision::Fp32x3;
  CHECK(kjit::ops::with_pinned_bias_add(q, g).bias_add == kjit::ops::LinearBiasAdd::Auto);
}

// What every prepare reports reads back, also for the problems whose heuristic is special: empty
// ones (a GroupNorm of no spatial elements has iters = 0), single elements, the largest rows.
TEST_CASE("config text: the heuristics' configs of edge problems read back") {
  for (int cc : {80, 90})
    for (bool aligned : {true, false}) {
      const kjit::Target t = kjit::Target::for_cc(cc);
      for (const auto& shape : {std::vector<int64_t>{2, 8, 0},
                                {0, 8, 4},
                                {1, 1, 1},
                                {2, 64, 1},
                                std::vector<int64_t>{1, 4, int64_t{1} << 28}}) {
        const auto p =
            kjit::ops::GroupNormProblem::from_shape(shape, shape[1] == 1 ? 1 : 4, kjit::DType::F32);
        const GroupNormConfig c = kjit::ops::group_norm_heuristic(p, t, aligned);
        CAPTURE(c.describe());
        CHECK(kjit::ops::parse_group_norm_config(c.describe()) == c);
      }
      for (int64_t rows : {int64_t{0}, int64_t{1}, int64_t{4096}})
        for (int64_t width :
             {int64_t{1}, int64_t{3}, int64_t{65536}, kjit::ops::layer_norm_max_width()}) {
          const auto p = kjit::ops::LayerNormProblem::rms_norm(rows, width, kjit::DType::BF16);
          const LayerNormConfig c = kjit::ops::layer_norm_heuristic(p, t, aligned);
          CAPTURE(c.describe());
          CHECK(kjit::ops::parse_layer_norm_config(c.describe()) == c);
        }
      kjit::ops::LinearGnMinProblem q;
      for (int64_t m : {int64_t{1}, int64_t{1024}, int64_t{1} << 20}) {
        q.M = m, q.K = 64, q.N = 8192, q.G = 512;
        const auto c = kjit::ops::gn_min_heuristic(q, t, aligned);
        CAPTURE(c.describe());
        CHECK(kjit::ops::parse_gn_min_config(c.describe()) == c);
      }
    }
}
