// Linear -> GroupNorm -> min -> + bias without a GPU: validation, the launch-shape heuristic and
// its candidates, and NVRTC compiles of the fused kernel for random specializations.
#include <doctest/doctest.h>

#include <algorithm>
#include <climits>
#include <string>

#include "compile_probe.hpp"
#include "kjit/kjit.hpp"
#include "kjit/ops/linear_gn_min.hpp"
#include "test_util.hpp"

using kjit::ops::GnMinConfig;
using kjit::ops::LinearGnMinProblem;
using kjit::ops::Precision;

namespace {

LinearGnMinProblem problem(int64_t M, int64_t K, int64_t N, int64_t G,
                           Precision pr = Precision::Fp32) {
  LinearGnMinProblem p;
  p.M = M;
  p.K = K;
  p.N = N;
  p.G = G;
  p.precision = pr;
  return p;
}

LinearGnMinProblem random_problem() {
  using kjit_test::uniform;
  const int64_t cg = uniform(0, 4) == 0 ? 1 : uniform(1, uniform(0, 5) == 0 ? 4096 : 64);
  int64_t G = uniform(0, 5) == 0 ? 1 : uniform(1, 1024);
  while (G > 1 && G * cg > (int64_t{1} << 17)) G /= 2;
  const int64_t Ms[] = {1, 2, 3, 7, 64, 100, 1024, 4096, 65537};
  return problem(Ms[uniform(0, 8)], uniform(1, 8192), G * cg, G);
}

// The per-block opt-in shared memory of each architecture (CUDA programming guide, table of
// compute capabilities).
size_t max_smem_per_block(int cc) {
  switch (cc) {
    case 70:
      return 96 * 1024;
    case 75:
      return 64 * 1024;
    case 80:
    case 87:
      return 163 * 1024;
    case 86:
    case 89:
    case 120:
      return 99 * 1024;
    default:
      return 227 * 1024;  // 90, 100
  }
}

// The rules the kernel template static_asserts, and the launch limits.
void check_config(const LinearGnMinProblem& p, const GnMinConfig& c, int cc) {
  CAPTURE(p.describe());
  CAPTURE(c.describe());
  kjit::ops::validate(p, c);  // throws on a broken rule
  CHECK(c.threads % 32 == 0);
  CHECK(c.threads <= 1024);
  CHECK(c.rows() >= 1);
  if (c.out_vec) CHECK(p.M % 4 == 0);
  const size_t smem = kjit::ops::gn_min_smem_bytes(p, c);
  CHECK(smem <= max_smem_per_block(cc));
  if (c.smem) {
    // The block of rows is staged: its bytes, padded, fit in the dynamic shared memory.
    const size_t block = static_cast<size_t>(c.par()) * static_cast<size_t>(p.N);
    CHECK(smem >= 4 * (64 + static_cast<size_t>(c.rows()) + block + (c.pad ? block / 32 : 0)));
    CHECK((static_cast<int64_t>(c.par()) * p.N + c.threads - 1) / c.threads <= 32);
  }
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const kjit::Error& e) {
    CHECK(e.code() == kjit::Errc::InvalidArgument);
    return e.what();
  }
  FAIL("no kjit::Error thrown");
  return {};
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("linear_gn_min validation names the bad value and the rule") {
  using kjit::ops::validate;
  validate(problem(1024, 8192, 8192, 512));
  validate(problem(1, 1, 1, 1));
  CHECK(contains(message_of([] { validate(problem(8, 16, 100, 7)); }),
                 "N = 100 must be divisible by G = 7"));
  CHECK(contains(message_of([] { validate(problem(0, 16, 64, 8)); }), "M = 0 must be >= 1"));
  CHECK(contains(message_of([] { validate(problem(4, 0, 64, 8)); }), "K = 0 must be >= 1"));
  CHECK(contains(message_of([] { validate(problem(4, 16, 0, 8)); }), "N = 0 must be >= 1"));
  CHECK(contains(message_of([] { validate(problem(4, 16, 64, 0)); }), "G = 0 must be >= 1"));
  CHECK(contains(message_of([] { validate(problem(4, 16, 64, -2)); }), "G = -2 must be >= 1"));
  CHECK(contains(message_of([] { validate(problem(-1, 16, 64, 8)); }), "M = -1"));
  CHECK(contains(message_of([] { validate(problem(4, 16, int64_t{1} << 25, 1)); }),
                 "exceeds the supported"));
  CHECK(contains(message_of([] { validate(problem(int64_t{1} << 31, 16, 64, 8)); }),
                 "exceeds 2^31-1"));
  CHECK(contains(message_of([] { validate(problem(4, int64_t{1} << 40, 64, 8)); }),
                 "exceeds 2^31-1"));
  CHECK(contains(message_of([] { validate(problem(INT32_MAX, INT32_MAX, 1 << 24, 1)); }),
                 "overflows"));
  LinearGnMinProblem bad_precision = problem(4, 16, 64, 8);
  bad_precision.precision = static_cast<Precision>(7);
  CHECK(contains(message_of([&] { validate(bad_precision); }), "precision = 7"));
  // Every message carries the problem.
  CHECK(
      contains(message_of([] { validate(problem(8, 16, 100, 7)); }), "(M=8 K=16 N=100 G=7 fp32)"));
}

// Who adds the Linear's bias: the runtime's plans, its autotuning and kjit-precompile's manifest
// all take their kernel variants from linear_gn_min_kernel_adds_bias.
TEST_CASE("linear_gn_min bias_add names and the kernel variants each mode builds") {
  using kjit::ops::LinearBiasAdd;
  for (LinearBiasAdd b : {LinearBiasAdd::Auto, LinearBiasAdd::Epilogue, LinearBiasAdd::Kernel})
    CHECK(kjit::ops::parse_bias_add(kjit::ops::bias_add_name(b)) == b);
  CHECK(std::string(kjit::ops::bias_add_name(LinearBiasAdd::Epilogue)) == "epilogue");
  CHECK_THROWS_WITH_AS(kjit::ops::parse_bias_add("later"),
                       doctest::Contains("bias_add 'later' must be auto, epilogue or kernel"),
                       kjit::Error);
  using V = std::vector<bool>;
  auto adds = [](LinearBiasAdd b, bool tune, Precision pr = Precision::Fp32) {
    return kjit::ops::linear_gn_min_kernel_adds_bias(b, tune, pr);
  };
  CHECK(adds(LinearBiasAdd::Auto, false) == V{false});  // the epilogue, untuned
  CHECK(adds(LinearBiasAdd::Auto, true) == V{false, true});
  CHECK(adds(LinearBiasAdd::Epilogue, true) == V{false});
  CHECK(adds(LinearBiasAdd::Kernel, false) == V{true});
  CHECK(adds(LinearBiasAdd::Kernel, true) == V{true});
  // fp32x3: only the kernel (it adds the bias after undoing the split's scales).
  CHECK(adds(LinearBiasAdd::Auto, false, Precision::Fp32x3) == V{true});
  CHECK(adds(LinearBiasAdd::Auto, true, Precision::Fp32x3) == V{true});
}

TEST_CASE("linear_gn_min names, output shape and workspace size") {
  CHECK(std::string(kjit::ops::precision_name(Precision::Fp32)) == "fp32");
  CHECK(std::string(kjit::ops::precision_name(Precision::Tf32)) == "tf32");
  CHECK(std::string(kjit::ops::precision_name(Precision::Bf16Inputs)) == "bf16-inputs");
  for (Precision pr : {Precision::Fp32, Precision::Tf32, Precision::Bf16Inputs})
    CHECK(kjit::ops::parse_precision(kjit::ops::precision_name(pr)) == pr);
  CHECK_THROWS_WITH_AS(
      kjit::ops::parse_precision("fp64"),
      doctest::Contains("precision 'fp64' must be fp32, tf32, bf16-inputs or fp32x3"), kjit::Error);
  const LinearGnMinProblem seed = problem(1024, 8192, 8192, 512);
  CHECK(seed.output_shape() == std::vector<int64_t>{1, 8192, 1024, 1});
  CHECK(seed.describe() == "M=1024 K=8192 N=8192 G=512 fp32");
  // Y, then the row minima, then cuBLASLt's part.
  CHECK(kjit::ops::linear_gn_min_workspace_size(seed) ==
        size_t{1024} * 8192 * 4 + 1024 * 4 + kjit::ops::kLinearGnMinGemmWorkspace);
  // Y's and the minima's parts are rounded up to 256 bytes, so the next part stays aligned.
  CHECK(kjit::ops::linear_gn_min_workspace_size(problem(3, 5, 7, 7)) ==
        256 + 256 + kjit::ops::kLinearGnMinGemmWorkspace);
  CHECK_KJIT_ERROR(kjit::ops::linear_gn_min_workspace_size(problem(3, 5, 7, 2)),
                   kjit::Errc::InvalidArgument);
}

TEST_CASE("config validation rejects what the kernel template cannot run") {
  const LinearGnMinProblem p = problem(64, 32, 256, 16);
  GnMinConfig c = kjit::ops::gn_min_heuristic(p, 90);
  kjit::ops::validate(p, c);
  auto broken = [&](auto mutate) {
    GnMinConfig b = c;
    mutate(b);
    CHECK_KJIT_ERROR(kjit::ops::validate(p, b), kjit::Errc::InvalidArgument);
  };
  broken([](GnMinConfig& b) { b.threads = 48; });
  broken([](GnMinConfig& b) { b.threads = 2048; });
  broken([](GnMinConfig& b) { b.slice = 24; });
  broken([](GnMinConfig& b) { b.sub = 3; });
  broken([](GnMinConfig& b) { b.sub = b.slice * 2; });
  broken([](GnMinConfig& b) { b.seq = 0; });
  broken([](GnMinConfig& b) { b.vec = 2; });
  broken([](GnMinConfig& b) {
    b.pad = true;
    b.smem = false;
  });
  broken([](GnMinConfig& b) {
    b.pad = false;
    b.smem = false;
    b.affine_smem = true;
  });
  GnMinConfig odd = kjit::ops::gn_min_heuristic(problem(63, 32, 256, 16), 90);
  CHECK_FALSE(odd.out_vec);  // M % 4 != 0
  odd.out_vec = true;
  CHECK_KJIT_ERROR(kjit::ops::validate(problem(63, 32, 256, 16), odd), kjit::Errc::InvalidArgument);
  // A whole-CTA sub-team must be the whole CTA.
  GnMinConfig block = kjit::ops::gn_min_heuristic(problem(64, 32, 8192, 1), 90);
  CHECK(block.sub == block.threads);
  block.slice = block.threads / 2;
  CHECK_KJIT_ERROR(kjit::ops::validate(problem(64, 32, 8192, 1), block),
                   kjit::Errc::InvalidArgument);
}

TEST_CASE("the heuristic picks the intended regime") {
  auto h = [](int64_t M, int64_t N, int64_t G, bool aligned = true) {
    return kjit::ops::gn_min_heuristic(problem(M, 64, N, G), 90, 132, aligned);
  };
  // The seed problem: a thread per 16-channel group, 512 threads per row, 2 rows per CTA
  // (512 CTAs on 132 SMs), 16-byte loads and stores, the 32 MB output written by the broadcast
  // kernel.
  const GnMinConfig seed = h(1024, 8192, 512);
  CHECK(seed.threads == 512);
  CHECK(seed.slice == 512);
  CHECK(seed.sub == 1);
  CHECK(seed.rows() == 2);
  CHECK(seed.split);
  CHECK_FALSE(seed.linear_bias);  // the plan decides (cuBLASLt's epilogue by default)
  CHECK(seed.vec == 4);
  CHECK(seed.pad);
  CHECK(seed.smem);
  CHECK(seed.affine_smem);  // gamma/beta read at a stride of 16 channels: staged
  CHECK(seed.out_vec);
  CHECK_FALSE(h(1024, 8192, 512, false).out_vec);  // out not 16-byte aligned
  CHECK_FALSE(h(1023, 8192, 512).out_vec);         // M % 4 != 0
  // Long rows split from >= 8 rows on; short rows (and tiny batches) stay in one kernel, with
  // runs of >= 8 rows (whole 32-byte output sectors) while a wave of CTAs remains.
  CHECK(h(16, 8192, 512).split);
  CHECK(h(128, 4096, 256).split);
  CHECK_FALSE(h(4, 8192, 512).split);
  CHECK(h(2048, 256, 32).rows() >= 8);
  CHECK_FALSE(h(2048, 256, 32).split);
  // Big batches: more rows per CTA, capped.
  CHECK(h(65536, 8192, 512).rows() >= 8);
  CHECK(h(1 << 20, 8192, 512).rows() <= 64);
  // Few large groups: the whole CTA owns each group.
  const GnMinConfig g1 = h(64, 8192, 1);
  CHECK(g1.sub == g1.threads);
  // Groups of a few channels: sub-teams narrower than a warp, several rows per CTA when short.
  const GnMinConfig small = h(4096, 64, 16);
  CHECK(small.par() > 1);
  CHECK(small.sub <= 4);
  // Rows too long for shared memory: read from global memory.
  const GnMinConfig huge = h(8, 1 << 20, 1 << 14);
  CHECK_FALSE(huge.smem);
  CHECK_FALSE(huge.pad);
  CHECK_FALSE(huge.affine_smem);
  CHECK(huge.sub == 32);  // lanes read neighbouring channels of Y, gamma and beta
  // N not a multiple of 4 (and an odd number of rows at once): scalar loads.
  const GnMinConfig odd = h(16, 4097 * 3, 3);
  CHECK(odd.vec == 1);
  // Tiny: one CTA.
  const GnMinConfig one = h(1, 1, 1);
  CHECK(one.rows() >= 1);
  // sm_80 has less shared memory to stage rows in.
  CHECK(kjit::ops::gn_min_heuristic(problem(8, 64, 32768, 64), 80).smem == false);
  CHECK(kjit::ops::gn_min_heuristic(problem(8, 64, 32768, 64), 90).smem == true);
  // sm_120 (RTX Blackwell) has 99 KB per block, not sm_90's 227: the seed problem must fit.
  const LinearGnMinProblem seed_p = problem(1024, 8192, 8192, 512);
  for (const GnMinConfig& c : kjit::ops::gn_min_candidates(seed_p, 120, 170, true)) {
    CAPTURE(c.describe());
    CHECK(kjit::ops::gn_min_smem_bytes(seed_p, c) <= max_smem_per_block(120));
  }
}

TEST_CASE("heuristic and candidates obey the template's rules over random problems") {
  for (int i = 0; i < 400; ++i) {
    const LinearGnMinProblem p = random_problem();
    for (int cc : {75, 80, 86, 90, 100, 120})
      for (bool aligned : {true, false})
        for (int sms : {132, 108, 16}) {
          const auto cands = kjit::ops::gn_min_candidates(p, cc, sms, aligned);
          REQUIRE_FALSE(cands.empty());
          CHECK(cands.front().describe() ==
                kjit::ops::gn_min_heuristic(p, cc, sms, aligned).describe());
          for (const GnMinConfig& c : cands) {
            check_config(p, c, cc);
            if (!aligned) CHECK_FALSE(c.out_vec);
            CHECK(kjit::ops::parse_gn_min_config(c.describe()) == c);  // pinnable as reported
            GnMinConfig flipped = c;  // the flags no candidate sets here
            flipped.linear_bias = !c.linear_bias;
            flipped.split = !c.split;
            CHECK(kjit::ops::parse_gn_min_config(flipped.describe()) == flipped);
          }
          // A device with its architecture's limit (what the runtime passes) gets the configs
          // kjit-precompile compiled without a device.
          const auto on_device = kjit::ops::gn_min_candidates(
              p, cc, sms, aligned, static_cast<int64_t>(max_smem_per_block(cc)));
          REQUIRE(on_device.size() == cands.size());
          for (size_t k = 0; k < cands.size(); ++k)
            CHECK(on_device[k].describe() == cands[k].describe());
          // A device that allows less than its architecture (the runtime passes its opt-in
          // limit): every config fits that limit.
          for (const GnMinConfig& c :
               kjit::ops::gn_min_candidates(p, cc, sms, aligned, 48 * 1024)) {
            CAPTURE(c.describe());
            CHECK(kjit::ops::gn_min_smem_bytes(p, c) <= size_t{48 * 1024});
          }
        }
  }
}

TEST_CASE("the fused kernel compiles with NVRTC for sm_90 over >= 30 random specializations") {
  kjit_test::CompileProbe probe;
  // Every regime at least once, then random problems and random candidates.
  std::vector<std::pair<LinearGnMinProblem, bool>> problems = {
      {problem(1024, 8192, 8192, 512), true},
      {problem(1023, 64, 8192, 1), true},
      {problem(8, 64, 1 << 20, 1 << 14), true},
      {problem(16, 64, 4097 * 3, 3), false},
      {problem(4096, 64, 64, 16), true},
      {problem(5, 7, 6, 3), true},
      {problem(1, 1, 1, 1), true},
      {problem(100, 9, 2048, 2), false},
      {problem(4, 16, 40000, 8), true},
  };
  for (int i = 0; i < 32; ++i)
    problems.push_back({random_problem(), kjit_test::uniform(0, 3) != 0});
  for (size_t i = 0; i < problems.size(); ++i) {
    auto [p, aligned] = problems[i];
    // Every fourth in fp32x3: the kernel undoes the split's scales (and adds the bias).
    if (i % 4 == 2) p.precision = kjit::ops::Precision::Fp32x3;
    const auto cands = kjit::ops::gn_min_candidates(p, 90, 132, aligned);
    const GnMinConfig& c = i < 9 ? cands.front()
                                 : cands[static_cast<size_t>(kjit_test::uniform(
                                       0, static_cast<int64_t>(cands.size()) - 1))];
    GnMinConfig cl = c;
    // The plan's choice when the GEMM runs without the epilogue (fp32x3's always).
    cl.linear_bias = i % 3 == 1 || p.precision == kjit::ops::Precision::Fp32x3;
    kjit::ops::validate(p, cl);
    for (const kjit::Spec& s : kjit::ops::gn_min_specs(p, cl)) {  // + the broadcast when split
      CAPTURE(s.instantiation());
      const kjit::CompiledKernel k = probe.compile(s, i % 8 == 7 ? "sm_80" : "sm_90");
      CHECK(k.binary.size() > 0);
      CHECK(k.lowered_name.rfind("_Z", 0) == 0);
    }
  }
  MESSAGE(probe.summary("gn_min specializations"));
  CHECK(probe.count() >= 30);
  // The instantiation names the specialization in the order the template takes it.
  CHECK(
      kjit::ops::gn_min_spec(problem(1024, 8192, 8192, 512),
                             kjit::ops::gn_min_heuristic(problem(1024, 8192, 8192, 512), 90))
          .instantiation() ==
      "kjit::gn_min_fwd<8192, 512, 512, 512, 1, 2, 4, true, true, true, true, false, true, false>");
}
