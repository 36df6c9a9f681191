// Any registered op's problem (kjit-bench --problem): checked against the op's float64
// reference through the generic harness, then device time (graph replays over rotating sets)
// and host time per call.
#include "op_bench.hpp"

#include <algorithm>

#include "timing.hpp"

namespace kjit_bench {

nlohmann::json run_problem(kjit::Runtime& rt, CUstream stream, const kjit::op::OpProblem& p,
                           const Settings& s) {
  kjit::op::ProblemBuffers b(rt, p, kjit::op::ProblemBuffers::sets_for(p, s.rotate_bytes), 42);
  return run_problem(rt, stream, p, s, b);
}

nlohmann::json run_problem(kjit::Runtime& rt, CUstream stream, const kjit::op::OpProblem& p,
                           const Settings& s, kjit::op::ProblemBuffers& b) {
  const std::string config = p.prepare(rt, s.autotune, stream);
  nlohmann::json row = {
      {"op", "problem"}, {"problem", p.describe()}, {"config", config}, {"bytes", p.min_bytes()}};
  if (s.check) {
    const kjit::op::CheckResult r = kjit::op::check(rt, p, b, s.autotune, stream);
    row["correct"] = r.ok;
    row["checked"] = r.checked;
    row["max_abs_err"] = r.max_abs;
    if (!r.ok) row["first_wrong"] = r.first_wrong;
  }
  auto call = [&](int i) { p.run(rt, b.ptrs(i % b.sets()), s.autotune, stream); };
  const DeviceTime t = graph_time(rt, stream, std::max(b.sets(), 20), s.replays, call);
  row["device_us"] = t.median_us;
  row["device_us_min"] = t.min_us;
  row["device_us_max"] = t.max_us;
  row["gbps"] = p.min_bytes() / (t.median_us * 1e-6) / 1e9;
  // Batches of at most ~2 ms of device work: a longer one fills the stream's launch queue and the
  // host then waits for the device, which is not the call's cost (fp32x3 Linear-GN-min per call,
  // ~10 launches and 0.9 ms each: 400 us "host" in batches of 200, 70-80 us one call at a time).
  const int batch = static_cast<int>(std::clamp(2000.0 / std::max(t.median_us, 1.0), 1.0, 200.0));
  if (s.host_time) row["host_us"] = host_us_per_call(rt, stream, batch, 15, [&] { call(0); });
  return row;
}

std::vector<nlohmann::json> sweep_problem(kjit::Runtime& rt, CUstream stream,
                                          const kjit::op::OpProblem& p, const Settings& s) {
  const std::vector<kjit::op::Candidate> candidates = p.candidates(kjit::Target::of(rt));
  if (candidates.empty())
    throw kjit::Error::invalid("problem", p.describe() + ": " + kNoCandidates);
  kjit::op::ProblemBuffers b(rt, p, kjit::op::ProblemBuffers::sets_for(p, s.rotate_bytes), 42);
  Settings each = s;
  each.autotune = false;  // a candidate runs its own config
  each.host_time = false;
  std::vector<nlohmann::json> rows;
  for (const kjit::op::Candidate& c : candidates) {
    if (c.config.find(s.sweep_filter) == std::string::npos) continue;
    try {
      nlohmann::json row = run_problem(rt, stream, *c.problem, each, b);
      row["candidate"] = c.config;  // what --sweep-filter matched; "config" is prepare()'s
      rows.push_back(std::move(row));
    } catch (const kjit::Error& e) {
      rows.push_back({{"problem", p.describe()},
                      {"config", c.config},
                      {"candidate", c.config},
                      {"error", e.what()},
                      {"errc", kjit::errc_name(e.code())}});
    }
  }
  return rows;
}

}  // namespace kjit_bench
