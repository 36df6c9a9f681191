// GroupNorm+SiLU: check against the float64 reference, then device and host time.
#include <algorithm>

#include "cases.hpp"
#include "kjit/host_math.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/reference.hpp"
#include "timing.hpp"

namespace kjit_bench {

using kjit::ops::GroupNormProblem;

nlohmann::json run_group_norm(kjit::Runtime& rt, CUstream stream, const Case& c,
                              const Settings& s) {
  const kjit::DType dt = kjit::parse_dtype(c.dtype);
  const auto layout = c.layout == "nhwc" ? kjit::ops::Layout::NHWC : kjit::ops::Layout::NCHW;
  GroupNormProblem p = GroupNormProblem::from_shape(c.shape, c.groups, dt, layout);
  const size_t n = static_cast<size_t>(p.N * p.C * p.S), bytes = n * kjit::dtype_size(dt);
  kjit::ops::GroupNormOptions opt;
  opt.autotune = s.autotune;
  const kjit::ops::GroupNormConfig cfg = kjit::ops::prepare_group_norm(rt, p, opt);

  // Rotating sets of (x, y) together larger than the L2, so every launch reads from HBM.
  const int sets =
      static_cast<int>(std::max<int64_t>(2, (s.rotate_bytes + 2 * bytes - 1) / (2 * bytes)));
  std::vector<kjit::DeviceBuffer> xs, ys;
  auto x = kjit::host::random_normal(dt, n, 1.f, 2.f, 42);
  auto w = kjit::host::random_normal(dt, static_cast<size_t>(p.C), 1.f, 0.5f, 43);
  auto b = kjit::host::random_normal(dt, static_cast<size_t>(p.C), 0.f, 0.5f, 44);
  auto xb = kjit::host::to_bytes(dt, x);
  for (int i = 0; i < sets; ++i) {
    xs.emplace_back(rt, bytes);
    ys.emplace_back(rt, bytes);
    xs.back().upload(xb.data(), bytes);
  }
  kjit::DeviceBuffer dw(rt, p.C * kjit::dtype_size(dt)), db(rt, p.C * kjit::dtype_size(dt));
  auto wb = kjit::host::to_bytes(dt, w), bb = kjit::host::to_bytes(dt, b);
  dw.upload(wb.data(), wb.size());
  db.upload(bb.data(), bb.size());
  auto call = [&](int i) {
    kjit::ops::group_norm(rt, p, reinterpret_cast<void*>(xs[i % sets].ptr()),
                          reinterpret_cast<void*>(ys[i % sets].ptr()),
                          reinterpret_cast<void*>(dw.ptr()), reinterpret_cast<void*>(db.ptr()), opt,
                          stream);
  };

  nlohmann::json row = {{"op", "group_norm"}, {"shape", shape_text(c)},   {"dtype", c.dtype},
                        {"layout", c.layout}, {"config", cfg.describe()}, {"bytes", 2 * bytes}};
  if (s.check) {
    ys[0].fill_bytes(0xFF);
    call(0);
    kjit::Event done(rt);
    done.record(stream);
    done.synchronize();
    std::vector<unsigned char> out(bytes);
    ys[0].download(out.data(), bytes);
    const std::vector<float> y = kjit::host::from_bytes(dt, out);
    auto ref = kjit::reference::group_norm(p, x, w.data(), b.data(), 1e-5);
    auto e = kjit::host::compare(y, ref, 1e-4, 1e-4);
    row["rel_l2"] = e.rel_l2;
    row["allclose_1e-4"] = e.allclose;
    row["correct"] = e.nonfinite == 0 && e.rel_l2 <= (dt == kjit::DType::F32 ? 1e-5 : 1e-2);
  }
  const int k = std::max(sets, 20);
  DeviceTime t = graph_time(rt, stream, k, s.replays, call);
  row["device_us"] = t.median_us;
  row["device_us_min"] = t.min_us;
  row["device_us_max"] = t.max_us;
  row["gbps"] = 2.0 * static_cast<double>(bytes) / (t.median_us * 1e-6) / 1e9;
  row["host_us"] = host_us_per_call(rt, stream, 200, 15, [&] { call(0); });
  return row;
}

}  // namespace kjit_bench
