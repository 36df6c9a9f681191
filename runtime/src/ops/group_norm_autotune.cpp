// GroupNorm autotuning: time every candidate config on scratch buffers, keep the fastest, and
// remember the choice in the disk cache (keyed by GPU, driver, kjit version and problem).
#include <algorithm>
#include <optional>
#include <random>
#include <vector>

#include "cuda_driver.hpp"
#include "kjit/cuda.hpp"
#include "kjit/error.hpp"
#include "kjit/op/checks.hpp"
#include "kjit/version.hpp"
#include "ops/env.hpp"
#include "ops/group_norm_plan.hpp"

namespace kjit::ops::detail {
namespace {

cache::Key tune_key(Runtime& rt, const GroupNormProblem& p, bool aligned,
                    const std::vector<GroupNormConfig>& cands) {
  cache::KeyBuilder kb;
  kb.add("record", "kjit-gn-tune-v2").add("kjit", KJIT_VERSION_STRING);
  kb.add("device", rt.props().name).add("driver", rt.props().driver_version);
  // The SMs this context may use (MPS limits them), the code NVRTC makes, and the switches that
  // change what a candidate runs: a choice timed under other values is not this one.
  kb.add("sms", rt.props().context_sm_count).add("arch", rt.arch());
  kb.add("nvrtc", Compiler::nvrtc_build());
  kb.add("pdl", env_pdl());
  kb.add("pipe_grid", env_positive("KJIT_GN_PIPE_GRID"));
  kb.add("pipe_lag", env_positive("KJIT_GN_PIPE_LAG"));
  kb.add("problem", p.describe()).add("param_dtype", dtype_name(p.param_dtype));
  kb.add("aligned", aligned);
  for (const auto& c : cands) kb.add("candidate", c.describe());
  return kb.finish();
}

float time_plan(Runtime& rt, const GnPlan& plan, CUstream s, const GnArgs& args, GnWorkspaces* ws) {
  Event start(rt), stop(rt);
  for (int i = 0; i < 3; ++i) launch_plan(rt, plan, args, s, ws);
  float best = 1e30f;
  for (int rep = 0; rep < 5; ++rep) {
    start.record(s);
    for (int i = 0; i < 10; ++i) launch_plan(rt, plan, args, s, ws);
    stop.record(s);
    stop.synchronize();
    best = std::min(best, stop.ms_since(start) / 10);
  }
  return best;
}

}  // namespace

GroupNormConfig autotune(Runtime& rt, const GroupNormProblem& p, bool aligned, float eps,
                         CUstream caller) {
  GroupNormOptions tuned;
  tuned.autotune = true;
  const std::vector<GroupNormConfig> cands =
      group_norm_configs_for(p, Target::of(rt), tuned, aligned);
  const cache::Key key = tune_key(rt, p, aligned, cands);
  cache::DiskCache& disk = rt.compiler().disk_cache();
  if (auto e = disk.get(key)) {
    for (const auto& c : cands)
      if (c.describe() == e->payload) return c;
  }
  // Timing allocates and synchronizes, which would invalidate the caller's capture.
  if (op::capturing(rt, caller))
    op::capture_error("group_norm", "autotuning would time the candidates", p.describe(),
                      "call prepare_group_norm with autotune before capturing");
  const size_t elems = static_cast<size_t>(p.N * p.C * p.S);
  const size_t esz = dtype_size(p.dtype);
  std::vector<unsigned char> host(elems * esz);
  std::mt19937 gen(1234);
  for (auto& b : host) b = static_cast<unsigned char>(gen() & 0x3f);  // finite in every dtype
  // An unaligned request is timed on buffers offset by one element, as the caller's are.
  const size_t off = aligned ? 0 : esz;
  DeviceBuffer x(rt, host.size() + 16), y(rt, host.size() + 16);
  DeviceBuffer w(rt, static_cast<size_t>(p.C) * 4), b(rt, static_cast<size_t>(p.C) * 4);
  Stream s(rt);
  // On autotuning's own stream, not through DeviceBuffer's helpers: their cuCtxSynchronize
  // would wait for every other thread's work, and break another thread's global-mode capture.
  {
    kjit::detail::ContextGuard g(rt.context());
    kjit::detail::check_cu(
        kjit::detail::driver().cuMemcpyHtoDAsync_fn(x.ptr() + off, host.data(), host.size(), s),
        "cuMemcpyHtoDAsync");
    fill_async(w.ptr(), 0x3c, w.bytes(), s);
    fill_async(b.ptr(), 0x01, b.bytes(), s);
    s.synchronize();
  }
  // Split candidates' partials live in a workspace set of autotuning's own, freed when it returns
  // (time_plan has waited for s). The runtime's set would keep them until the Runtime goes, and
  // its entry for this handle may belong to an earlier stream that a live graph still uses.
  kjit::detail::ContextGuard guard(rt.context());  // current while `scratch` frees
  GnWorkspaces scratch;
  const GnArgs args{reinterpret_cast<const void*>(x.ptr() + off),
                    reinterpret_cast<void*>(y.ptr() + off),
                    p.has_weight ? reinterpret_cast<const void*>(w.ptr()) : nullptr,
                    p.has_bias ? reinterpret_cast<const void*>(b.ptr()) : nullptr, eps};

  float best_ms = 1e30f;
  const GroupNormConfig* best = nullptr;
  std::optional<Error> passing;  // the first failure that may pass (out of memory, ...)
  for (const auto& c : cands) {
    std::unique_ptr<GnPlan> plan;
    try {
      plan = build_plan(rt, p, c, nullptr);
    } catch (const Error& e) {
      if (e.code() == Errc::InvalidArgument) throw;
      if (!candidate_rejected(e) && !passing) passing = e;
      continue;  // a candidate that does not compile or load is skipped, not fatal
    }
    if (!plan->runnable) continue;
    float ms;
    try {
      ms = time_plan(rt, *plan, s, args, &scratch);
    } catch (const Error& e) {
      if (e.code() != Errc::Unsupported) throw;
      continue;  // a cooperative grid the driver refused (MPS limits): not a candidate here
    }
    if (ms < best_ms) {
      best_ms = ms;
      best = &c;
    }
  }
  // Nothing to remember: the call fails as the untuned path does when no config can run, or
  // with the passing failure that kept the candidates from running (a retry may succeed).
  if (!best && passing) throw *passing;
  if (!best)
    throw Error(Errc::Unsupported, "group_norm autotune: none of the " +
                                       std::to_string(cands.size()) +
                                       " candidate configs could be built and scheduled for " +
                                       p.describe() + " on " + rt.props().name);
  // A winner among fewer candidates than this device can run is used, not remembered: the disk
  // cache would serve it to every later process.
  if (passing) return *best;
  cache::Entry e;
  e.label = "group_norm autotune: " + p.describe() + " on " + rt.props().name;
  e.metadata = {{"kind", "tune"}, {"op", "group_norm"}, {"us", std::to_string(best_ms * 1000)}};
  e.payload = best->describe();
  disk.put(key, e);
  return *best;
}

}  // namespace kjit::ops::detail
