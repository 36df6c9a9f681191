// The autotuner's loop (kjit/autotune.hpp): the stored record, else every candidate built and
// timed under one failure policy; the winner stored when every candidate had its chance.
#include "kjit/autotune.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "kjit/compiler.hpp"
#include "kjit/cuda.hpp"
#include "kjit/error.hpp"
#include "kjit/runtime.hpp"
#include "kjit/version.hpp"

namespace kjit {
namespace detail {
namespace {

constexpr const char* kFormat = "kjit-tune-v1";

// A candidate that failed for good here (does not compile, the device cannot run it) is
// skipped; an invalid problem is the caller's; anything else may pass on a retry.
enum class Failure { Fatal, Skip, Passing };

Failure classify(const Error& e) {
  if (e.code() == Errc::InvalidArgument || e.code() == Errc::CaptureCompile) return Failure::Fatal;
  if (e.code() == Errc::Compile || e.code() == Errc::Unsupported) return Failure::Skip;
  return Failure::Passing;
}

std::string problem_text(const TuneRequest& req) {
  std::string s = req.name;
  for (const auto& [field, value] : req.key) s += " " + field + "=" + value;
  return s;
}

// The stored winner's index, when the record is ours and names a current candidate.
std::optional<size_t> read_record(const TuneContext& ctx, const TuneRequest& req,
                                  const cache::Key& key) {
  if (!ctx.records) return std::nullopt;
  const std::optional<cache::Entry> e = ctx.records->get(key);
  if (!e) return std::nullopt;
  const std::string* format = e->find("format");
  if (!format || *format != kFormat) return std::nullopt;
  for (size_t i = 0; i < req.candidates.size(); ++i)
    if (req.candidates[i] == e->payload) return i;
  return std::nullopt;
}

bool write_record(const TuneContext& ctx, const TuneRequest& req, const cache::Key& key,
                  const TuneOutcome& o) {
  if (!ctx.records) return false;
  cache::Entry e;
  e.label = "autotune " + problem_text(req) + " on " + ctx.where;
  e.metadata = {{"kind", "tune"},
                {"format", kFormat},
                {"op", req.name},
                {"winner", req.candidates[o.index]},
                {"us", std::to_string(o.ms * 1000)},
                {"timed", std::to_string(o.timed)},
                {"candidates", std::to_string(req.candidates.size())}};
  e.payload = req.candidates[o.index];
  return ctx.records->put(key, e);
}

// Builds and times every candidate; the fastest by weighted time wins.
TuneOutcome time_all(const TuneContext& ctx, const TuneRequest& req,
                     const std::function<Launch(size_t)>& trial) {
  TuneOutcome best;
  float best_score = 0;
  bool found = false;
  std::optional<Error> passing;  // the first failure that may pass (out of memory, ...)
  for (size_t i = 0; i < req.candidates.size(); ++i) {
    float ms;
    try {
      ms = ctx.time(trial(i));
    } catch (const Error& e) {
      const Failure f = classify(e);
      if (f == Failure::Fatal) throw;
      if (f == Failure::Passing && !passing) passing = e;
      continue;
    }
    ++best.timed;
    const float score = ms * (i < req.weight.size() ? req.weight[i] : 1.f);
    if (!found || score < best_score) {
      found = true;
      best_score = score;
      best.index = i;
      best.ms = ms;
    }
  }
  if (best.timed == 0 && passing) throw *passing;  // a retry may succeed
  if (best.timed == 0)
    throw Error(Errc::Unsupported, "autotune: none of the " +
                                       std::to_string(req.candidates.size()) +
                                       " candidates could be built and run for " +
                                       problem_text(req) + " on " + ctx.where);
  // A winner among fewer candidates than this device can run is used, not remembered: the
  // disk cache would serve it to every later process.
  best.stored = !passing;
  return best;
}

}  // namespace

cache::Key tune_key(const TuneContext& ctx, const TuneRequest& req) {
  cache::KeyBuilder kb;
  kb.add("record", kFormat).add("name", req.name).add("version", req.version);
  kb.add("kjit", KJIT_VERSION_STRING);
  for (const auto& [field, value] : ctx.device) kb.add("device " + field, value);
  for (const auto& [field, value] : req.key) kb.add("key " + field, value);
  for (size_t i = 0; i < req.candidates.size(); ++i) {
    kb.add("candidate", req.candidates[i]);
    if (i < req.weight.size() && req.weight[i] != 1.f)
      kb.add("weight", std::to_string(req.weight[i]));
  }
  // The timing rule decides what "fastest" means: another rule is another record.
  kb.add("rule", std::to_string(req.rule.round_ms) + "/" + std::to_string(req.rule.rounds) + "/" +
                     std::to_string(req.rule.max_calls));
  return kb.finish();
}

std::optional<TuneOutcome> recall(const TuneContext& ctx, const TuneRequest& req,
                                  const std::function<Launch(size_t)>& trial) {
  if (req.candidates.empty())
    throw Error::invalid("candidates", "autotune " + problem_text(req) + ": no candidates");
  const std::optional<size_t> i = read_record(ctx, req, tune_key(ctx, req));
  if (!i) return std::nullopt;
  // The stored winner must still build here (a changed template may no longer compile, a
  // device with less shared memory refuse it): if it cannot for good, it is tuned afresh.
  try {
    trial(*i);
  } catch (const Error& e) {
    if (classify(e) != Failure::Skip) throw;
    return std::nullopt;
  }
  TuneOutcome o;
  o.index = *i;
  o.from_record = true;
  return o;
}

TuneOutcome tune(const TuneContext& ctx, const TuneRequest& req,
                 const std::function<Launch(size_t)>& trial) {
  if (std::optional<TuneOutcome> o = recall(ctx, req, trial)) return *o;
  TuneOutcome o = time_all(ctx, req, trial);
  if (o.stored) o.stored = write_record(ctx, req, tune_key(ctx, req), o);
  return o;
}

TuneContext tune_context(Runtime& rt) {
  TuneContext ctx;
  const DeviceProps& p = rt.props();
  ctx.device = {{"name", p.name},
                {"driver", std::to_string(p.driver_version)},
                {"sms", std::to_string(p.context_sm_count)},
                {"arch", rt.arch()},
                {"nvrtc", Compiler::nvrtc_build()}};
  ctx.records = &rt.compiler().disk_cache();
  ctx.where = p.name;
  return ctx;
}

TuneOutcome tune(Runtime& rt, const TuneRequest& req, const std::function<Launch(size_t)>& trial) {
  Stream stream(rt);  // timing waits for this stream alone, never the caller's or the context
  TuneContext ctx = tune_context(rt);
  ctx.time = [&](const Launch& call) { return time_calls(rt, stream, call, req.rule); };
  return tune(ctx, req, trial);
}

void check_candidates(const TuneRequest& req) {
  for (size_t i = 0; i < req.candidates.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (req.candidates[i] == req.candidates[j])
        throw Error::invalid("candidates", "autotune " + problem_text(req) + ": candidates " +
                                               std::to_string(j) + " and " + std::to_string(i) +
                                               " are both '" + req.candidates[i] + "'");
}

void check_weight(const TuneRequest& req, size_t i, float w) {
  if (i >= req.candidates.size())
    throw Error::invalid("weight", "autotune " + problem_text(req) + ": weight for candidate " +
                                       std::to_string(i) + " of " +
                                       std::to_string(req.candidates.size()));
  if (!(w > 0) || !std::isfinite(w))
    throw Error::invalid("weight", "autotune " + problem_text(req) + ": weight " +
                                       std::to_string(w) + " must be finite and > 0");
}

std::string template_digest(Runtime& rt, const std::string& template_name) {
  cache::KeyBuilder kb;
  for (const auto& [name, text] : rt.templates().closure(template_name)) kb.add(name, text);
  return kb.finish().hex();
}

}  // namespace detail

int rotating_sets(const Runtime& rt, size_t set_bytes, int max_sets) {
  const auto l2 = static_cast<size_t>(std::max(rt.props().l2_bytes, 0));
  const size_t want = set_bytes ? (2 * l2 + set_bytes - 1) / set_bytes : 1;
  return static_cast<int>(std::clamp<size_t>(want, 1, static_cast<size_t>(std::max(max_sets, 1))));
}

float time_calls(Runtime& rt, CUstream stream, const Launch& call, const TimingRule& rule) {
  if (!(rule.round_ms > 0) || !std::isfinite(rule.round_ms) || rule.round_ms > 1e6f ||
      rule.rounds < 1 || rule.max_calls < 1)
    throw Error::invalid("rule",
                         "autotune timing rule: 0 < round_ms <= 1e6, rounds >= 1 and "
                         "max_calls >= 1 (got " +
                             std::to_string(rule.round_ms) + ", " + std::to_string(rule.rounds) +
                             ", " + std::to_string(rule.max_calls) + ")");
  Event start(rt), stop(rt);
  call(stream);  // warm up, and fail here before anything is timed
  start.record(stream);
  call(stream);
  stop.record(stream);
  stop.synchronize();
  const float once = std::max(stop.ms_since(start), 1e-3f);
  // Clamped as a double: a cast of a value past INT_MAX would be undefined.
  const int calls =
      static_cast<int>(std::clamp(std::ceil(static_cast<double>(rule.round_ms) / once), 1.0,
                                  static_cast<double>(rule.max_calls)));
  float best = once;
  for (int round = 0; round < rule.rounds; ++round) {
    start.record(stream);
    for (int i = 0; i < calls; ++i) call(stream);
    stop.record(stream);
    stop.synchronize();
    best = std::min(best, stop.ms_since(start) / static_cast<float>(calls));
  }
  return best;
}

}  // namespace kjit
