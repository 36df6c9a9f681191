// Linear -> GroupNorm -> min -> bias: check sampled rows against the float64 reference, then
// device time (graph replay) and host time per call.
#include <algorithm>

#include "cases.hpp"
#include "kjit/host_math.hpp"
#include "kjit/ops/linear_gn_min.hpp"
#include "kjit/reference.hpp"
#include "timing.hpp"

namespace kjit_bench {

nlohmann::json run_linear_gn_min(kjit::Runtime& rt, CUstream stream, const Case& c,
                                 const Settings& s) {
  const kjit::ops::LinearGnMinProblem p = linear_gn_min_problem(c);
  kjit::ops::LinearGnMinOptions opt;
  opt.autotune = s.autotune;
  const auto info = kjit::ops::prepare_linear_gn_min(rt, p, opt);
  kjit::ops::reserve_linear_gn_min_workspace(rt, p, stream);

  // nn.Linear's init scale keeps Y = O(1), as in the module.
  const float ws = 1.f / std::sqrt(static_cast<float>(p.K));
  auto normal = [](size_t n, float mean, float sd, uint64_t seed) {
    return kjit::host::random_normal(kjit::DType::F32, n, mean, sd, seed);
  };
  auto x = normal(p.M * p.K, 0.f, 1.f, 1), w = normal(p.N * p.K, 0.f, ws, 2),
       lb = normal(p.N, 0.f, ws, 3);
  auto gamma = normal(p.N, 1.f, 0.5f, 4), beta = normal(p.N, 0.f, 0.5f, 5),
       bias = normal(p.N, 0.f, 1.f, 6);
  auto up = [&](const std::vector<float>& v) { return kjit::DeviceBuffer::from_host(rt, v); };
  auto dx = up(x), dw = up(w), dlb = up(lb), dg = up(gamma), dbe = up(beta), db = up(bias);
  kjit::DeviceBuffer out(rt, p.M * p.N * 4);
  // Split precision with the weight packed once (dtype fp32x3), as an inference runtime keeps it.
  kjit::ops::LinearGnMinWeights packed;
  if (c.dtype == "fp32x3")
    packed = kjit::ops::prepack_linear_gn_min(rt, p.N, p.K, p.precision, dw.as<float>(), stream);
  auto call = [&](int) {
    const void* xp = reinterpret_cast<void*>(dx.ptr());
    if (!packed.empty())
      kjit::ops::linear_gn_min(rt, p, xp, packed, dlb.as<float>(), dg.as<float>(), dbe.as<float>(),
                               db.as<float>(), out.as<float>(), opt, stream);
    else
      kjit::ops::linear_gn_min(rt, p, xp, reinterpret_cast<void*>(dw.ptr()), dlb.as<float>(),
                               dg.as<float>(), dbe.as<float>(), db.as<float>(), out.as<float>(),
                               opt, stream);
  };
  const double flops = 2.0 * p.M * p.N * p.K;
  nlohmann::json row = {
      {"op", "linear_gn_min"},
      {"shape", shape_text(c)},
      {"dtype", c.dtype},
      {"config",
       info.describe() + (info.split_kernel.empty() ? "" : "; split " + info.split_kernel)},
      {"bytes", static_cast<double>((p.M * p.K + p.N * p.K + 2 * p.M * p.N) * 4)}};
  if (s.check) {
    out.fill_bytes(0xFF);
    call(0);
    kjit::Event done(rt);
    done.record(stream);
    done.synchronize();
    std::vector<float> o(p.M * p.N);
    out.download(o.data(), o.size() * 4);
    std::vector<int64_t> rows = {0, p.M - 1, p.M / 2, p.M / 3};
    auto mins = kjit::reference::linear_gn_min_rows(p, x.data(), w.data(), lb.data(), gamma.data(),
                                                    beta.data(), 1e-5, rows);
    const bool finite = std::all_of(o.begin(), o.end(), [](float v) { return std::isfinite(v); });
    std::vector<float> got;
    std::vector<double> want;
    for (size_t r = 0; r < rows.size(); ++r)
      for (int64_t ch = 0; ch < p.N; ++ch) {
        got.push_back(o[ch * p.M + rows[r]]);
        want.push_back(mins[r] + bias[ch]);
      }
    const auto err = kjit::host::compare(got, want, 0, 0);  // max_abs and rel L2 of the samples
    row["max_abs_err_sampled_rows"] = err.max_abs;
    row["rel_l2"] = err.rel_l2;
    const bool fp32_class =
        p.precision == kjit::ops::Precision::Fp32 || p.precision == kjit::ops::Precision::Fp32x3;
    row["correct"] = finite && err.nonfinite == 0 && err.max_abs <= (fp32_class ? 1e-4 : 5e-3);
  }
  DeviceTime t = graph_time(rt, stream, 5, std::max(10, s.replays / 3), call);
  row["device_us"] = t.median_us;
  row["tflops"] = flops / (t.median_us * 1e-6) / 1e12;
  row["gbps"] = row["bytes"].get<double>() / (t.median_us * 1e-6) / 1e9;
  row["host_us"] = host_us_per_call(rt, stream, 20, 5, [&] { call(0); });
  return row;
}

}  // namespace kjit_bench
