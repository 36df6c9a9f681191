// The autotuner's failure policy and record format, without a GPU: a fake timer returns each
// candidate's scripted time, a disk cache in a folder of the test's own holds the records.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "kjit/autotune.hpp"
#include "kjit/kjit.hpp"
#include "test_util.hpp"

namespace {

using kjit::Errc;
using kjit::Error;

struct Tile {
  int block = 0;
  std::string name() const { return "block=" + std::to_string(block); }
};

// One scripted candidate: its time, or the error building (or running) it throws.
struct Script {
  float ms = 1;
  std::optional<Errc> build_error = {}, run_error = {};
};
Script ok(float ms) {
  return Script{ms, {}, {}};
}
Script build_fails(Errc e) {
  return Script{1.f, e, {}};
}
Script run_fails(Errc e, float ms = 1.f) {
  return Script{ms, {}, e};
}

struct Fake {
  kjit_test::TempDir dir;
  kjit::cache::DiskCache disk{kjit_test::cache_in(dir.path)};
  std::map<int, Script> script;  // by block
  int builds = 0, timings = 0;
  float last_ms = 0;

  kjit::detail::TuneContext context(const std::string& device = "Fake GPU") {
    kjit::detail::TuneContext ctx;
    ctx.device = {{"name", device}, {"sms", "132"}};
    ctx.records = &disk;
    ctx.where = device;
    ctx.time = [this](const kjit::Launch& call) {
      ++timings;
      call(nullptr);
      return last_ms;
    };
    return ctx;
  }
  kjit::Launch build(const Tile& t) {
    ++builds;
    const Script& s = script.at(t.block);
    if (s.build_error) throw Error(*s.build_error, "build " + t.name());
    return [this, s, t](CUstream) {
      if (s.run_error) throw Error(*s.run_error, "run " + t.name());
      last_ms = s.ms;
    };
  }
  kjit::TuneResult<Tile> tune(const kjit::Autotuner<Tile>& tuner,
                              const std::string& dev = "Fake GPU") {
    return tuner.tune_with(context(dev), [this](const Tile& t) { return build(t); });
  }
};

kjit::Autotuner<Tile> tuner(std::vector<int> blocks, int64_t n = 4096) {
  std::vector<Tile> tiles;
  for (int b : blocks) tiles.push_back(Tile{b});
  kjit::Autotuner<Tile> t("test.scale", 1, tiles, [](const Tile& x) { return x.name(); });
  t.key("n", n).key("dtype", "f32");
  return t;
}

}  // namespace

TEST_CASE("autotune: the fastest candidate wins, is stored, and the next tuner reuses it untimed") {
  Fake f;
  f.script = {{64, ok(3.f)}, {128, ok(1.f)}, {256, ok(2.f)}};
  const auto r = f.tune(tuner({64, 128, 256}));
  CHECK(r.config.block == 128);
  CHECK(r.index == 1);
  CHECK(r.timed == 3);
  CHECK(r.ms == 1.f);
  CHECK(r.stored);
  CHECK_FALSE(r.from_record);

  // The record: format, winner and candidate count in the metadata, the winner as the payload.
  const auto e =
      f.disk.get(kjit::detail::tune_key(f.context(), {"test.scale",
                                                      1,
                                                      {{"n", "4096"}, {"dtype", "f32"}},
                                                      {"block=64", "block=128", "block=256"},
                                                      {},
                                                      {}}));
  REQUIRE(e.has_value());
  CHECK(e->payload == "block=128");
  REQUIRE(e->find("format"));
  CHECK(*e->find("format") == "kjit-tune-v1");
  CHECK(*e->find("winner") == "block=128");
  CHECK(*e->find("candidates") == "3");
  CHECK(*e->find("op") == "test.scale");

  // A second tuner (a new process reads the same disk) times nothing and builds only the winner.
  f.builds = f.timings = 0;
  f.script[256].ms = 0.1f;  // would win if timed
  const auto again = f.tune(tuner({64, 128, 256}));
  CHECK(again.from_record);
  CHECK(again.config.block == 128);
  CHECK(again.timed == 0);
  CHECK(f.timings == 0);
  CHECK(f.builds == 1);
}

TEST_CASE("autotune: a different problem, candidate list or device is timed afresh") {
  Fake f;
  f.script = {{64, ok(3.f)}, {128, ok(1.f)}, {256, ok(2.f)}};
  REQUIRE(f.tune(tuner({64, 128, 256})).stored);
  CHECK_FALSE(f.tune(tuner({64, 128, 256}, 8192)).from_record);
  CHECK_FALSE(f.tune(tuner({64, 128})).from_record);
  CHECK_FALSE(f.tune(tuner({64, 128, 256}), "Other GPU").from_record);
  kjit::Autotuner<Tile> v2("test.scale", 2, {Tile{64}, Tile{128}, Tile{256}},
                           [](const Tile& x) { return x.name(); });
  v2.key("n", int64_t{4096}).key("dtype", "f32");
  CHECK_FALSE(f.tune(v2).from_record);
  CHECK(f.tune(tuner({64, 128, 256})).from_record);
}

TEST_CASE("autotune: permanent failures skip a candidate and the winner is still stored") {
  Fake f;
  f.script = {{64, build_fails(Errc::Compile)},
              {128, run_fails(Errc::Unsupported, 0.4f)},
              {256, ok(2.f)},
              {512, ok(1.f)}};
  const auto r = f.tune(tuner({64, 128, 256, 512}));
  CHECK(r.config.block == 512);
  CHECK(r.timed == 2);
  CHECK(r.stored);
  CHECK(f.tune(tuner({64, 128, 256, 512})).from_record);
}

TEST_CASE("autotune: a failure that may pass uses the winner without storing it") {
  Fake f;
  f.script = {{64, build_fails(Errc::Cuda)}, {128, ok(1.f)}, {256, run_fails(Errc::Cuda, 0.2f)}};
  const auto r = f.tune(tuner({64, 128, 256}));
  CHECK(r.config.block == 128);
  CHECK_FALSE(r.stored);
  CHECK_FALSE(f.tune(tuner({64, 128, 256})).from_record);  // timed again, not served
}

TEST_CASE("autotune: no runnable candidate throws the passing error, else Unsupported") {
  Fake f;
  f.script = {{64, build_fails(Errc::Compile)}, {128, run_fails(Errc::Cuda, 1.f)}};
  CHECK_KJIT_ERROR(f.tune(tuner({64, 128})), Errc::Cuda);
  f.script[128].run_error = Errc::Unsupported;
  try {
    f.tune(tuner({64, 128}));
    FAIL("no candidate ran, yet tune returned");
  } catch (const Error& e) {
    CHECK(e.code() == Errc::Unsupported);
    const std::string what = e.what();
    CHECK(what.find("none of the 2 candidates") != std::string::npos);
    CHECK(what.find("test.scale n=4096 dtype=f32") != std::string::npos);
    CHECK(what.find("Fake GPU") != std::string::npos);
  }
}

TEST_CASE("autotune: an invalid problem propagates from the first candidate") {
  Fake f;
  f.script = {{64, build_fails(Errc::InvalidArgument)}, {128, ok(1.f)}};
  CHECK_KJIT_ERROR(f.tune(tuner({64, 128})), Errc::InvalidArgument);
  CHECK(f.builds == 1);
  CHECK_KJIT_ERROR(f.tune(tuner({})), Errc::InvalidArgument);
}

TEST_CASE("autotune: a stored winner that no longer builds is tuned afresh and replaced") {
  Fake f;
  f.script = {{64, ok(3.f)}, {128, ok(1.f)}, {256, ok(2.f)}};
  REQUIRE(f.tune(tuner({64, 128, 256})).config.block == 128);
  f.script[128].build_error = Errc::Compile;
  const auto r = f.tune(tuner({64, 128, 256}));
  CHECK_FALSE(r.from_record);
  CHECK(r.config.block == 256);
  CHECK(r.stored);
  const auto again = f.tune(tuner({64, 128, 256}));
  CHECK(again.from_record);
  CHECK(again.config.block == 256);
  // A stored winner failing in a way that may pass is the caller's error, not a retune.
  f.script[256].build_error = Errc::Cuda;
  CHECK_KJIT_ERROR(f.tune(tuner({64, 128, 256})), Errc::Cuda);
}

TEST_CASE("autotune: a weight makes a candidate win only by its margin") {
  Fake f;
  f.script = {{64, ok(1.000f)}, {128, ok(0.999f)}};
  auto t = tuner({64, 128});
  t.weight(1, 1.005f);
  CHECK(f.tune(t).config.block == 64);  // 0.999 * 1.005 > 1
  Fake g;
  g.script = {{64, ok(1.000f)}, {128, ok(0.99f)}};
  CHECK(g.tune(t).config.block == 128);
  CHECK_KJIT_ERROR(t.weight(5, 1.f), Errc::InvalidArgument);
  for (float bad : {0.f, -1.f, INFINITY, NAN})
    CHECK_KJIT_ERROR(t.weight(0, bad), Errc::InvalidArgument);
}

TEST_CASE("autotune: a record that is not the tuner's own is ignored and overwritten") {
  Fake f;
  f.script = {{64, ok(3.f)}, {128, ok(1.f)}};
  const kjit::detail::TuneRequest req{
      "test.scale", 1, {{"n", "4096"}, {"dtype", "f32"}}, {"block=64", "block=128"}, {}, {}};
  const kjit::cache::Key key = kjit::detail::tune_key(f.context(), req);
  kjit::cache::Entry bogus;
  bogus.label = "planted";
  bogus.metadata = {{"format", "kjit-tune-v1"}};
  bogus.payload = "block=4096";  // no such candidate
  REQUIRE(f.disk.put(key, bogus));
  auto r = f.tune(tuner({64, 128}));
  CHECK_FALSE(r.from_record);
  CHECK(r.config.block == 128);
  bogus.payload = "block=64";
  bogus.metadata = {{"format", "kjit-tune-v0"}};  // another format
  REQUIRE(f.disk.put(key, bogus));
  CHECK_FALSE(f.tune(tuner({64, 128})).from_record);
  CHECK(f.disk.get(key)->payload == "block=128");
}

TEST_CASE("autotune: recall serves a stored winner without timing, and nothing before that") {
  Fake f;
  f.script = {{64, ok(3.f)}, {128, ok(1.f)}};
  const kjit::detail::TuneRequest req{
      "test.scale", 1, {{"n", "4096"}, {"dtype", "f32"}}, {"block=64", "block=128"}, {}, {}};
  std::vector<size_t> built;
  auto trial = [&](size_t i) {
    built.push_back(i);
    return f.build(Tile{i == 0 ? 64 : 128});
  };
  CHECK_FALSE(kjit::detail::recall(f.context(), req, trial).has_value());
  CHECK(built.empty());
  REQUIRE(f.tune(tuner({64, 128})).stored);
  f.timings = 0;
  const auto o = kjit::detail::recall(f.context(), req, trial);
  REQUIRE(o.has_value());
  CHECK(o->index == 1);
  CHECK(o->from_record);
  CHECK(built == std::vector<size_t>{1});
  CHECK(f.timings == 0);
}

TEST_CASE("autotune: a capture error propagates: it is the call's, whichever candidate runs") {
  Fake f;
  f.script = {{64, run_fails(Errc::CaptureCompile)}, {128, ok(1.f)}};
  CHECK_KJIT_ERROR(f.tune(tuner({64, 128})), Errc::CaptureCompile);
  CHECK(f.builds == 1);
}

TEST_CASE("autotune: a failed candidate is never the winner, whatever the weights") {
  Fake f;
  f.script = {{64, build_fails(Errc::Compile)}, {128, ok(2.f)}, {256, ok(1.f)}};
  auto t = tuner({64, 128, 256});
  t.weight(1, 1e30f).weight(2, 1e30f);  // scores overflow to inf: still one of the timed ones
  const auto r = f.tune(t);
  CHECK(r.config.block != 64);
  CHECK(r.timed == 2);
}

TEST_CASE("autotune: two candidates of one description are refused; weights are keyed") {
  CHECK_KJIT_ERROR(
      kjit::Autotuner<Tile>("t", 1, {Tile{1}, Tile{1}}, [](const Tile& x) { return x.name(); }),
      Errc::InvalidArgument);
  Fake f;
  f.script = {{64, ok(1.f)}, {128, ok(1.1f)}};
  REQUIRE(f.tune(tuner({64, 128})).stored);
  auto weighted = tuner({64, 128});
  weighted.weight(0, 2.f);
  const auto r = f.tune(weighted);
  CHECK_FALSE(r.from_record);  // another weight is another choice
  CHECK(r.config.block == 128);
}
