// Recording (kjit/record.hpp) and replaying it with kjit-precompile, without a GPU: the compile
// path records an app's own templates (one including a shared header) and an op problem; the
// recording precompiles for two archs into a fresh cache holding the runtime's key of every
// recorded specialization; a changed header is refused; concurrent recorders lose no line.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "kernel_entry.hpp"
#include "kjit/kjit.hpp"
#include "kjit/op/record.hpp"
#include "kjit/op/registry.hpp"
#include "kjit/op/target.hpp"
#include "manifest.hpp"
#include "op_fields.hpp"
#include "test_util.hpp"
#include "tool_runner.hpp"

using kjit_test::read_text;
using kjit_test::run_tool;
using kjit_test::TempDir;
using kjit_test::write_text;
using nlohmann::json;

namespace {

const char* const kCommon = R"(#pragma once
#include "kjit/types.cuh"
namespace app { template <class T> float twice(T v) { return 2.f * kjit::to_float(v); } }
)";
const char* const kScale = R"(#include "app/common.cuh"
template <class T, long long kScale>
__global__ void scale(const T* x, T* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = kjit::from_float<T>(app::twice(x[i]) * static_cast<float>(kScale));
})";
const char* const kTile = R"(#include "app/common.cuh"
namespace app {
template <int kTile, class T, bool kFlag>
__global__ void tile(T* y) { if (kFlag) y[threadIdx.x % kTile] = T(); }
})";

void add_app_templates(kjit::TemplateSet& ts, const std::string& common = kCommon) {
  ts.add("app/common.cuh", common);
  ts.add("app/scale.cuh", kScale);
  ts.add("app/tile.cuh", kTile);
}

std::vector<kjit::Spec> app_specs() {
  return {kjit::Spec("app/scale.cuh", "scale").type(kjit::DType::F32).value(3),
          kjit::Spec("app/scale.cuh", "scale").type(kjit::DType::BF16).value(int64_t{1} << 40),
          kjit::Spec("app/tile.cuh", "app::tile").value(4).type("float").value(true)};
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

// The op problem a recording stores: parsed from a manifest object, stated again.
const json kGroupNorm = {{"op", "group_norm"},     {"dtype", "bf16"}, {"layout", "nhwc"},
                         {"shape", {2, 8, 8, 64}}, {"groups", 16},    {"activation", "gelu"}};

std::string fields_json_of(const json& problem) {
  const std::string op = problem.at("op").get<std::string>();
  return kjit::op::find_op(op).parse(kjit::tools::op_fields(problem, op))->fields_json();
}

// Records app_specs() through a Compiler's get (the path Runtime::kernel takes) and the GroupNorm
// problem, into `rec`.
// Returns the lines it appended.
uint64_t record_app(const std::string& rec, const std::string& cache_dir) {
  kjit::Compiler c(kjit_test::cache_in(cache_dir));
  add_app_templates(c.templates());
  c.set_recorder(std::make_shared<kjit::Recorder>(rec));
  for (const kjit::Spec& s : app_specs()) c.get(s, "sm_90");
  for (const kjit::Spec& s : app_specs()) c.get(s, "sm_90");  // again: nothing new
  c.recorder()->problem(fields_json_of(kGroupNorm));
  CHECK(c.recorder()->stats().write_errors == 0);
  return c.recorder()->stats().lines;
}

}  // namespace

TEST_CASE("a recording replays for two archs: the runtime's key of every specialization") {
  TempDir dir;
  const std::string rec = dir.path + "/app.kjit.jsonl", fresh = dir.path + "/fresh";
  CHECK(record_app(rec, dir.path + "/dev-cache") == 4);
  const std::vector<std::string> lines = lines_of(read_text(rec));
  REQUIRE(lines.size() == 4);
  std::vector<json> entries;
  for (const std::string& l : lines) entries.push_back(json::parse(l));
  CHECK(entries[0]["kernel"] == "app/scale.cuh:scale");
  CHECK(entries[0]["types"] == json::array({"float"}));
  CHECK(entries[0]["values"] == json::array({3}));
  CHECK(entries[1]["values"] == json::array({int64_t{1} << 40}));
  CHECK(entries[2]["args"] == json({4, "float", true}));  // a value before a type: in order
  CHECK(entries[0]["headers"].size() == 3);               // scale, common, kjit/types.cuh
  CHECK(entries[0]["headers"]["kjit/types.cuh"] ==
        kjit::header_sha256(kjit::TemplateSet().closure("kjit/types.cuh")[0].second));
  CHECK(entries[3]["op"] == "group_norm");
  // The app's headers (not kjit's built-ins) are in the bundle beside the recording.
  for (const char* text : {kCommon, kScale, kTile})
    CHECK(read_text(rec + ".d/" + kjit::header_sha256(text)) == text);
  CHECK(!std::filesystem::exists(rec + ".d/" +
                                 entries[0]["headers"]["kjit/types.cuh"].get<std::string>()));

  // A second recorder on the same file appends nothing it already holds.
  CHECK(record_app(rec, dir.path + "/dev-cache") == 0);
  CHECK(lines_of(read_text(rec)).size() == 4);

  auto r = run_tool("kjit-precompile", rec + " -a sm_80,sm_90 -j2 --json --cache-dir " + fresh,
                    dir.path);
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const json s = r.json();
  CHECK(s["failed"] == 0);

  // The runtime's side: a compiler with the app's templates, as on the device, on that folder.
  kjit::Compiler c(kjit_test::cache_in(fresh));
  add_app_templates(c.templates());
  std::vector<kjit::Spec> specs = app_specs();
  const kjit::tools::OpSpecs gn_90 =
      kjit::tools::problem_specs(kGroupNorm, {kjit::Target::for_arch("sm_90")});
  const kjit::tools::OpSpecs gn_80 =
      kjit::tools::problem_specs(kGroupNorm, {kjit::Target::for_arch("sm_80")});
  REQUIRE(!gn_90.specs.empty());
  size_t expected = 0;
  for (const std::string arch : {"sm_80", "sm_90"}) {
    std::vector<kjit::Spec> all = specs;
    for (const kjit::Spec& g : (arch == "sm_80" ? gn_80 : gn_90).specs) all.push_back(g);
    for (const kjit::Spec& spec : all) {
      INFO(arch << " " << spec.instantiation());
      CHECK(c.disk_cache().get(c.key(spec, arch)).has_value());
      ++expected;
    }
  }
  CHECK(s["total"] == expected);
  for (const kjit::Spec& spec : specs) CHECK(c.get(spec, "sm_80").from_disk);
  CHECK(c.stats().nvrtc_compiles == 0);
}

TEST_CASE("a header changed since the recording is refused, naming it; never another key") {
  TempDir dir;
  const std::string rec = dir.path + "/rec.jsonl";
  record_app(rec, dir.path + "/dev-cache");
  // The recording without its bundle, and the app's sources with common.cuh edited since.
  const std::string moved = dir.path + "/elsewhere.jsonl", tpl = dir.path + "/tpl";
  write_text(moved, read_text(rec));
  std::filesystem::create_directories(tpl + "/app");
  write_text(tpl + "/app/common.cuh", std::string(kCommon) + "// edited\n");
  write_text(tpl + "/app/scale.cuh", kScale);
  write_text(tpl + "/app/tile.cuh", kTile);
  const std::string cache = dir.path + "/cache";
  auto r = run_tool("kjit-precompile",
                    moved + " -a sm_90 --templates " + tpl + " --cache-dir " + cache + " --json",
                    dir.path);
  CHECK(r.rc == 1);
  const json s = r.json();
  CHECK(s["bad_entries"] == 3);  // every kernel entry includes common.cuh; the op entry passes
  CHECK(s["total"].get<int>() >= 1);
  for (const json& e : s["errors"]) {
    if (!e.contains("field")) continue;
    CHECK(e["field"] == "headers");
    const std::string m = e["message"].get<std::string>();
    CHECK(m.find("header 'app/common.cuh'") != std::string::npos);
    CHECK(m.find(kjit::header_sha256(kCommon)) != std::string::npos);
  }
  CHECK(r.err.find("app/common.cuh") != std::string::npos);

  // The bundle given with --bundle (the moved recording has no <manifest>.d of its own).
  r = run_tool("kjit-precompile",
               moved + " -a sm_90 --bundle " + rec + ".d --cache-dir " + dir.path + "/c1",
               dir.path);
  INFO(r.err);
  CHECK(r.rc == 0);

  // With the text the app ran, the same templates folder precompiles everything.
  write_text(tpl + "/app/common.cuh", kCommon);
  r = run_tool("kjit-precompile", moved + " -a sm_90 --templates " + tpl + " --cache-dir " + cache,
               dir.path);
  INFO(r.err);
  CHECK(r.rc == 0);

  // A bundle copy tampered with is refused the same way (its hash is checked, not trusted).
  const std::string copy = rec + ".d/" + kjit::header_sha256(kScale);
  std::filesystem::remove(copy);
  write_text(copy, std::string(kScale) + "\n");
  r = run_tool("kjit-precompile", rec + " -a sm_90 --json --cache-dir " + dir.path + "/c2",
               dir.path);
  CHECK(r.rc == 1);
  CHECK(r.json()["bad_entries"] == 2);  // the two scale<> entries
  CHECK(r.err.find("header 'app/scale.cuh'") != std::string::npos);

  // A symlink in a templates folder is never followed.
  std::filesystem::remove(copy);
  std::filesystem::remove(tpl + "/app/scale.cuh");
  write_text(dir.path + "/scale-elsewhere.cuh", kScale);
  std::filesystem::create_symlink(dir.path + "/scale-elsewhere.cuh", tpl + "/app/scale.cuh");
  r = run_tool("kjit-precompile",
               rec + " -a sm_90 --templates " + tpl + " --cache-dir " + dir.path + "/c3", dir.path);
  CHECK(r.rc == 1);
  CHECK(r.err.find("symbolic link") != std::string::npos);
}

TEST_CASE("kernel entries: malformed fields are named; options of another build are refused") {
  const std::string sha(64, 'a');
  auto field_of = [](const json& e) -> std::string {
    try {
      kjit::tools::parse_kernel_entry(e);
    } catch (const kjit::tools::EntryError& err) {
      return err.field();
    }
    return "<none>";
  };
  const json ok = {{"kernel", "app/s.cuh:s"},
                   {"types", {"float"}},
                   {"values", {3, true}},
                   {"headers", {{"app/s.cuh", sha}}}};
  CHECK(field_of(ok) == "<none>");
  CHECK(kjit::tools::parse_kernel_entry(ok).spec.instantiation() == "s<float, 3, true>");
  auto with = [&](const char* k, json v) {
    json e = ok;
    e[k] = std::move(v);
    return e;
  };
  CHECK(field_of(with("kernel", "app/s.cuh")) == "kernel");
  CHECK(field_of(with("kernel", "../x.cuh:s")) == "kernel");
  CHECK(field_of(with("kernel", "app/s.cuh:s;int")) == "kernel");
  CHECK(field_of(with("types", {"float; int x"})) == "types");
  CHECK(field_of(with("types", {3})) == "types");
  CHECK(field_of(with("values", {2.5})) == "values");
  CHECK(field_of(with("values", {"3"})) == "values");
  CHECK(field_of(with("args", {1})) == "args");  // with types and values too
  CHECK(field_of(with("options", {"--use_fast_math"})) == "options");
  CHECK(field_of(with("headers", {{"app/s.cuh", "abc"}})) == "headers");
  CHECK(field_of(with("headers", {{"app/other.cuh", sha}})) == "headers");
  CHECK(field_of(with("headers", {{"../etc/passwd", sha}, {"app/s.cuh", sha}})) == "headers");
  CHECK(field_of(with("typo", 1)) == "typo");
  json args = ok;
  args.erase("types");
  args.erase("values");
  args["args"] = {4, "float"};
  CHECK(kjit::tools::parse_kernel_entry(args).spec.instantiation() == "s<4, float>");
}

TEST_CASE("a JSON Lines manifest: a torn line fails alone, blank lines are skipped") {
  const std::string text =
      "{\"op\": \"group_norm\", \"shape\": [1, 8, 4], \"groups\": 2}\n\n"
      "{\"op\": \"linear_gn\n"
      "{\"op\": \"layer_norm\", \"rows\": 4, \"width\": 64}\n";
  const kjit::tools::Manifest m = kjit::tools::parse_manifest(text, "rec.jsonl");
  REQUIRE(m.problems.size() == 3);
  CHECK(m.problems[0].error.empty());
  CHECK(m.problems[1].name() == "rec.jsonl: line 3");
  CHECK(!m.problems[1].error.empty());
  CHECK(m.problems[2].problem["op"] == "layer_norm");
  // One object on one line is JSON Lines; a classic manifest is not.
  CHECK(kjit::tools::parse_manifest("{\"op\": \"rms_norm\", \"rows\": 1, \"width\": 8}", "x")
            .problems.size() == 1);
  CHECK(kjit::tools::parse_manifest("{\"problems\": [{\"op\": \"x\"}, {\"op\": \"y\"}]}", "x")
            .problems.size() == 2);
  CHECK(kjit::tools::parse_manifest("{\"problems\": [\n{\"op\": \"x\"}\n]}", "x").problems.size() ==
        1);
  // A torn first line: the second line tells a recording.
  const kjit::tools::Manifest torn =
      kjit::tools::parse_manifest("{\"op\": \"gro\n{\"op\": \"rms_norm\"}\n", "rec");
  REQUIRE(torn.problems.size() == 2);
  CHECK(!torn.problems[0].error.empty());
  CHECK(torn.problems[1].error.empty());
}

TEST_CASE("every registered op states a problem as fields that parse back to it") {
  const std::vector<json> problems = {
      kGroupNorm,
      {{"op", "group_norm"}, {"shape", {4, 64, 3, 5, 7}}, {"groups", 8}, {"weight", false}},
      {{"op", "group_norm"},
       {"dtype", "f16"},
       {"param_dtype", "f32"},
       {"shape", {1, 32}},
       {"groups", 32},
       {"activation", "none"},
       {"affine", false}},
      {{"op", "linear_gn_min"}, {"M", 512}, {"K", 256}, {"N", 1024}, {"groups", 64}},
      {{"op", "linear_gn_min"},
       {"dtype", "bf16"},
       {"M", 3},
       {"K", 8},
       {"N", 96},
       {"groups", 3},
       {"bias_add", "kernel"}},
      {{"op", "layer_norm"}, {"rows", 300}, {"width", 4096}, {"residual", true}, {"bias", false}},
      {{"op", "rms_norm"},
       {"dtype", "bf16"},
       {"param_dtype", "f32"},
       {"rows", 7},
       {"width", 100000},
       {"activation", "silu"}}};
  std::set<std::string> ops;
  for (const json& p : problems) {
    INFO(p.dump());
    const std::string text = fields_json_of(p);
    REQUIRE(!text.empty());
    CHECK(text.find('\n') == std::string::npos);
    const json again = json::parse(text);
    ops.insert(again["op"].get<std::string>());
    for (const char* arch : {"sm_80", "sm_90"})
      for (const bool aligned : {true, false}) {
        kjit::tools::OpContext ctx{kjit::Target::for_arch(arch), aligned, !aligned, true};
        const auto a = kjit::tools::problem_specs(p, ctx),
                   b = kjit::tools::problem_specs(again, ctx);
        CHECK(a.describe == b.describe);
        REQUIRE(a.specs.size() == b.specs.size());
        for (size_t i = 0; i < a.specs.size(); ++i)
          CHECK(a.specs[i].instantiation() == b.specs[i].instantiation());
      }
  }
  const std::vector<std::string> registered = kjit::op::registered_ops();
  CHECK(ops == std::set<std::string>(registered.begin(), registered.end()));
}

TEST_CASE("a recorded plan's variants: \"aligned\": false and \"autotune\": true of any op") {
  const json gn = {{"op", "group_norm"}, {"shape", {2, 64, 8, 8}}, {"groups", 8}};
  const json ln = {{"op", "layer_norm"}, {"rows", 100}, {"width", 1024}};
  for (const json& base : {gn, ln}) {
    INFO(base.dump());
    auto names = [](const kjit::tools::OpSpecs& o) {
      std::set<std::string> s;
      for (const kjit::Spec& x : o.specs) s.insert(x.instantiation());
      return s;
    };
    const kjit::Target t = kjit::Target::for_arch("sm_90");
    json unaligned = base, tuned = base;
    unaligned["aligned"] = false;
    tuned["autotune"] = true;
    // The entry's switch derives what the global option derives for every entry.
    const auto u = kjit::tools::problem_specs(unaligned, {t});
    const auto u_global = kjit::tools::problem_specs(base, {t, false, true, false});
    CHECK(names(u) == names(u_global));
    CHECK(names(u) != names(kjit::tools::problem_specs(base, {t})));
    const auto a = kjit::tools::problem_specs(tuned, {t});
    CHECK(names(a) == names(kjit::tools::problem_specs(base, {t, true, false, true})));
    CHECK(a.specs.size() > kjit::tools::problem_specs(base, {t}).specs.size());
    json bad = base;
    bad["aligned"] = "no";
    CHECK_THROWS_WITH_AS(kjit::tools::problem_specs(bad, {t}), doctest::Contains("true or false"),
                         kjit::tools::EntryError);
  }
}

TEST_CASE("a recording is opened with the cache's trust rules; a bad path is an Io error") {
  TempDir dir;
  auto io_error = [](const std::string& path) -> std::string {
    try {
      kjit::Recorder r(path);
    } catch (const kjit::Error& e) {
      return e.code() == kjit::Errc::Io ? e.what() : std::string("wrong code: ") + e.what();
    }
    return "";
  };
  write_text(dir.path + "/target", "");
  std::filesystem::create_symlink(dir.path + "/target", dir.path + "/link.jsonl");
  CHECK(io_error(dir.path + "/link.jsonl").find("symbolic link") != std::string::npos);
  CHECK(read_text(dir.path + "/target").empty());  // never written through
  write_text(dir.path + "/open.jsonl", "");
  ::chmod((dir.path + "/open.jsonl").c_str(), 0666);
  CHECK(io_error(dir.path + "/open.jsonl").find("writable by every user") != std::string::npos);
  std::filesystem::create_directories(dir.path + "/shared");
  ::chmod((dir.path + "/shared").c_str(), 0777);  // not sticky: others could swap the file
  CHECK(io_error(dir.path + "/shared/rec.jsonl").find(dir.path + "/shared") != std::string::npos);
  CHECK(io_error(dir.path + "/missing/rec.jsonl").find(dir.path + "/missing") != std::string::npos);
  CHECK(io_error(dir.path + "/").find("names a folder") != std::string::npos);
  ::mkfifo((dir.path + "/fifo").c_str(), 0600);
  CHECK(io_error(dir.path + "/fifo").find("not a regular file") != std::string::npos);
  // A new recording is 0600 whatever the umask.
  const mode_t old = ::umask(0);
  { kjit::Recorder r(dir.path + "/new.jsonl"); }
  ::umask(old);
  struct stat st;
  REQUIRE(::stat((dir.path + "/new.jsonl").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  // Sticky and world-writable, as /tmp: fine.
  std::filesystem::create_directories(dir.path + "/sticky");
  ::chmod((dir.path + "/sticky").c_str(), 01777);
  CHECK(io_error(dir.path + "/sticky/rec.jsonl").empty());
}

TEST_CASE("a torn line left by a killed recorder is ended, and the next line stays whole") {
  TempDir dir;
  const std::string rec = dir.path + "/rec.jsonl";
  write_text(rec, "{\"kernel\": \"app/x.cu");  // a recorder died mid-line
  ::chmod(rec.c_str(), 0600);
  kjit::TemplateSet ts;
  add_app_templates(ts);
  kjit::Recorder r(rec);
  r.kernel(app_specs()[0], ts);
  const std::vector<std::string> lines = lines_of(read_text(rec));
  REQUIRE(lines.size() == 2);
  CHECK(json::parse(lines[1])["kernel"] == "app/scale.cuh:scale");
  // An op's plan build: the kernels its compiler returns meanwhile are not recorded one by one.
  kjit::Compiler c(kjit_test::cache_in(dir.path + "/cache"));
  add_app_templates(c.templates());
  c.set_recorder(std::make_shared<kjit::Recorder>(rec));
  {
    const kjit::op::ProblemScope scope(true);
    CHECK(kjit::Recorder::in_op_build());
    c.get(app_specs()[2], "sm_90");
    CHECK(c.recorder()->stats().lines == 0);
  }
  CHECK(!kjit::Recorder::in_op_build());
  c.get(app_specs()[2], "sm_90");  // outside: recorded
  CHECK(c.recorder()->stats().lines == 1);
  CHECK(lines_of(read_text(rec)).size() == 3);
  CHECK_THROWS_AS(r.problem("{\"op\": \"x\"}\n{\"op\": \"y\"}"), kjit::Error);
}

TEST_CASE("8 concurrent recorder processes (2 threads each): no line lost or torn") {
  TempDir dir;
  const std::string rec = dir.path + "/rec.jsonl";
  constexpr int kProcs = 8, kOwn = 60, kShared = 20;
  int go[2];
  REQUIRE(::pipe(go) == 0);
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(go[1]);
      char c;
      (void)!::read(go[0], &c, 1);  // all start together
      int rc = 0;
      try {
        kjit::TemplateSet ts;
        add_app_templates(ts);
        kjit::Recorder r(rec);
        auto work = [&](int t) {
          for (int i = t; i < kOwn + kShared; i += 2) {
            const int64_t v = i < kOwn ? (p + 1) * 100000 + i : i;  // own, then shared values
            r.kernel(kjit::Spec("app/scale.cuh", "scale").type("float").value(v), ts);
          }
        };
        std::thread other(work, 1);
        work(0);
        other.join();
        rc = r.stats().write_errors == 0 ? 0 : 2;
      } catch (...) {
        rc = 1;
      }
      ::_exit(rc);
    }
    kids.push_back(pid);
  }
  ::close(go[0]);
  ::close(go[1]);  // EOF: go
  for (pid_t k : kids) {
    int status = 0;
    REQUIRE(::waitpid(k, &status, 0) == k);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  const std::string text = read_text(rec);
  CHECK(text.back() == '\n');
  std::map<int64_t, int> seen;
  for (const std::string& l : lines_of(text)) {
    json j;
    REQUIRE_NOTHROW(j = json::parse(l));
    REQUIRE(j["values"].size() == 1);
    ++seen[j["values"][0].get<int64_t>()];
  }
  for (int p = 0; p < kProcs; ++p)
    for (int i = 0; i < kOwn; ++i) CHECK(seen[(p + 1) * 100000 + i] == 1);
  for (int i = kOwn; i < kOwn + kShared; ++i) {
    CHECK(seen[i] >= 1);  // once per process at most: a process appends a line once
    CHECK(seen[i] <= kProcs);
  }
  // The manifest the tool reads: every line a valid entry.
  const kjit::tools::Manifest m = kjit::tools::parse_manifest(text, "rec.jsonl");
  for (const auto& e : m.problems) CHECK(e.error.empty());
}

TEST_CASE("recorded headers reach no file but the recording's own headers") {
  using kjit::tools::include_problem;
  const std::map<std::string, std::string> allowed = {{"app/a.cuh", "x"}, {"app/b.cuh", "y"}};
  CHECK(include_problem("#include \"app/b.cuh\"\n#include \"kjit/types.cuh\"\nint x;", allowed) ==
        "");
  CHECK(include_problem("// #include \"/etc/passwd\" in a comment\n/* #include <x> */\n",
                        allowed) == "");
  for (const char* bad :
       {"#include \"/etc/passwd\"\n", "  #  include \"../x.cuh\"\n", "%:include \"/tmp/fifo\"\n",
        "#include </etc/passwd>\n", "#define F \"/etc/passwd\"\n#include F\n",
        "/**/ #include \"/dev/zero\"\n", "#inc\\\nlude \"/etc/passwd\"\n",
        "#include_next \"app/a.cuh\"\n", "#import \"x\"\n",
        "#if __has_include(\"/etc/shadow\")\n#endif\n", "#include \"app/a.cuh\" \"/etc/passwd\"\n",
        "/* unterminated", "#include \"app/c.cuh\"\n",
        // Read by NVRTC as directives, and missed by an earlier scan: an identifier ending in R
        // before a plain string is no raw string, and a backslash before CRLF splices lines.
        "#define xR\nstatic const char* s = xR\"(\";\n/**/ #include \"/tmp/planted.h\"\n// )\"\n",
        "#inc\\\r\nlude \"/tmp/planted.h\"\n",
        // Text compilers read differently is refused rather than guessed at.
        "#include \"app/a.cuh\"\r#include \"/etc/passwd\"\n", "#define A \\ \n#include \"x\"\n",
        "#define A ?\?/\n#include \"/etc/passwd\"\n",
        // A comment spanning lines is one space inside the directive; NVRTC reads `éR"(` as a
        // raw string (no byte past ASCII is an identifier's).
        "#/*\n*/include \"/tmp/planted.h\"\n",
        "#define X \xC3\xA9R\"(\" /* )\"\n#include \"/tmp/planted.h\"\n// */\n"}) {
    CAPTURE(bad);
    CHECK_FALSE(include_problem(bad, allowed).empty());
  }
  // What the scan must still accept: CRLF lines, digit separators, raw strings whose text holds
  // quotes and comment markers, a real raw string prefix, NVRTC's own headers.
  for (const char* good : {"#include \"app/a.cuh\"\r\nint x = 1'000'000;\r\n",
                           "const char* s = R\"x(\" /* // )x\";\n#include \"app/b.cuh\"\n",
                           "const char* t = u8R\"(a\nb)\";\nint y = 0x1'Fp+3;\n",
                           // NVRTC's own headers; text past ASCII in a comment.
                           "#include <cuda_fp16.h>\n#if __has_include(<cuda_bf16.h>)\n#endif\n"
                           "/* caf\xC3\xA9 */\n"}) {
    CAPTURE(good);
    CHECK(include_problem(good, allowed) == "");
  }
}
