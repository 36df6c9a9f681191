// Linear-GN-min's split precision (Precision::Fp32x3) without a GPU: names, validation, workspace
// layout, the specs a call compiles (and NVRTC compiling them), and the split kernel
// (kernel_templates/kjit/tf32_split.cuh) run on the host: hi is a rounded to TF32 to nearest
// with ties away from zero (what PTX's cvt.rna.tf32.f32 does), checked against a reference
// computed in double from the value's binade; lo = a - hi reconstructs a exactly; the padding is
// zero; nothing outside the output rows is written. Plus the error bound of the 3xTF32 product
// that docs/OPS.md states.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "compile_probe.hpp"
#include "kjit/error.hpp"
#include "kjit/ops/linear_gn_min.hpp"
#include "kjit/spec.hpp"
#include "test_util.hpp"

// ---- the CUDA surface tf32_split.cuh uses, on the host ---------------------------------
namespace emu {
struct Dim {
  unsigned x = 0, y = 0, z = 0;
};
}  // namespace emu
namespace {
emu::Dim threadIdx, blockIdx, gridDim;
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
}  // namespace
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(n)
#include "../../kernel_templates/kjit/tf32_split.cuh"
#undef __global__
#undef __forceinline__
#undef __launch_bounds__

namespace {

using kjit::ops::LinearGnMinProblem;
using kjit::ops::Precision;

LinearGnMinProblem split_problem(int64_t M, int64_t K, int64_t N, int64_t G) {
  LinearGnMinProblem p;
  p.M = M;
  p.K = K;
  p.N = N;
  p.G = G;
  p.precision = Precision::Fp32x3;
  return p;
}

// a rounded to TF32, to nearest with ties away from zero, in double: the TF32 grid of a's binade
// 2^E (10 fraction bits: spacing 2^(E-10)), and below the normal range fp32's subnormal grid
// kept to its upper 10 bits (spacing 2^-136).
float rna_reference(float a) {
  if (!std::isfinite(a) || a == 0.f) return a;
  int e = 0;
  std::frexp(static_cast<double>(a), &e);  // |a| in [2^(e-1), 2^e)
  const int q = std::max(e - 1 - 10, -136);
  const double r = std::round(std::ldexp(static_cast<double>(a), -q));  // half away from zero
  const double hi = std::ldexp(r, q);
  return hi > std::numeric_limits<float>::max()    ? std::numeric_limits<float>::infinity()
         : hi < -std::numeric_limits<float>::max() ? -std::numeric_limits<float>::infinity()
                                                   : static_cast<float>(hi);
}

float from_bits(uint32_t u) {
  return __uint_as_float(u);
}

// Runs tf32_split<256, kVec, kCols> over every (block, thread) of a grid of `blocks` CTAs.
template <int kVec, long long kCols>
void run_split(const float* src, float* dst, long long rows, bool lo_first, unsigned blocks) {
  constexpr long long pitch = (kCols + 63) / 64 * 64;
  gridDim.x = blocks;
  for (unsigned b = 0; b < blocks; ++b)
    for (unsigned t = 0; t < 256; ++t) {
      blockIdx.x = b;
      threadIdx.x = t;
      kjit::tf32_split<256, kVec, kCols>(src, dst, rows, lo_first ? pitch : 0,
                                         lo_first ? 0 : pitch);
    }
}

// Splits a random [rows, kCols] matrix (src offset by `offset` floats from a 16-byte boundary) and
// checks every output float, the padding and the guard after the rows.
template <int kVec, long long kCols>
void check_split(long long rows, bool lo_first, int offset, unsigned blocks) {
  constexpr long long pitch = (kCols + 63) / 64 * 64;
  CAPTURE(kVec);
  CAPTURE(kCols);
  CAPTURE(rows);
  CAPTURE(lo_first);
  CAPTURE(offset);
  std::vector<float> host(static_cast<size_t>(rows * kCols + 8));
  for (float& v : host) {
    // Random bit patterns of every binade (and sign), with some exact ties and zeros.
    uint32_t u = static_cast<uint32_t>(kjit_test::uniform(0, 0xffffffff));
    const int64_t kind = kjit_test::uniform(0, 9);
    if (kind == 0) u = (u & 0xffffe000u) | 0x1000u;  // a tie
    if (kind == 1) u &= 0x80000000u;                 // +-0
    // Finite and below the values that round to inf (whose lo would be 0, not a - hi).
    if ((u & 0x7fffffffu) >= 0x7f7ff000u) u &= 0xbfffffffu;
    v = from_bits(u);
  }
  const float* src = host.data() + offset;
  const size_t out_floats = static_cast<size_t>(rows * 2 * pitch);
  std::vector<float> dst(out_floats + 64, from_bits(0x7fc01234u));  // NaN poison, guard after
  run_split<kVec, kCols>(src, dst.data(), rows, lo_first, blocks);
  const long long hi_off = lo_first ? pitch : 0, lo_off = lo_first ? 0 : pitch;
  int bad = 0;
  for (long long r = 0; r < rows && bad < 5; ++r)
    for (long long c = 0; c < pitch && bad < 5; ++c) {
      const float hi = dst[static_cast<size_t>(r * 2 * pitch + hi_off + c)];
      const float lo = dst[static_cast<size_t>(r * 2 * pitch + lo_off + c)];
      if (c >= kCols) {
        if (!(hi == 0.f && lo == 0.f)) {
          ++bad;
          FAIL_CHECK("padding at row ", r, " column ", c, " is not zero: ", hi, " ", lo);
        }
        continue;
      }
      const float a = src[r * kCols + c];
      const bool ok = __float_as_uint(hi) == __float_as_uint(rna_reference(a)) &&
                      (__float_as_uint(hi) & 0x1fffu) == 0 && hi + lo == a &&
                      static_cast<double>(hi) + lo == static_cast<double>(a);
      if (!ok) {
        ++bad;
        FAIL_CHECK("row ", r, " column ", c, ": a = ", a, " hi = ", hi, " lo = ", lo,
                   " want hi = ", rna_reference(a));
      }
    }
  for (size_t i = out_floats; i < dst.size(); ++i)
    if (__float_as_uint(dst[i]) != 0x7fc01234u) {
      FAIL_CHECK("the split wrote past its rows at float ", i);
      break;
    }
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
  CHECK(kjit::ops::linear_gn_min_split_pitch(1) == 64);
  CHECK(kjit::ops::linear_gn_min_split_pitch(64) == 64);
  CHECK(kjit::ops::linear_gn_min_split_pitch(65) == 128);
  CHECK(kjit::ops::linear_gn_min_split_pitch(8192) == 8192);
  const size_t lt = kjit::ops::kLinearGnMinGemmWorkspace;
  // Y, minima, split x, cuBLASLt's, then the split W (not needed with a pack).
  const LinearGnMinProblem seed = split_problem(1024, 8192, 8192, 512);
  const size_t packed = size_t{1024} * 8192 * 4 + 1024 * 4 + size_t{1024} * 2 * 8192 * 4 + lt;
  CHECK(kjit::ops::linear_gn_min_workspace_size(seed, true) == packed);
  CHECK(kjit::ops::linear_gn_min_workspace_size(seed) == packed + size_t{8192} * 2 * 8192 * 4);
  // K = 5: rows of 2 * 64 floats; Y and the minima rounded up to 256 bytes.
  const LinearGnMinProblem small = split_problem(3, 5, 7, 7);
  CHECK(kjit::ops::linear_gn_min_workspace_size(small, true) == 256 + 256 + 3 * 128 * 4 + lt);
  CHECK(kjit::ops::linear_gn_min_workspace_size(small) ==
        256 + 256 + 3 * 128 * 4 + lt + 7 * 128 * 4);
  // The other precisions need no split rows: packed or not, the same size.
  LinearGnMinProblem fp32 = small;
  fp32.precision = Precision::Fp32;
  CHECK(kjit::ops::linear_gn_min_workspace_size(fp32, true) ==
        kjit::ops::linear_gn_min_workspace_size(fp32));
}

TEST_CASE("fp32x3: the specs a call compiles include the split kernel") {
  const kjit::Target t = kjit::Target::for_cc(90);
  kjit::ops::LinearGnMinOptions opt;
  auto names = [&](const LinearGnMinProblem& p, bool aligned) {
    std::vector<std::string> out;
    for (const kjit::Spec& s : kjit::ops::linear_gn_min_specs_for(p, t, opt, aligned))
      if (s.header() == "kjit/tf32_split.cuh") out.push_back(s.instantiation());
    return out;
  };
  using V = std::vector<std::string>;
  CHECK(names(split_problem(1024, 8192, 8192, 512), true) == V{"kjit::tf32_split<256, 4, 8192>"});
  CHECK(names(split_problem(1024, 8192, 8192, 512), false) ==
        V{"kjit::tf32_split<256, 4, 8192>", "kjit::tf32_split<256, 1, 8192>"});
  CHECK(names(split_problem(5, 7, 8, 2), true) == V{"kjit::tf32_split<256, 1, 7>"});
  LinearGnMinProblem fp32 = split_problem(1024, 8192, 8192, 512);
  fp32.precision = Precision::Fp32;
  CHECK(names(fp32, true).empty());
  CHECK_KJIT_ERROR(kjit::ops::tf32_split_spec(7, 4), kjit::Errc::InvalidArgument);
  CHECK_KJIT_ERROR(kjit::ops::tf32_split_spec(8, 2), kjit::Errc::InvalidArgument);
  CHECK_KJIT_ERROR(kjit::ops::tf32_split_spec(0, 1), kjit::Errc::InvalidArgument);
}

TEST_CASE("fp32x3: the split kernel compiles with NVRTC (sm_90, sm_80, and sm_75's bit form)") {
  kjit_test::CompileProbe probe;
  for (int64_t K : {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{8192}, int64_t{12345}})
    for (int vec : {1, 4}) {
      if (vec == 4 && K % 4 != 0) continue;
      for (const char* arch : {"sm_90", "sm_80", "sm_75"}) {
        const kjit::Spec s = kjit::ops::tf32_split_spec(K, vec);
        CAPTURE(s.instantiation());
        CAPTURE(arch);
        const kjit::CompiledKernel k = probe.compile(s, arch);
        CHECK(k.binary.size() > 0);
      }
    }
  MESSAGE(probe.summary("tf32_split specializations"));
}

TEST_CASE("fp32x3: round_rna is round to nearest, ties away from zero, on every binade") {
  // Exact ties go away from zero; one ulp of fp32 either side goes to the nearer neighbour.
  const float one_tie = from_bits(0x3f801000u);  // 1 + 2^-11: halfway between 1 and 1 + 2^-10
  CHECK(kjit::tf32::round_rna(one_tie) == from_bits(0x3f802000u));
  CHECK(kjit::tf32::round_rna(-one_tie) == -from_bits(0x3f802000u));
  CHECK(kjit::tf32::round_rna(from_bits(0x3f800fffu)) == 1.f);
  CHECK(kjit::tf32::round_rna(from_bits(0x3f801001u)) == from_bits(0x3f802000u));
  // A carry into the exponent, the largest finite values (to inf), subnormals, inf and NaN.
  CHECK(kjit::tf32::round_rna(from_bits(0x3ffff000u)) == 2.f);
  CHECK(kjit::tf32::round_rna(from_bits(0x7f7ff000u)) == std::numeric_limits<float>::infinity());
  CHECK(kjit::tf32::round_rna(from_bits(0x7f7fefffu)) == from_bits(0x7f7fe000u));
  CHECK(kjit::tf32::round_rna(from_bits(0x00001000u)) == from_bits(0x00002000u));
  CHECK(kjit::tf32::round_rna(from_bits(0x00000fffu)) == 0.f);
  CHECK(std::isinf(kjit::tf32::round_rna(-std::numeric_limits<float>::infinity())));
  CHECK(std::isnan(kjit::tf32::round_rna(std::numeric_limits<float>::quiet_NaN())));
  float hi = 0, lo = 0;
  kjit::tf32::split(std::numeric_limits<float>::infinity(), hi, lo);
  CHECK((std::isinf(hi) && lo == 0.f));
  // Random bit patterns of every binade against the reference.
  int bad = 0;
  for (int i = 0; i < 2000000 && bad < 5; ++i) {
    uint32_t u = static_cast<uint32_t>(kjit_test::uniform(0, 0xffffffff));
    if ((u & 0x7f800000u) == 0x7f800000u) continue;
    if (i % 4 == 0) u = (u & 0xffffe000u) | 0x1000u;  // ties
    const float a = from_bits(u);
    const float got = kjit::tf32::round_rna(a);
    if (__float_as_uint(got) != __float_as_uint(rna_reference(a))) {
      ++bad;
      FAIL_CHECK("a = ", a, " (bits ", u, "): got ", got, ", want ", rna_reference(a));
    }
  }
}

TEST_CASE("fp32x3: the split kernel on the host: hi + lo == x exactly, zero padding, no overrun") {
  check_split<4, 8>(5, true, 0, 1);     // x's layout [lo | hi], one CTA striding
  check_split<4, 8>(5, false, 0, 3);    // W's layout [hi | lo]
  check_split<4, 128>(9, true, 4, 2);   // whole 64-float parts, no padding
  check_split<4, 100>(7, false, 0, 5);  // padding 100 .. 128
  check_split<1, 7>(13, true, 1, 2);    // odd width: scalar loads, src not 16-byte aligned
  check_split<1, 1>(3, false, 3, 1);    // one column
  check_split<1, 130>(4, true, 2, 4);   // scalar, a third padded part
  check_split<1, 64>(1, false, 1, 1);   // one row
}

TEST_CASE("fp32x3: the 3xTF32 product keeps an fp32-class error (docs/OPS.md bound)") {
  // sum(a_i b_i) from the three products (lo rounded again by the tensor core: truncation to
  // TF32 is the worst case) in double, against the exact dot product: within 1.5 * 2^-20 of
  // sum |a_i b_i| (the bound docs/OPS.md derives: 2 * 2^-21 + 2^-22 per product), while TF32
  // alone (hi*hi) is off by ~2^-11.
  auto trunc_tf32 = [](float v) { return __uint_as_float(__float_as_uint(v) & 0xffffe000u); };
  double worst_ratio = 0, tf32_ratio = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int K = static_cast<int>(kjit_test::uniform(1, 4096));
    double exact = 0, split = 0, only_hi = 0, mag = 0;
    for (int k = 0; k < K; ++k) {
      const auto a = static_cast<float>(kjit_test::uniform(-1000000, 1000000)) * 1e-6f;
      const auto b = static_cast<float>(kjit_test::uniform(-1000000, 1000000)) * 3e-7f;
      float ah, al, bh, bl;
      kjit::tf32::split(a, ah, al);
      kjit::tf32::split(b, bh, bl);
      exact += static_cast<double>(a) * b;
      mag += std::fabs(static_cast<double>(a) * b);
      split += static_cast<double>(ah) * bh + static_cast<double>(ah) * trunc_tf32(bl) +
               static_cast<double>(trunc_tf32(al)) * bh;
      only_hi += static_cast<double>(ah) * bh;
    }
    if (mag == 0) continue;
    worst_ratio = std::max(worst_ratio, std::fabs(split - exact) / mag);
    tf32_ratio = std::max(tf32_ratio, std::fabs(only_hi - exact) / mag);
  }
  MESSAGE("3xTF32 products: worst |error| / sum|ab| = ", worst_ratio, " (TF32 alone ", tf32_ratio,
          ")");
  CHECK(worst_ratio <= std::ldexp(1.0, -20) * 1.5);
  CHECK(tf32_ratio > 16 * worst_ratio);
}
