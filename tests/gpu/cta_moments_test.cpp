// LayerNorm's one-reduction CTA statistics (rownorm::cta_moments, kjit/layer_norm.cuh) on crafted
// per-thread moments, through kjit::test_cta_moments: the fast path and each reason for the
// exact one (an outlier at a warp's lane 0, at the CTA's thread 0, a sum that overflows), empty
// threads, warps and CTAs, NaN, moments past the float range; every thread of a CTA must return
// the same bits, within a few fp32 ulp of M2 computed in float64 from the same inputs (inf where
// that is past the float range).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gpu_env.hpp"
#include "test_util.hpp"

using kjit_test::runtime;

namespace {

struct Moments {
  std::vector<float> n, m, m2;
};

// One thread's moments of `vals` (exact in float64, then rounded once).
void add_thread(Moments* t, const std::vector<double>& vals) {
  double s = 0, d2 = 0;
  for (double v : vals) s += v;
  const double mean = vals.empty() ? 0 : s / static_cast<double>(vals.size());
  for (double v : vals) d2 += (v - mean) * (v - mean);
  t->n.push_back(static_cast<float>(vals.size()));
  t->m.push_back(static_cast<float>(mean));
  t->m2.push_back(static_cast<float>(d2));
}

// A CTA of `threads`: thread t holds `per` values N(mean, 1), the first `active` threads only;
// then `edit` changes thread t's values.
template <class Edit>
Moments cta(int threads, int active, int per, double mean, uint64_t seed, Edit edit) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> normal(mean, 1.0);
  Moments t;
  for (int i = 0; i < threads; ++i) {
    std::vector<double> vals;
    if (i < active)
      for (int k = 0; k < per; ++k) vals.push_back(normal(g));
    edit(i, &vals);
    add_thread(&t, vals);
  }
  return t;
}

// float64 (mean, M2) of what the floats say: the parallel-variance rule about the exact mean.
void reference(const Moments& t, double* mean, double* m2, double* cnt) {
  double c = 0, s = 0;
  for (size_t i = 0; i < t.n.size(); ++i) {
    c += t.n[i];
    s += static_cast<double>(t.n[i]) * t.m[i];
  }
  *cnt = c;
  *mean = c > 0 ? s / c : 0;
  double a = 0;
  for (size_t i = 0; i < t.n.size(); ++i) {
    const double d = t.n[i] > 0 ? t.m[i] - *mean : 0;
    a += t.m2[i] + t.n[i] * d * d;
  }
  *m2 = a;
}

struct Case {
  std::string what;
  Moments t;
};

void run(int threads, const std::vector<Case>& cases) {
  auto& rt = runtime();
  kjit::Stream stream(rt);
  Moments all;
  std::vector<float> cnt;
  for (const Case& c : cases) {
    all.n.insert(all.n.end(), c.t.n.begin(), c.t.n.end());
    all.m.insert(all.m.end(), c.t.m.begin(), c.t.m.end());
    all.m2.insert(all.m2.end(), c.t.m2.begin(), c.t.m2.end());
    double mean, m2, c_n;
    reference(c.t, &mean, &m2, &c_n);
    cnt.push_back(static_cast<float>(c_n));
  }
  const auto dn = kjit::DeviceBuffer::from_host(rt, all.n);
  const auto dm = kjit::DeviceBuffer::from_host(rt, all.m);
  const auto dm2 = kjit::DeviceBuffer::from_host(rt, all.m2);
  const auto dc = kjit::DeviceBuffer::from_host(rt, cnt);
  kjit::DeviceBuffer out(rt, all.n.size() * 2 * sizeof(float));
  out.fill_bytes(0x7F);  // huge and finite: an unwritten result fails
  kjit::Spec s("kjit/test_row_norm.cuh", "kjit::test_cta_moments");
  s.value(threads);
  kjit::LaunchConfig cfg;
  cfg.grid.x = static_cast<unsigned>(cases.size());
  cfg.block.x = static_cast<unsigned>(threads);
  rt.kernel(s)(stream, cfg, dn.ptr(), dm.ptr(), dm2.ptr(), dc.ptr(), out.ptr());
  stream.synchronize();
  const std::vector<float> got = out.to_host<float>(all.n.size() * 2);
  for (size_t b = 0; b < cases.size(); ++b) {
    CAPTURE(threads);
    CAPTURE(cases[b].what);
    double mean, m2, c_n;
    reference(cases[b].t, &mean, &m2, &c_n);
    const float* r = &got[b * threads * 2];
    int differ = 0;
    for (int i = 1; i < threads; ++i) differ += std::memcmp(r, r + 2 * i, 2 * sizeof(float)) != 0;
    CHECK_MESSAGE(differ == 0, differ << " threads returned other bits than thread 0");
    if (std::isnan(m2) || std::isnan(mean)) {
      CHECK(std::isnan(r[1]));
      continue;
    }
    if (m2 > std::numeric_limits<float>::max()) {  // no fp32 M2: inf, with a finite mean
      CHECK_MESSAGE((std::isinf(r[1]) && r[1] > 0.f), "M2 " << r[1] << " against " << m2);
      CHECK_MESSAGE(std::fabs(r[0] - mean) <= 1e-6 * std::fabs(mean), "mean " << r[0]);
      continue;
    }
    // Inputs rounded to float carry ~2^-24 of each m2 and n (m - mean)^2; the kernel's sums add
    // a few ulp per level (log2(threads) + 5 levels), the fast path at most 8x that.
    const double spread = std::sqrt(m2 / std::max(c_n, 1.0));
    CHECK_MESSAGE(std::fabs(r[0] - mean) <= 1e-6 * (std::fabs(mean) + spread) + 1e-30,
                  "mean " << r[0] << " against " << mean);
    CHECK_MESSAGE(std::fabs(r[1] - m2) <= 2e-5 * m2 + 1e-30, "M2 " << r[1] << " against " << m2);
  }
}

}  // namespace

TEST_CASE("cta_moments: one reduction, the exact path where it would lose bits, same bits") {
  const uint64_t seed = kjit_test::seed();
  auto none = [](int, std::vector<double>*) {};
  for (int threads : {32, 64, 96, 256, 1024}) {
    std::vector<Case> cases;
    cases.push_back({"plain, mean 100", cta(threads, threads, 16, 100.0, seed, none)});
    cases.push_back({"plain, mean 0, 1 value each", cta(threads, threads, 1, 0.0, seed + 1, none)});
    cases.push_back({"outlier at thread 0 (the CTA's reference)",
                     cta(threads, threads, 16, 100.0, seed + 2, [](int i, std::vector<double>* v) {
                       if (i == 0)
                         for (double& x : *v) x += 1e3;
                     })});
    cases.push_back(
        {"outlier at the last warp's lane 0",
         cta(threads, threads, 16, 100.0, seed + 3, [threads](int i, std::vector<double>* v) {
           if (i == threads - 32)
             for (double& x : *v) x += 1e3;
         })});
    cases.push_back(
        {"first values far from the rest",
         cta(threads, threads, 4, 0.0, seed + 4, [threads](int i, std::vector<double>* v) {
           if (i < threads / 8)
             for (double& x : *v) x += 1e4;
         })});
    cases.push_back({"the last threads empty (a row's end)",
                     cta(threads, threads - 40 > 0 ? threads - 40 : 3, 8, 5.0, seed + 5, none)});
    cases.push_back({"one thread with values", cta(threads, 1, 4, -7.0, seed + 6, none)});
    cases.push_back({"no values (cnt 0)", cta(threads, 0, 4, 0.0, seed + 7, none)});
    // Squared deviations from thread 0's mean (0) overflow fp32, those from the mean (~big)
    // do not: M2 ~ 4 big^2 (thread 0's own) = 1.7e38, a ~ 4 (threads - 1) big^2.
    cases.push_back({"a sum about thread 0's mean past the float range",
                     cta(threads, threads, 4, 0.0, seed + 8, [](int i, std::vector<double>* v) {
                       const double big = std::sqrt(3.4e38 / 8);
                       for (double& x : *v) x = i == 0 ? 0.0 : big;
                     })});
    // Every other thread at 2^120: M2 past the float range, and so is the sum of the threads'
    // count times their mean's distance from thread 0's (16 threads x 64 x 2^120 = 2^130):
    // summed scaled (SumScale), the mean is 2^119, M2 inf (PyTorch's rstd = 0), not NaN.
    cases.push_back({"moments past the float range, half the threads at 2^120",
                     cta(threads, threads, 64, 0.0, seed + 10, [](int i, std::vector<double>* v) {
                       for (double& x : *v) x = i % 2 ? 0x1p120 : 0.0;
                     })});
    Case nan{"NaN in one thread's values", cta(threads, threads, 4, 1.0, seed + 9, none)};
    nan.t.m2[threads / 2] = std::numeric_limits<float>::quiet_NaN();
    cases.push_back(nan);
    run(threads, cases);
  }
}
