// GroupNorm+SiLU: check against the float64 reference, then device and host time.
#include <algorithm>
#include <optional>

#include "cases.hpp"
#include "kjit/host_math.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/reference.hpp"
#include "timing.hpp"

namespace kjit_bench {

using kjit::ops::GroupNormProblem;

namespace {

// One GroupNorm case's rotating buffers and parameters, timed under any number of configs.
class GnCase {
 public:
  GnCase(kjit::Runtime& rt, CUstream stream, const Case& c, const Settings& s)
      : rt_(rt), stream_(stream), c_(c), s_(s), dt_(kjit::parse_dtype(c.dtype)) {
    p_ = group_norm_problem(c);
    n_ = static_cast<size_t>(p_.N * p_.C * p_.S);
    bytes_ = n_ * kjit::dtype_size(dt_);
    // Rotating sets of (x, y) together larger than the L2, so every launch reads from HBM.
    sets_ =
        static_cast<int>(std::max<int64_t>(2, (s.rotate_bytes + 2 * bytes_ - 1) / (2 * bytes_)));
    x_ = kjit::host::random_normal(dt_, n_, 1.f, 2.f, 42);
    w_ = kjit::host::random_normal(dt_, static_cast<size_t>(p_.C), 1.f, 0.5f, 43);
    b_ = kjit::host::random_normal(dt_, static_cast<size_t>(p_.C), 0.f, 0.5f, 44);
    const auto x_bytes = kjit::host::to_bytes(dt_, x_);
    for (int i = 0; i < sets_; ++i) {
      xs_.push_back(kjit::DeviceBuffer::from_host(rt, x_bytes));
      ys_.emplace_back(rt, bytes_);
    }
    dw_ = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(dt_, w_));
    db_ = kjit::DeviceBuffer::from_host(rt, kjit::host::to_bytes(dt_, b_));
  }

  const GroupNormProblem& problem() const { return p_; }

  // The heuristic's (or autotuned) config when `force` is empty.
  nlohmann::json run(const std::optional<kjit::ops::GroupNormConfig>& force, bool host_time) {
    kjit::ops::GroupNormOptions opt;
    opt.autotune = s_.autotune;
    opt.config = force;
    const kjit::ops::GroupNormConfig cfg = kjit::ops::prepare_group_norm(rt_, p_, opt);
    // Without it a split config's graph would time the capture fallback instead.
    kjit::ops::reserve_group_norm_workspace(rt_, p_, opt, stream_);
    auto call = [&](int i) {
      kjit::ops::group_norm(rt_, p_, reinterpret_cast<void*>(xs_[i % sets_].ptr()),
                            reinterpret_cast<void*>(ys_[i % sets_].ptr()),
                            reinterpret_cast<void*>(dw_.ptr()), reinterpret_cast<void*>(db_.ptr()),
                            opt, stream_);
    };
    nlohmann::json row = {{"op", "group_norm"},  {"shape", shape_text(c_)},  {"dtype", c_.dtype},
                          {"layout", c_.layout}, {"config", cfg.describe()}, {"bytes", 2 * bytes_}};
    if (s_.check) check(call, &row);
    const int k = std::max(sets_, 20);
    DeviceTime t = graph_time(rt_, stream_, k, s_.replays, call);
    row["device_us"] = t.median_us;
    row["device_us_min"] = t.min_us;
    row["device_us_max"] = t.max_us;
    row["gbps"] = 2.0 * static_cast<double>(bytes_) / (t.median_us * 1e-6) / 1e9;
    if (host_time) row["host_us"] = host_us_per_call(rt_, stream_, 200, 15, [&] { call(0); });
    return row;
  }

 private:
  template <class Call>
  void check(Call& call, nlohmann::json* row) {
    ys_[0].fill_bytes(0xFF);  // NaN in every dtype: an unwritten element fails the check
    call(0);
    kjit::Event done(rt_);
    done.record(stream_);
    done.synchronize();
    const std::vector<float> y = kjit::host::from_bytes(dt_, ys_[0].to_host<unsigned char>(bytes_));
    if (ref_.empty()) ref_ = kjit::reference::group_norm(p_, x_, w_.data(), b_.data(), 1e-5);
    auto e = kjit::host::compare(y, ref_, 1e-4, 1e-4);
    (*row)["rel_l2"] = e.rel_l2;
    (*row)["allclose_1e-4"] = e.allclose;
    // The tests' verdict: fp32 rel L2 <= 1e-5 and allclose(1e-4); 16-bit rel L2 <= 1e-2 and
    // allclose(1e-2). rel L2 alone would pass a few elements far off.
    const bool f32 = dt_ == kjit::DType::F32;
    const bool close = f32 ? e.allclose : kjit::host::compare(y, ref_, 1e-2, 1e-2).allclose;
    (*row)["correct"] = e.nonfinite == 0 && close && e.rel_l2 <= (f32 ? 1e-5 : 1e-2);
  }

  kjit::Runtime& rt_;
  CUstream stream_;
  Case c_;
  Settings s_;
  kjit::DType dt_;
  GroupNormProblem p_;
  size_t n_ = 0, bytes_ = 0;
  int sets_ = 2;
  std::vector<float> x_, w_, b_;
  std::vector<double> ref_;
  std::vector<kjit::DeviceBuffer> xs_, ys_;
  kjit::DeviceBuffer dw_, db_;
};

}  // namespace

nlohmann::json run_group_norm(kjit::Runtime& rt, CUstream stream, const Case& c,
                              const Settings& s) {
  return GnCase(rt, stream, c, s).run(std::nullopt, true);
}

std::vector<nlohmann::json> sweep_group_norm(kjit::Runtime& rt, CUstream stream, const Case& c,
                                             const Settings& s) {
  GnCase gc(rt, stream, c, s);
  std::vector<nlohmann::json> rows;
  for (const auto& cfg : kjit::ops::group_norm_candidates(gc.problem(), kjit::Target::of(rt))) {
    if (cfg.describe().find(s.sweep_filter) == std::string::npos) continue;
    try {
      rows.push_back(gc.run(cfg, false));
    } catch (const kjit::Error& e) {
      rows.push_back({{"shape", shape_text(c)},
                      {"config", cfg.describe()},
                      {"error", e.what()},
                      {"errc", kjit::errc_name(e.code())}});
    }
  }
  return rows;
}

}  // namespace kjit_bench
