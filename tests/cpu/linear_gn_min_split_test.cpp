// Linear-GN-min's split precision (Precision::Fp32x3) without a GPU: names, validation, workspace
// layout, the specs a call compiles (and NVRTC compiling them), and the split's element functions
// (kernel_templates/kjit/f16_split.cuh) on the host against float64: the fp16 rounding (to
// nearest even, every binade, subnormals, overflow), the row scale, hi + lo * 2^-11 within 2^-22
// of the scaled value, and the error bound of the three-product dot product that docs/OPS.md
// states. The GPU test compares the device's split rows with these functions bit for bit.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "compile_probe.hpp"
#include "f16_split_host.hpp"
#include "kjit/error.hpp"
#include "kjit/ops/linear_gn_min.hpp"
#include "kjit/spec.hpp"
#include "test_util.hpp"

namespace {

using kjit::ops::LinearGnMinProblem;
using kjit::ops::Precision;
namespace fs = kjit::f16split;

LinearGnMinProblem split_problem(int64_t M, int64_t K, int64_t N, int64_t G) {
  LinearGnMinProblem p;
  p.M = M;
  p.K = K;
  p.N = N;
  p.G = G;
  p.precision = Precision::Fp32x3;
  return p;
}

float from_bits(uint32_t u) {
  return __uint_as_float(u);
}

// fp16 value of bits h, in double.
double half_value(unsigned short h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0x1f) return m ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

// a rounded to fp16, to nearest even, in double: fp16's grid in a's binade (spacing 2^(E-10) for
// |a| in [2^E, 2^(E+1)), E >= -14; 2^-24 below), inf from 65520 on.
double half_reference(float a) {
  if (std::isnan(a)) return a;
  const double d = a;
  if (std::fabs(d) >= 65520.0) return d > 0 ? INFINITY : -INFINITY;
  if (d == 0) return d;
  int e = 0;
  std::frexp(d, &e);  // |d| in [2^(e-1), 2^e)
  const int q = std::max(e - 1 - 10, -24);
  return std::ldexp(std::nearbyint(std::ldexp(d, -q)), q);  // nearbyint: ties to even
}

}  // namespace

TEST_CASE("fp32x3: names, validation and the problem's text") {
  CHECK(std::string(kjit::ops::precision_name(Precision::Fp32x3)) == "fp32x3");
  CHECK(kjit::ops::parse_precision("fp32x3") == Precision::Fp32x3);
  CHECK_THROWS_WITH_AS(kjit::ops::parse_precision("3xtf32"),
                       doctest::Contains("must be fp32, tf32, bf16-inputs or fp32x3"), kjit::Error);
  const LinearGnMinProblem seed = split_problem(1024, 8192, 8192, 512);
  CHECK_NOTHROW(kjit::ops::validate(seed));
  CHECK(seed.describe() == "M=1024 K=8192 N=8192 G=512 fp32x3");
  LinearGnMinProblem bad = seed;
  bad.precision = static_cast<Precision>(7);
  CHECK_THROWS_WITH_AS(
      kjit::ops::validate(bad),
      doctest::Contains("precision = 7 is not one of Fp32, Tf32, Bf16Inputs, Fp32x3"), kjit::Error);
}

TEST_CASE("fp32x3: the split rows' sizes are checked before any byte count is formed") {
  // M * K fits (just under 2^60 elements) but the split x, M rows of 2 * pitch floats, does not.
  const LinearGnMinProblem big = split_problem((int64_t{1} << 30) - 1, int64_t{1} << 30, 8, 1);
  CHECK_THROWS_WITH_AS(kjit::ops::validate(big),
                       doctest::Contains("split x's element count overflows"), kjit::Error);
  CHECK_THROWS_AS(kjit::ops::linear_gn_min_workspace_size(big), kjit::Error);
  LinearGnMinProblem fp32 = big;
  fp32.precision = Precision::Fp32;
  CHECK_NOTHROW(kjit::ops::validate(fp32));  // only the split rows overflow
}

TEST_CASE("fp32x3: prepack's and the pack's checks, without a device") {
  alignas(16) static float w[64];
  auto field_of = [](auto&& f) {
    try {
      f();
    } catch (const kjit::Error& e) {
      return e.field() + ": " + e.what();
    }
    return std::string("no error");
  };
  const std::string fp32 = field_of([&] { kjit::ops::validate_prepack(8, 8, Precision::Fp32, w); });
  CHECK(fp32.find("precision: ") == 0);
  CHECK(fp32.find("only fp32x3 has a prepacked form") != std::string::npos);
  CHECK(field_of([&] {
          kjit::ops::validate_prepack(8, 8, Precision::Fp32x3, nullptr);
        }).find("weight is null") != std::string::npos);
  const float* odd = reinterpret_cast<const float*>(reinterpret_cast<const char*>(w) + 2);
  CHECK(field_of([&] {
          kjit::ops::validate_prepack(8, 8, Precision::Fp32x3, odd);
        }).find("not aligned") != std::string::npos);
  CHECK(field_of([&] {
          kjit::ops::validate_prepack(-1, 8, Precision::Fp32x3, w);
        }).find("N = -1") != std::string::npos);
  CHECK_NOTHROW(kjit::ops::validate_prepack(8, 8, Precision::Fp32x3, w));
  // An empty pack (default-constructed or moved from) is refused, naming the weight.
  const kjit::ops::LinearGnMinWeights empty;
  CHECK(empty.empty());
  CHECK(empty.describe() == "empty weight pack");
  const std::string e =
      field_of([&] { kjit::ops::validate_pack(split_problem(4, 8, 8, 2), empty, nullptr); });
  CHECK(e.find("weight: ") == 0);
  CHECK(e.find("the weight pack is empty") != std::string::npos);
}

TEST_CASE("fp32x3: split pitch and the workspace's layout") {
  CHECK(kjit::ops::linear_gn_min_split_pitch(1) == 128);
  CHECK(kjit::ops::linear_gn_min_split_pitch(128) == 128);
  CHECK(kjit::ops::linear_gn_min_split_pitch(129) == 256);
  CHECK(kjit::ops::linear_gn_min_split_pitch(8192) == 8192);
  // rows * 2 parts * pitch halves, then the rows' exponents rounded up to 256 bytes.
  CHECK(kjit::ops::linear_gn_min_split_bytes(3, 5) == 3 * 2 * 128 * 2 + 256);
  CHECK(kjit::ops::linear_gn_min_split_bytes(64, 200) == 64 * 2 * 256 * 2 + 256);
  CHECK(kjit::ops::linear_gn_min_split_bytes(65, 200) == 65 * 2 * 256 * 2 + 512);
  const size_t lt = kjit::ops::kLinearGnMinGemmWorkspace;
  // Y, minima, split x, cuBLASLt's, then the split W (not needed with a pack).
  const LinearGnMinProblem seed = split_problem(1024, 8192, 8192, 512);
  const size_t packed =
      size_t{1024} * 8192 * 4 + 1024 * 4 + (size_t{1024} * 2 * 8192 * 2 + 1024 * 4) + lt;
  CHECK(kjit::ops::linear_gn_min_workspace_size(seed, true) == packed);
  CHECK(kjit::ops::linear_gn_min_workspace_size(seed) ==
        packed + size_t{8192} * 2 * 8192 * 2 + 8192 * 4);
  // K = 5: rows of 2 * 128 halves; Y and the minima rounded up to 256 bytes.
  const LinearGnMinProblem small = split_problem(3, 5, 7, 7);
  CHECK(kjit::ops::linear_gn_min_workspace_size(small, true) == 256 + 256 + 3 * 512 + 256 + lt);
  CHECK(kjit::ops::linear_gn_min_workspace_size(small) ==
        256 + 256 + 3 * 512 + 256 + lt + 7 * 512 + 256);
  // The other precisions need no split rows: packed or not, the same size.
  LinearGnMinProblem fp32 = small;
  fp32.precision = Precision::Fp32;
  CHECK(kjit::ops::linear_gn_min_workspace_size(fp32, true) ==
        kjit::ops::linear_gn_min_workspace_size(fp32));
}

TEST_CASE("fp32x3: the specs a call compiles: the split kernel and the scaled fused kernel") {
  const kjit::Target t = kjit::Target::for_cc(90);
  kjit::ops::LinearGnMinOptions opt;
  auto names = [&](const LinearGnMinProblem& p, bool aligned) {
    std::vector<std::string> out;
    for (const kjit::Spec& s : kjit::ops::linear_gn_min_specs_for(p, t, opt, aligned))
      if (s.header() == "kjit/f16_split.cuh") out.push_back(s.instantiation());
    return out;
  };
  using V = std::vector<std::string>;
  CHECK(names(split_problem(1024, 8192, 8192, 512), true) == V{"kjit::f16_split<256, 4, 8192>"});
  CHECK(names(split_problem(1024, 8192, 8192, 512), false) ==
        V{"kjit::f16_split<256, 4, 8192>", "kjit::f16_split<256, 1, 8192>"});
  CHECK(names(split_problem(5, 7, 8, 2), true) == V{"kjit::f16_split<256, 1, 7>"});
  LinearGnMinProblem fp32 = split_problem(1024, 8192, 8192, 512);
  fp32.precision = Precision::Fp32;
  CHECK(names(fp32, true).empty());
  // Every fused-kernel config of fp32x3 undoes the scales (the template's last flag) and adds
  // the bias itself.
  opt.autotune = true;
  auto scaled = [](const LinearGnMinProblem& p, const kjit::ops::GnMinConfig& c) {
    const std::string name = kjit::ops::gn_min_spec(p, c).instantiation();
    return name.compare(name.size() - 6, 6, " true>") == 0;
  };
  const LinearGnMinProblem seed = split_problem(1024, 8192, 8192, 512);
  for (const auto& c : kjit::ops::linear_gn_min_configs_for(seed, t, opt, true)) {
    CHECK(scaled(seed, c));
    CHECK(c.linear_bias);
  }
  for (const auto& c : kjit::ops::linear_gn_min_configs_for(fp32, t, opt, true))
    CHECK(!scaled(fp32, c));
  kjit::ops::GnMinConfig c = kjit::ops::gn_min_heuristic(split_problem(64, 64, 64, 4), 90);
  c.linear_bias = false;
  CHECK_KJIT_ERROR(kjit::ops::validate(split_problem(64, 64, 64, 4), c),
                   kjit::Errc::InvalidArgument);
  CHECK_KJIT_ERROR(kjit::ops::split_spec(7, 4), kjit::Errc::InvalidArgument);
  CHECK_KJIT_ERROR(kjit::ops::split_spec(8, 2), kjit::Errc::InvalidArgument);
  CHECK_KJIT_ERROR(kjit::ops::split_spec(0, 1), kjit::Errc::InvalidArgument);
}

TEST_CASE("fp32x3: bias_add = epilogue is refused with a reason") {
  kjit::ops::LinearGnMinOptions opt;
  opt.bias_add = kjit::ops::LinearBiasAdd::Epilogue;
  alignas(256) static float buf[4096];
  const LinearGnMinProblem p = split_problem(4, 8, 8, 2);
  try {
    kjit::ops::validate_call(p, buf, buf + 256, buf + 512, buf + 768, buf + 1024, buf + 1280,
                             buf + 2048, opt);
    FAIL("no error");
  } catch (const kjit::Error& e) {
    CHECK(e.code() == kjit::Errc::InvalidArgument);
    CHECK(e.field() == "bias_add");
    CHECK(std::string(e.what()).find("cannot run fp32x3") != std::string::npos);
  }
}

TEST_CASE("fp32x3: the split kernel compiles with NVRTC (sm_90, sm_80, sm_75)") {
  kjit_test::CompileProbe probe;
  for (int64_t K : {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{8192}, int64_t{12345}})
    for (int vec : {1, 4}) {
      if (vec == 4 && K % 4 != 0) continue;
      for (const char* arch : {"sm_90", "sm_80", "sm_75"}) {
        const kjit::Spec s = kjit::ops::split_spec(K, vec);
        CAPTURE(s.instantiation());
        CAPTURE(arch);
        const kjit::CompiledKernel k = probe.compile(s, arch);
        CHECK(k.binary.size() > 0);
      }
    }
  MESSAGE(probe.summary("f16_split specializations"));
}

TEST_CASE("fp32x3: fp16 conversions round to nearest even on every binade") {
  // Every fp16 value converts back exactly, and to_half of it gives the same bits.
  for (unsigned h = 0; h < 0x10000; ++h) {
    const auto b = static_cast<unsigned short>(h);
    const float f = fs::from_half(b);
    const double want = half_value(b);
    if (std::isnan(want)) {
      CHECK(std::isnan(f));
      continue;
    }
    REQUIRE(static_cast<double>(f) == want);
    if (h != 0x8000) REQUIRE(fs::to_half(f) == b);  // -0 too, below
  }
  CHECK(fs::to_half(-0.f) == 0x8000);
  // NaN of either sign: 0x7fff, the canonical NaN cvt.rn.f16.f32 writes on the device.
  CHECK(fs::to_half(std::numeric_limits<float>::quiet_NaN()) == 0x7fff);
  CHECK(fs::to_half(-std::numeric_limits<float>::quiet_NaN()) == 0x7fff);
  // Ties: 1 + 2^-11 (halfway between 1 and 1 + 2^-10) to even, 1 + 3 * 2^-11 up; overflow.
  CHECK(fs::to_half(1.f + 0x1p-11f) == 0x3c00);
  CHECK(fs::to_half(1.f + 3 * 0x1p-11f) == 0x3c02);
  CHECK(fs::to_half(65504.f) == 0x7bff);
  CHECK(fs::to_half(65519.f) == 0x7bff);
  CHECK(fs::to_half(65520.f) == 0x7c00);
  CHECK(fs::to_half(0x1p-25f) == 0);          // half the smallest subnormal: to even, 0
  CHECK(fs::to_half(0x1.8p-25f) == 1);        // above it: the smallest subnormal
  CHECK(fs::to_half(0x1.ff8p-15f) == 0x3ff);  // the largest subnormal
  CHECK(fs::to_half(0x1.ffcp-15f) == 0x400);  // a tie above it: up into the normal range
  // Random bit patterns of every binade against the float64 reference.
  int bad = 0;
  for (int i = 0; i < 2000000 && bad < 5; ++i) {
    uint32_t u = static_cast<uint32_t>(kjit_test::uniform(0, 0xffffffff));
    if (i % 2 == 0) u = (u & 0x8fffffffu) | 0x30000000u;  // |a| in fp16's range and below
    if (i % 8 == 0) u = (u & 0xffffe000u) | 0x1000u;      // ties of normal fp16 values
    const float a = from_bits(u);
    const double want = half_reference(a);
    const double got = half_value(fs::to_half(a));
    if (!(got == want || (std::isnan(got) && std::isnan(want)))) {
      ++bad;
      FAIL_CHECK("a = ", a, " (bits ", u, "): got ", got, ", want ", want);
    }
  }
}

TEST_CASE("fp32x3: the row scale and hi + lo * 2^-11 == a * 2^e to 22 bits") {
  // scale_exponent: amax * 2^e in [2^14, 2^15) unless clamped (2^e must stay a normal float).
  CHECK(fs::scale_exponent(0.f) == 0);
  CHECK(fs::scale_exponent(1.f) == 14);
  CHECK(fs::scale_exponent(0.99f) == 15);
  CHECK(fs::scale_exponent(3.4e38f) == -113);
  CHECK(fs::scale_exponent(1e-30f) == 114);        // 1e-30 in [2^-100, 2^-99)
  CHECK(fs::scale_exponent(0x1p-120f) == 127);     // clamped: 2^134 is no float
  CHECK(fs::scale_exponent(from_bits(1)) == 127);  // a subnormal row maximum
  for (int i = 0; i < 100000; ++i) {
    const float amax = from_bits(static_cast<uint32_t>(kjit_test::uniform(0x00800000, 0x7f7fffff)));
    const int e = fs::scale_exponent(amax);
    const double scaled = std::ldexp(static_cast<double>(amax), e);
    REQUIRE(scaled < 32768.0);
    if (e < 127) REQUIRE(scaled >= 16384.0);
  }
  // split: a random row, its scale, each value's hi and lo against a * 2^e in float64.
  double worst = 0;
  for (int row = 0; row < 2000; ++row) {
    const int decades = static_cast<int>(kjit_test::uniform(0, 12));
    const double base = std::pow(10.0, static_cast<double>(kjit_test::uniform(-30, 30)));
    std::vector<float> a(64);
    float amax = 0;
    for (float& v : a) {
      const double mag =
          base * std::pow(10.0, -static_cast<double>(kjit_test::uniform(0, decades)));
      v = static_cast<float>(mag * static_cast<double>(kjit_test::uniform(-1000000, 1000000)) *
                             1e-6);
      amax = std::max(amax, std::fabs(v));
    }
    const int e = fs::scale_exponent(amax);
    const float s = fs::pow2(e);
    for (float v : a) {
      unsigned short hi = 0, lo = 0;
      fs::split(v, s, hi, lo);
      const double want = std::ldexp(static_cast<double>(v), e);
      const double got = half_value(hi) + std::ldexp(half_value(lo), -11);
      // 2^-22 relative, or fp16's smallest step below its normal range (2^-24 * 2^-11 in lo).
      const double err = std::fabs(got - want);
      REQUIRE(err <= std::ldexp(std::fabs(want), -22) + std::ldexp(1.0, -35));
      if (std::fabs(want) >= 0x1p-14) worst = std::max(worst, err / std::fabs(want));
    }
  }
  MESSAGE("hi + lo * 2^-11: worst relative error ", worst, " (2^-22 = ", std::ldexp(1.0, -22), ")");
  // Non-finite values keep their class in hi; lo is 0.
  unsigned short hi = 0, lo = 1;
  fs::split(std::numeric_limits<float>::infinity(), 1.f, hi, lo);
  CHECK((hi == 0x7c00 && lo == 0));
  fs::split(std::numeric_limits<float>::quiet_NaN(), 1.f, hi, lo);
  CHECK((std::isnan(half_value(hi)) && lo == 0));
}

TEST_CASE("fp32x3: the three-product dot product keeps an fp32-class error (docs/OPS.md bound)") {
  // (a_hi b_hi + (a_hi b_lo + a_lo b_hi) * 2^-11) * 2^-(ea + eb) in float64 (the tensor core's
  // products are exact, its sums fp32), against the exact dot product: within 1.5 * 2^-20 of
  // sum |a_i b_i| (docs/OPS.md: 2^-22 for each operand's representation, 2^-22 for the dropped
  // lo * lo), while fp16 alone (hi * hi) is off by ~2^-11.
  double worst_ratio = 0, f16_ratio = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int K = static_cast<int>(kjit_test::uniform(1, 4096));
    std::vector<float> a(static_cast<size_t>(K)), b(static_cast<size_t>(K));
    float amax = 0, bmax = 0;
    for (int k = 0; k < K; ++k) {
      a[static_cast<size_t>(k)] = static_cast<float>(kjit_test::uniform(-1000000, 1000000)) * 1e-6f;
      b[static_cast<size_t>(k)] = static_cast<float>(kjit_test::uniform(-1000000, 1000000)) * 3e-7f;
      amax = std::max(amax, std::fabs(a[static_cast<size_t>(k)]));
      bmax = std::max(bmax, std::fabs(b[static_cast<size_t>(k)]));
    }
    const int ea = fs::scale_exponent(amax), eb = fs::scale_exponent(bmax);
    double exact = 0, split = 0, only_hi = 0, mag = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      unsigned short ah, al, bh, bl;
      fs::split(a[k], fs::pow2(ea), ah, al);
      fs::split(b[k], fs::pow2(eb), bh, bl);
      exact += static_cast<double>(a[k]) * b[k];
      mag += std::fabs(static_cast<double>(a[k]) * b[k]);
      const double hh = half_value(ah) * half_value(bh);
      split += std::ldexp(
          hh + std::ldexp(half_value(ah) * half_value(bl) + half_value(al) * half_value(bh), -11),
          -(ea + eb));
      only_hi += std::ldexp(hh, -(ea + eb));
    }
    if (mag == 0) continue;
    worst_ratio = std::max(worst_ratio, std::fabs(split - exact) / mag);
    f16_ratio = std::max(f16_ratio, std::fabs(only_hi - exact) / mag);
  }
  MESSAGE("fp16x3 products: worst |error| / sum|ab| = ", worst_ratio, " (fp16 alone ", f16_ratio,
          ")");
  CHECK(worst_ratio <= std::ldexp(1.0, -20) * 1.5);
  CHECK(f16_ratio > 16 * worst_ratio);
}
