// kjit::Autotuner: pick the fastest of several configurations of a kernel (or of any sequence of
// launches) by timing each on the device, and remember the choice in the disk cache so that the
// next process with the same device, problem and candidates uses it without timing anything.
// kjit's own ops tune through it; so can a host app, for its own templates (docs/API.md,
// "Autotuning"; examples/embed/autotune_demo.cpp).
//
//   kjit::Autotuner<Tile> tuner("app.scale", 1, tiles, [](const Tile& t) { return t.name(); });
//   tuner.key("n", n).key("dtype", "f32").depends_on(rt, "app/scale.cuh");
//   kjit::TuneResult<Tile> r = tuner.tune(rt, [&](const Tile& t) -> kjit::Launch {
//     kjit::Kernel k = rt.kernel(spec_for(t));           // may throw Compile: t is skipped
//     return [=](CUstream s) { k(s, cfg_for(t), x, y, n); };  // one call, enqueued on s
//   });
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kjit/cache/disk_cache.hpp"

namespace kjit {

class Runtime;

// One call of a candidate: enqueues its launches on the given stream (the tuner's own).
using Launch = std::function<void(CUstream)>;

// The timing rule, the only one kjit uses: one call to warm up (loads, first-touch; a candidate
// that cannot run fails here, before anything is timed), one call alone to size the rounds, then
// `rounds` rounds of back-to-back calls each lasting about `round_ms` (at least 1 call, at most
// `max_calls`), timed with events around each round. The result is the fastest round's mean time
// per call: the least disturbed by other work on the device, and with launch gaps amortized as in
// a real stream of calls.
struct TimingRule {
  float round_ms = 5.f;
  int rounds = 5;
  int max_calls = 200;
};

// Times `call` by the rule on `stream` and returns milliseconds per call. Throws what call
// throws, or Errc::Cuda.
float time_calls(Runtime& rt, CUstream stream, const Launch& call, const TimingRule& rule = {});

// How many sets of scratch operands, `set_bytes` each, a candidate's calls should rotate through
// so that together they exceed twice rt's L2 (at least 1, at most `max_sets`): each call then
// reads memory as an app's calls do, not a working set the L2 holds (timed on one set, LayerNorm's
// tuner picked a config slower than its heuristic's).
int rotating_sets(const Runtime& rt, size_t set_bytes, int max_sets = 256);

// What tune() did.
template <class Config>
struct TuneResult {
  Config config;             // the winner
  size_t index = 0;          // its position among the candidates
  bool from_record = false;  // read from the disk cache: nothing was timed
  int timed = 0;             // candidates timed in this call (0 when from_record)
  float ms = 0;              // the winner's time per call (0 when from_record)
  // Whether the winner was stored. Not when a candidate failed in a way that may pass (out of
  // memory, a driver error): a later process may find a faster one that could not run now.
  bool stored = false;
};

namespace detail {

// The type-erased tuner behind Autotuner<Config>.
struct TuneRequest {
  std::string name;  // what is tuned: "group_norm", "app.scale"
  int version = 1;   // bump when the meaning of the candidates' descriptions changes
  std::vector<std::pair<std::string, std::string>> key;  // the problem, as (field, value)
  std::vector<std::string> candidates;                   // each candidate's description
  TimingRule rule;
  // Timing costs `weight[i]` times the measured time (empty: all 1): a candidate that must win
  // by a margin to be chosen (e.g. 1.005 for a path only worth taking for a clear gain).
  std::vector<float> weight;
};
struct TuneOutcome {
  size_t index = 0;
  bool from_record = false, stored = false;
  int timed = 0;
  float ms = 0;
};
// What the tuner needs from a device: the key's device fields, where records live, and the
// timer. tune() makes it for a Runtime; tests make one without a GPU (a fake timer) to check
// the failure policy and the record format.
struct TuneContext {
  std::vector<std::pair<std::string, std::string>> device;  // name, driver, SMs, arch, NVRTC
  cache::DiskCache* records = nullptr;
  std::function<float(const Launch&)> time;  // ms per call, by the TimingRule
  std::string where;                         // the device, for messages
};
// A Runtime's context; `time` is set by tune() (it needs a stream of the tuner's own).
TuneContext tune_context(Runtime& rt);
std::optional<TuneOutcome> recall(const TuneContext& ctx, const TuneRequest& req,
                                  const std::function<Launch(size_t index)>& trial);
TuneOutcome tune(Runtime& rt, const TuneRequest& req,
                 const std::function<Launch(size_t index)>& trial);
TuneOutcome tune(const TuneContext& ctx, const TuneRequest& req,
                 const std::function<Launch(size_t index)>& trial);
// The record's key (exposed for tests and kjit-cache).
cache::Key tune_key(const TuneContext& ctx, const TuneRequest& req);

// Throws InvalidArgument for two candidates of one description.
void check_candidates(const TuneRequest& req);
// Throws InvalidArgument unless i names a candidate of req and w is finite and > 0.
void check_weight(const TuneRequest& req, size_t i, float w);
// The digest of a template's closure, as the key of a tuner that depends on it.
std::string template_digest(Runtime& rt, const std::string& template_name);

}  // namespace detail

// Config: any copyable type; `describe` names a candidate uniquely and stably (it is the stored
// record, and part of the key: a changed candidate list is a new problem).
template <class Config>
class Autotuner {
 public:
  using Describe = std::function<std::string(const Config&)>;

  // Two candidates with the same description are an InvalidArgument (a record could not tell
  // them apart).
  Autotuner(std::string name, int version, std::vector<Config> candidates, Describe describe)
      : configs_(std::move(candidates)) {
    req_.name = std::move(name);
    req_.version = version;
    for (const Config& c : configs_) req_.candidates.push_back(describe(c));
    detail::check_candidates(req_);
  }

  // The problem the winner is for: every value it depends on besides the device, the driver,
  // NVRTC's build, kjit's version and the candidates, which the tuner adds itself.
  Autotuner& key(const std::string& field, const std::string& value) {
    req_.key.emplace_back(field, value);
    return *this;
  }
  Autotuner& key(const std::string& field, int64_t value) {
    return key(field, std::to_string(value));
  }
  // The kernels come from template `name` (and what it includes): a changed header is a new
  // problem, timed afresh. Throws NotFound for an unregistered name.
  Autotuner& depends_on(Runtime& rt, const std::string& template_name);
  Autotuner& timing(const TimingRule& rule) {
    req_.rule = rule;
    return *this;
  }
  // Candidate i's time counts `w` times its measured time when choosing (default 1): finite and
  // > 0, else InvalidArgument, as for an index past the candidates. Weights are part of the key.
  Autotuner& weight(size_t i, float w);

  // The stored winner if there is one (no timing), else every candidate timed: `trial(c)` builds
  // candidate c (compiling, loading) and returns its Launch. Failure policy, for building or
  // running a candidate:
  //  - Errc::InvalidArgument and Errc::CaptureCompile propagate: the problem or the call is
  //    wrong, whichever candidate runs.
  //  - Errc::Compile or Errc::Unsupported skip the candidate for good: it cannot run here.
  //  - any other error skips it for now: the winner is used but not stored, and when no
  //    candidate ran, the first such error is thrown (a retry may succeed).
  // No candidate runnable: Errc::Unsupported naming the problem. Timing synchronizes the tuner's
  // own stream, never the caller's; do not call it while capturing a graph (ops check
  // op::capturing first). Thread-safe for distinct Autotuner objects; two processes tuning the
  // same problem at once both time it and store the same kind of record.
  TuneResult<Config> tune(Runtime& rt, const std::function<Launch(const Config&)>& trial) const {
    const detail::TuneOutcome o =
        detail::tune(rt, req_, [&](size_t i) { return trial(configs_[i]); });
    return TuneResult<Config>{configs_[o.index], o.index, o.from_record, o.timed, o.ms, o.stored};
  }

  // The stored winner, when there is one and it still builds (`trial` is called for it alone,
  // and its Launch never run); else nothing. What an op calls first when timing would need
  // scratch memory, or is not allowed (a graph capture): recall, then prepare, then tune().
  std::optional<TuneResult<Config>> recall(
      Runtime& rt, const std::function<Launch(const Config&)>& trial) const {
    const std::optional<detail::TuneOutcome> o = detail::recall(
        detail::tune_context(rt), req_, [&](size_t i) { return trial(configs_[i]); });
    if (!o) return std::nullopt;
    return TuneResult<Config>{configs_[o->index], o->index, true, 0, 0, false};
  }

  // tune() on a given context instead of a Runtime's (tests without a GPU).
  TuneResult<Config> tune_with(const detail::TuneContext& ctx,
                               const std::function<Launch(const Config&)>& trial) const {
    const detail::TuneOutcome o =
        detail::tune(ctx, req_, [&](size_t i) { return trial(configs_[i]); });
    return TuneResult<Config>{configs_[o.index], o.index, o.from_record, o.timed, o.ms, o.stored};
  }

  const std::vector<Config>& candidates() const { return configs_; }

 private:
  std::vector<Config> configs_;
  detail::TuneRequest req_;
};

template <class Config>
Autotuner<Config>& Autotuner<Config>::weight(size_t i, float w) {
  detail::check_weight(req_, i, w);
  req_.weight.resize(configs_.size(), 1.f);
  req_.weight[i] = w;
  return *this;
}

template <class Config>
Autotuner<Config>& Autotuner<Config>::depends_on(Runtime& rt, const std::string& template_name) {
  return key("template " + template_name, detail::template_digest(rt, template_name));
}

}  // namespace kjit
