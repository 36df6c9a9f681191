// LayerNorm / RMSNorm: check against the float64 reference, then device and host time, as
// group_norm_bench.cpp does for GroupNorm. F.layer_norm(x, [width], weight, bias) and
// F.rms_norm(x, [width], weight): no residual, no activation (what bench.py compares with).
#include <algorithm>

#include "cases.hpp"
#include "kjit/host_math.hpp"
#include "kjit/ops/layer_norm.hpp"
#include "kjit/ops/layer_norm_reference.hpp"
#include "timing.hpp"

namespace kjit_bench {

using kjit::ops::LayerNormProblem;

kjit::ops::LayerNormProblem layer_norm_problem(const Case& c) {
  if (c.shape.size() != 2)
    throw kjit::Error(kjit::Errc::InvalidArgument, c.op + " needs shape [rows, width], got " +
                                                       std::to_string(c.shape.size()) + " dims");
  const kjit::DType t = kjit::parse_dtype(c.dtype);
  return c.op == "rms_norm" ? LayerNormProblem::rms_norm(c.shape[0], c.shape[1], t)
                            : LayerNormProblem::layer_norm(c.shape[0], c.shape[1], t);
}

nlohmann::json run_layer_norm(kjit::Runtime& rt, CUstream stream, const Case& c,
                              const Settings& s) {
  const LayerNormProblem p = layer_norm_problem(c);
  const kjit::DType dt = p.dtype;
  const size_t n = static_cast<size_t>(p.rows * p.width), bytes = n * kjit::dtype_size(dt);
  const size_t w = static_cast<size_t>(p.width);
  // Rotating sets of (x, y) together larger than the L2, so every launch reads from HBM.
  const int sets =
      static_cast<int>(std::max<int64_t>(2, (s.rotate_bytes + 2 * bytes - 1) / (2 * bytes)));
  const std::vector<float> x = kjit::host::random_normal(dt, n, 1.f, 2.f, 42);
  const std::vector<float> wt = kjit::host::random_normal(dt, w, 1.f, 0.5f, 43);
  const std::vector<float> bs = kjit::host::random_normal(dt, w, 0.f, 0.5f, 44);
  std::vector<kjit::DeviceBuffer> xs, ys;
  const auto x_bytes = kjit::host::to_bytes(dt, x);
  for (int i = 0; i < sets; ++i) {
    xs.push_back(kjit::DeviceBuffer::from_host(rt, x_bytes));
    ys.emplace_back(rt, bytes);
  }
  const auto dw = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(dt, wt));
  const auto db = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(dt, bs));
  const kjit::ops::LayerNormOptions opt;  // eps 1e-5
  const kjit::ops::LayerNormConfig cfg = kjit::ops::prepare_layer_norm(rt, p, opt);
  auto ptr = [](const kjit::DeviceBuffer& b) { return reinterpret_cast<void*>(b.ptr()); };
  auto call = [&](int i) {
    kjit::ops::layer_norm(rt, p, ptr(xs[i % sets]), nullptr, ptr(ys[i % sets]), nullptr, ptr(dw),
                          p.has_bias ? ptr(db) : nullptr, opt, stream);
  };
  nlohmann::json row = {{"op", c.op},
                        {"shape", shape_text(c)},
                        {"dtype", c.dtype},
                        {"bytes", 2 * bytes},
                        {"config", cfg.describe()}};
  if (s.check) {
    ys[0].fill_bytes(0xFF);  // NaN in every dtype: an unwritten element fails the check
    call(0);
    kjit::Event done(rt);
    done.record(stream);
    done.synchronize();
    const auto y = kjit::host::from_bytes(dt, ys[0].to_host<unsigned char>(bytes));
    const auto ref = kjit::reference::layer_norm(p, x, nullptr, wt.data(),
                                                 p.has_bias ? bs.data() : nullptr, opt.eps);
    const auto e = kjit::host::compare(y, ref.y, 1e-4, 1e-4);
    row["rel_l2"] = e.rel_l2;
    row["allclose_1e-4"] = e.allclose;
    // The tests' verdict: fp32 rel L2 <= 1e-5 and allclose(1e-4); 16-bit 1e-2 and allclose(1e-2).
    const bool f32 = dt == kjit::DType::F32;
    const bool close = f32 ? e.allclose : kjit::host::compare(y, ref.y, 1e-2, 1e-2).allclose;
    row["correct"] = e.nonfinite == 0 && close && e.rel_l2 <= (f32 ? 1e-5 : 1e-2);
  }
  const DeviceTime t = graph_time(rt, stream, std::max(sets, 20), s.replays, call);
  row["device_us"] = t.median_us;
  row["device_us_min"] = t.min_us;
  row["device_us_max"] = t.max_us;
  row["gbps"] = 2.0 * static_cast<double>(bytes) / (t.median_us * 1e-6) / 1e9;
  row["host_us"] = host_us_per_call(rt, stream, 200, 15, [&] { call(0); });
  return row;
}

}  // namespace kjit_bench
