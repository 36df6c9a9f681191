// kjit-precompile, run as a process the way CI and users run it (no GPU needed).
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <set>

#include "kjit/kjit.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/ops/linear_gn_min.hpp"
#include "test_util.hpp"
#include "tool_runner.hpp"

using kjit_test::run_tool;
using kjit_test::TempDir;
using nlohmann::json;

namespace {

// The seed GroupNorm workload of the default manifest, derived here independently of the tool:
// what kjit::ops::group_norm compiles on an sm_90 device for 16-byte aligned pointers.
kjit::Spec seed_group_norm_spec(int cc) {
  auto p = kjit::ops::GroupNormProblem::from_shape({8, 256, 24, 24}, 32, kjit::DType::F32);
  p.activation = kjit::ops::Activation::SiLU;
  p.has_weight = p.has_bias = true;
  return kjit::ops::group_norm_specs(p, kjit::ops::group_norm_heuristic(p, cc, true)).at(0);
}

// The seed Linear-GroupNorm-min-bias workload of the default manifest, likewise: the kernels
// kjit::ops::linear_gn_min compiles on an sm_90 device with 132 SMs (H100/H200 SXM) for a
// 16-byte aligned output, the row-minimum kernel and the broadcast kernel (the cuBLASLt GEMM
// needs no NVRTC compile).
std::vector<kjit::Spec> seed_linear_gn_min_specs(int cc, int sm_count) {
  kjit::ops::LinearGnMinProblem p;
  p.M = 1024;
  p.K = 8192;
  p.N = 8192;
  p.G = 512;
  p.precision = kjit::ops::Precision::Fp32;
  return kjit::ops::gn_min_specs(p, kjit::ops::gn_min_heuristic(p, cc, sm_count, true));
}

size_t count_entry_files(const std::string& dir) {
  size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
    if (it->path().extension() == ".kjit") ++n;
  return n;
}

}  // namespace

TEST_CASE(
    "precompile of the default manifest for sm_90: entries, then all cached, then the "
    "runtime's lookup compiles nothing") {
  TempDir dir;
  const std::string cache = dir.path + "/cache";
  auto first =
      run_tool("kjit-precompile", "--arch sm_90 --cache-dir " + cache + " --json -j2", dir.path);
  INFO(first.err);
  REQUIRE(first.rc == 0);
  const json s1 = first.json();
  CHECK(s1["failed"] == 0);
  CHECK(s1["cached"] == 0);
  const size_t total = s1["total"].get<size_t>();
  CHECK(total >= 1);
  CHECK(s1["compiled"] == total);
  CHECK(s1["seconds"].get<double>() >= 0);
  CHECK(s1["archs"] == json::array({"sm_90"}));
  CHECK(count_entry_files(cache) == total);
  for (const json& k : s1["kernels"]) {
    CHECK(k["status"] == "compiled");
    CHECK(k["arch"] == "sm_90");
    CHECK(k["key"].get<std::string>().size() == 64);
  }

  // A second run finds everything in the cache.
  auto second =
      run_tool("kjit-precompile", "--arch sm_90 --cache-dir " + cache + " --json -j2", dir.path);
  REQUIRE(second.rc == 0);
  const json s2 = second.json();
  CHECK(s2["compiled"] == 0);
  CHECK(s2["cached"] == total);
  CHECK(s2["failed"] == 0);

  // The runtime's side: the compiler a Runtime would use on an sm_90 device, on that folder.
  kjit::cache::Options o;
  o.dir = cache;
  kjit::Compiler compiler(o);
  // The default manifest holds both seed workloads: one GroupNorm and two gn_min kernels.
  std::vector<kjit::Spec> specs = seed_linear_gn_min_specs(90, 132);
  CHECK(specs.size() == 2);
  specs.push_back(seed_group_norm_spec(90));
  CHECK(total == specs.size());
  std::set<std::string> headers;
  for (const json& k : s1["kernels"]) headers.insert(k["header"].get<std::string>());
  CHECK(headers == std::set<std::string>{"kjit/group_norm.cuh", "kjit/gn_min.cuh"});
  for (const kjit::Spec& spec : specs) {
    INFO(spec.instantiation());
    kjit::CompiledKernel k = compiler.get(spec, "sm_90");
    CHECK(k.from_disk);
    bool listed = false;
    for (const json& j : s1["kernels"]) listed |= j["instantiation"] == spec.instantiation();
    CHECK(listed);
  }
  CHECK(compiler.stats().nvrtc_compiles == 0);
  CHECK(compiler.stats().disk.hits == specs.size());
}

TEST_CASE("precompile for several archs and every autotune candidate, in parallel") {
  TempDir dir;
  const std::string cache = dir.path + "/cache";
  const std::string problem = "-p 'group_norm f32 nchw 2x64x16x16 g=8 silu'";
  auto r = run_tool("kjit-precompile",
                    problem + " -a sm_80,sm_90 --all-candidates -j2 --json --cache-dir " + cache,
                    dir.path);
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const json s = r.json();
  const size_t total = s["total"].get<size_t>();
  CHECK(s["compiled"] == total);
  CHECK(s["jobs"] == 2);

  // Exactly the candidates the runtime's autotuner tries, for each arch's compute capability.
  auto p = kjit::ops::GroupNormProblem::from_shape({2, 64, 16, 16}, 8, kjit::DType::F32);
  std::set<std::string> want, got;
  for (int cc : {80, 90})
    for (const auto& c : kjit::ops::group_norm_candidates(p, cc, true))
      for (const kjit::Spec& spec : kjit::ops::group_norm_specs(p, c))
        want.insert("sm_" + std::to_string(cc) + " " + spec.instantiation());
  for (const json& k : s["kernels"])
    got.insert(k["arch"].get<std::string>() + " " + k["instantiation"].get<std::string>());
  CHECK_MESSAGE(got == want, r.out);
  for (const auto& w : want) CHECK_MESSAGE(got.count(w) == 1, w);
  CHECK(total == want.size());

  // Then the heuristic's pick alone is already there, and a dry run says so.
  auto again =
      run_tool("kjit-precompile", problem + " -a sm_90 --json --cache-dir " + cache, dir.path);
  REQUIRE(again.rc == 0);
  CHECK(again.json()["compiled"] == 0);
  CHECK(again.json()["cached"] == 1);
  auto dry =
      run_tool("kjit-precompile",
               problem + " -a sm_90 --unaligned --dry-run --json --cache-dir " + cache, dir.path);
  REQUIRE(dry.rc == 0);
  const json d = dry.json();
  CHECK(d["total"] == 2);  // aligned (cached) + unaligned (not compiled: no --unaligned above)
  CHECK(d["cached"] == 1);
  CHECK(d["missing"] == 1);
}

TEST_CASE("a bad manifest entry is named with its index and field; the valid ones compile") {
  TempDir dir;
  const std::string cache = dir.path + "/cache";
  const std::string manifest = dir.path + "/m.json";
  kjit_test::write_text(manifest, R"({"problems": [
    {"op": "group_norm", "dtype": "f32", "shape": [2, 64, 7, 7], "groups": 8},
    {"op": "group_norm", "dtype": "f32", "shape": [2, 250, 7, 7], "groups": 32},
    {"op": "no_such_op", "shape": [2, 64]},
    {"op": "group_norm", "shape": [2, 64, 7, 7], "group": 8},
    {"op": "group_norm", "shape": [2, 64, 7, 7], "groups": 8, "dtype": "f8"},
    {"op": "group_norm", "shape": [2, 7, 7, 64], "groups": 8, "layout": "nhwc", "dtype": "bf16"}
  ]})");
  auto r =
      run_tool("kjit-precompile", manifest + " -a sm_90 --json --cache-dir " + cache, dir.path);
  CHECK(r.rc != 0);
  const json s = r.json();
  CHECK(s["compiled"] == 2);  // entries 0 and 5
  CHECK(s["bad_entries"] == 4);
  CHECK(s["failed"] == 4);
  std::map<size_t, std::string> field;
  for (const json& e : s["errors"]) {
    CHECK(e["source"] == manifest);
    field[e["index"].get<size_t>()] = e["field"].get<std::string>();
    CHECK(e["entry"].get<std::string>().find("problems[" + std::to_string(e["index"].get<int>()) +
                                             "]") != std::string::npos);
  }
  CHECK(field ==
        std::map<size_t, std::string>{{1, "groups"}, {2, "op"}, {3, "group"}, {4, "dtype"}});
  // The same, in the plain text on stderr.
  CHECK(r.err.find("problems[1]: field 'groups': C = 250 is not divisible by groups = 32") !=
        std::string::npos);
  CHECK(r.err.find("problems[2]: field 'op': unknown op 'no_such_op'") != std::string::npos);
  // The valid entries reached the cache.
  CHECK(count_entry_files(cache) == 2);

  // A bad linear_gn_min entry (N % G != 0) beside a good one: named by entry and field.
  kjit_test::write_text(manifest, R"({"problems": [
    {"op": "linear_gn_min", "dtype": "f32", "M": 64, "K": 32, "N": 256, "groups": 16},
    {"op": "linear_gn_min", "dtype": "f32", "M": 64, "K": 32, "N": 250, "groups": 16}
  ]})");
  auto lgm =
      run_tool("kjit-precompile", manifest + " -a sm_90 --json --cache-dir " + cache, dir.path);
  CHECK(lgm.rc == 1);
  const json ls = lgm.json();
  CHECK(ls["compiled"] == 1);
  CHECK(ls["bad_entries"] == 1);
  REQUIRE(ls["errors"].size() == 1);
  CHECK(ls["errors"][0]["index"] == 1);
  CHECK(ls["errors"][0]["field"] == "groups");
  CHECK(ls["errors"][0]["entry"] == manifest + ": problems[1]");
  CHECK(lgm.err.find(manifest +
                     ": problems[1]: field 'groups': N = 250 is not divisible by groups = 16") !=
        std::string::npos);
  CHECK(ls["kernels"][0]["header"] == "kjit/gn_min.cuh");

  // A manifest that is not JSON at all is a usage error, before anything compiles.
  kjit_test::write_text(manifest, "{\"problems\": [");
  auto bad = run_tool("kjit-precompile", manifest + " --cache-dir " + cache, dir.path);
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("not valid JSON") != std::string::npos);
}

TEST_CASE("--problem short form and JSON form give the same kernel as a manifest entry") {
  TempDir dir;
  const std::string cache = dir.path + "/cache";
  auto keys = [&](const std::string& args) {
    auto r =
        run_tool("kjit-precompile", args + " -a sm_90 -n --json --cache-dir " + cache, dir.path);
    INFO(r.err);
    CHECK(r.rc == 0);
    std::set<std::string> out;
    const json s = r.json();
    for (const json& k : s["kernels"]) out.insert(k["key"].get<std::string>());
    return out;
  };
  const std::string manifest = dir.path + "/m.json";
  kjit_test::write_text(manifest, R"({"problems": [{"op": "group_norm", "dtype": "f16",
      "layout": "nhwc", "shape": [4, 9, 9, 32], "groups": 4, "activation": "none",
      "affine": false}]})");
  const auto from_file = keys(manifest);
  CHECK(from_file.size() == 1);
  CHECK(keys("-p 'group_norm f16 nhwc 4x9x9x32 g=4 none noaffine'") == from_file);
  CHECK(keys("--problem '{\"op\": \"group_norm\", \"dtype\": \"fp16\", \"layout\": \"NHWC\", "
             "\"shape\": [4, 9, 9, 32], \"groups\": 4, \"activation\": \"none\", \"affine\": "
             "false}'") == from_file);
  // The default manifest differs from it.
  CHECK(keys("") != from_file);
}

TEST_CASE("precompile: plain output off a terminal, usage errors exit 2") {
  TempDir dir;
  const std::string cache = dir.path + "/cache";
  auto r = run_tool("kjit-precompile", "-a sm_90 -j1 --cache-dir " + cache, dir.path);
  INFO(r.err);
  CHECK(r.rc == 0);
  CHECK(r.out.find("[1/") != std::string::npos);
  CHECK(r.out.find("compiled") != std::string::npos);
  CHECK(r.out.find("\033[") == std::string::npos);  // no progress bar into a pipe
  CHECK(r.out.find("0 failed in") != std::string::npos);

  auto arch = run_tool("kjit-precompile", "-a sm_1 --cache-dir " + cache, dir.path);
  CHECK(arch.rc == 2);
  CHECK(arch.err.find("sm_1") != std::string::npos);
  auto form = run_tool("kjit-precompile", "-a volta --cache-dir " + cache, dir.path);
  CHECK(form.rc == 2);
  auto missing =
      run_tool("kjit-precompile", dir.path + "/nope.json --cache-dir " + cache, dir.path);
  CHECK(missing.rc == 2);
  CHECK(missing.err.find("nope.json") != std::string::npos);

  // -a and -p take one value each: what follows is a manifest, not a second arch or problem.
  auto after_arch = run_tool(
      "kjit-precompile", "-n -a sm_90 " + dir.path + "/nope.json --cache-dir " + cache, dir.path);
  CHECK(after_arch.rc == 2);
  CHECK(after_arch.err.find("nope.json: cannot open it") != std::string::npos);
  // A FIFO at a manifest's name (a planted recording) is refused at once, never waited on.
  const std::string fifo = dir.path + "/planted.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto on_fifo = run_tool("kjit-precompile", "-n " + fifo, dir.path);
  CHECK(on_fifo.rc == 2);
  CHECK(on_fifo.err.find("is not a regular file") != std::string::npos);
  auto sm80a = run_tool("kjit-precompile", "-n -a sm_80a --cache-dir " + cache, dir.path);
  CHECK(sm80a.rc == 2);
  CHECK(sm80a.err.find("'a' variant") != std::string::npos);
  // An empty --cache-dir is refused, not read as "the default folder".
  auto empty_dir = run_tool("kjit-precompile", "-n --cache-dir ''", dir.path);
  CHECK(empty_dir.rc == 2);
  CHECK(empty_dir.err.find("must not be empty") != std::string::npos);
  // A key given twice in one object is an error, as it is in the short form.
  auto twice = run_tool("kjit-precompile",
                        "-n --cache-dir " + cache +
                            " -p '{\"op\":\"group_norm\",\"shape\":[2,64,8,8],\"groups\":32,"
                            "\"groups\":16}'",
                        dir.path);
  CHECK(twice.rc == 1);
  CHECK(twice.err.find("key 'groups' appears twice") != std::string::npos);
  // A NUL byte would end the JSON text early: the manifest is refused.
  kjit_test::write_text(dir.path + "/nul.json", std::string("{\"problems\":[]}\0garbage", 24));
  auto nul =
      run_tool("kjit-precompile", "-n " + dir.path + "/nul.json --cache-dir " + cache, dir.path);
  CHECK(nul.rc == 2);
  CHECK(nul.err.find("a NUL byte at offset 15") != std::string::npos);
  // Output that cannot be written is a failure, not exit 0.
  if (std::filesystem::exists("/dev/full")) {
    auto full =
        run_tool("kjit-precompile", "-n --json --cache-dir " + cache + " >/dev/full", dir.path);
    CHECK(full.rc == 1);
    CHECK(full.err.find("cannot write the output") != std::string::npos);
  }

  auto ops = run_tool("kjit-precompile", "--list-ops", dir.path);
  CHECK(ops.rc == 0);
  CHECK(ops.out == "group_norm\nlayer_norm\nlinear_gn_min\nrms_norm\n");
  auto pm = run_tool("kjit-precompile", "--print-manifest", dir.path);
  REQUIRE(pm.rc == 0);
  CHECK(pm.json()["problems"][0]["op"] == "group_norm");
  CHECK(pm.json()["problems"][1] == json{{"op", "linear_gn_min"},
                                         {"dtype", "f32"},
                                         {"M", 1024},
                                         {"K", 8192},
                                         {"N", 8192},
                                         {"groups", 512}});
  // An arch given twice is one target.
  auto archs =
      run_tool("kjit-precompile", "--print-manifest -a sm_90 -a sm_90,sm_80 -a sm_90", dir.path);
  REQUIRE(archs.rc == 0);
  CHECK(archs.json()["archs"] == json{"sm_90", "sm_80"});
  // A problem that fails its checks is reported, not echoed.
  auto bad = run_tool("kjit-precompile",
                      "--print-manifest -p 'group_norm f32 8x256x4x4 g=32' "
                      "-p 'group_norm f32 8x256x4x4 g=33'",
                      dir.path);
  CHECK(bad.rc == 1);
  CHECK(bad.json()["problems"].size() == 1);
  CHECK(bad.err.find("divisible") != std::string::npos);
}

TEST_CASE("kjit-info and kjit-demo: usage errors exit 2, output that cannot be written fails") {
  TempDir dir;
  CHECK(run_tool("kjit-info", "--bogus", dir.path).rc == 2);
  CHECK(run_tool("kjit-info", "--arch", dir.path).rc == 2);  // no value
  CHECK(run_tool("kjit-demo", "--calls x", dir.path).rc == 2);
  auto info = run_tool("kjit-info", "--json", dir.path);
  INFO(info.err);
  REQUIRE(info.rc == 0);
  CHECK(info.json()["kjit_version"].is_string());
  if (std::filesystem::exists("/dev/full")) {
    auto full = run_tool("kjit-info", "--json >/dev/full", dir.path);
    CHECK(full.rc == 1);
    CHECK(full.err.find("cannot write the output") != std::string::npos);
  }
}

// One manifest given twice (or two that share a kernel): each kernel lists each entry once.
TEST_CASE("a kernel names each manifest entry that needs it once") {
  TempDir dir;
  const std::string entry =
      R"({"problems": [{"op": "group_norm", "shape": [2, 64, 8, 8], "groups": 32}]})";
  kjit_test::write_text(dir.path + "/a.json", entry);
  kjit_test::write_text(dir.path + "/b.json", entry);
  auto r = run_tool("kjit-precompile",
                    "-n --json -a sm_90 --cache-dir " + dir.path + "/cache " + dir.path +
                        "/a.json " + dir.path + "/b.json " + dir.path + "/a.json",
                    dir.path);
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const json kernels = r.json()["kernels"];
  REQUIRE(kernels.size() >= 1u);
  for (const json& k : kernels) {
    const auto names = k["entries"].get<std::vector<std::string>>();
    CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());
    CHECK(names.size() == 2u);  // a.json[0] and b.json[0]
  }
}

// Issue item 8: 1e400 made nlohmann throw out of the parser, which ended the whole run with
// exit 2 (and, from a manifest, without the file's name); every other bad value failed alone.
TEST_CASE("a number out of range fails its own problem; the others still compile") {
  TempDir dir;
  const std::string cache = dir.path + "/cache";
  const std::string good = " -p 'group_norm f32 nchw 2x64x8x8 g=8'";
  for (const std::string bad :
       {R"('{"op": "group_norm", "shape": [2, 64, 8, 8], "groups": 1e400}')",
        "'group_norm f32 nchw 2x64x8x8 g=1e400'"}) {
    CAPTURE(bad);
    auto r = run_tool("kjit-precompile",
                      "-a sm_90 --json --cache-dir " + cache + " -p " + bad + good, dir.path);
    INFO(r.err);
    REQUIRE(r.rc == 1);
    const json s = r.json();
    CHECK(s["compiled"].get<int>() + s["cached"].get<int>() == 1);  // the good problem
    CHECK(s["bad_entries"] == 1);
    REQUIRE(s["errors"].size() == 1);
    CHECK(s["errors"][0]["entry"] == "--problem[0]");
    CHECK(s["errors"][0]["field"] == "groups");
    CHECK(r.err.find("--problem[0]: field 'groups': 1e400 is out of range") != std::string::npos);
  }
}

TEST_CASE("a bad problem in a manifest file is named with the file and its index") {
  TempDir dir;
  const std::string cache = dir.path + "/cache";
  const std::string manifest = dir.path + "/m.json";
  kjit_test::write_text(manifest, R"({"problems": [
      {"op": "group_norm", "shape": [2, 64, 8, 8], "groups": 8},
      {"op": "group_norm", "shape": [2, 64, 8, 8], "groups": 1e400},
      {"op": "linear_gn_min", "M": 64, "K": 32, "N": 256, "groups": 18446744073709551616}]})");
  auto m = run_tool("kjit-precompile", manifest + " -a sm_90 --cache-dir " + cache, dir.path);
  INFO(m.err);
  CHECK(m.rc == 1);
  CHECK(m.out.find("1 compiled, 0 cached, 2 failed") != std::string::npos);
  CHECK(m.err.find(manifest + ": problems[1]: field 'groups': 1e400 is out of range") !=
        std::string::npos);
  CHECK(m.err.find(manifest + ": problems[2]: field 'groups': 1.8446744073709552e+19 is out of "
                              "range") != std::string::npos);
}

// A write that fails says where and why (the OS's reason), not "see the warnings".
TEST_CASE("a kernel that cannot be written to the cache names the path and the reason") {
  TempDir dir;
  const std::string cache = dir.path + "/cache";
  // A file where the entry's shard folder belongs: the kernel compiles, its write fails.
  const std::string probe = run_tool("kjit-precompile",
                                     "-p 'group_norm f32 nchw 2x64x8x8 g=8' -a sm_90 --json "
                                     "--dry-run --cache-dir " +
                                         cache,
                                     dir.path)
                                .out;
  const auto kernels = json::parse(probe)["kernels"];
  REQUIRE(kernels.is_array());
  REQUIRE_FALSE(kernels.empty());
  const std::string key = kernels[0]["key"].get<std::string>();
  std::filesystem::create_directories(cache + "/v1");
  kjit_test::write_text(cache + "/v1/" + key.substr(0, 2), "in the way");
  auto r =
      run_tool("kjit-precompile",
               "-p 'group_norm f32 nchw 2x64x8x8 g=8' -a sm_90 --cache-dir " + cache, dir.path);
  INFO(r.out);
  INFO(r.err);
  CHECK(r.rc == 1);
  const std::string text = r.out + r.err;
  CHECK(text.find(cache + "/v1/" + key.substr(0, 2)) != std::string::npos);
  CHECK(text.find("is not a folder") != std::string::npos);
}

// GroupNorm's configs spread work by the device's SMs (found by review: a deployment precompiled
// for 132 SMs missed on a 114-SM H100 PCIe); "arch:SMs" targets both in one run.
TEST_CASE("-a sm_90:132,sm_90:114 precompiles what each device's op loads") {
  TempDir dir;
  const auto p = kjit::ops::GroupNormProblem::from_shape({1, 256, 128, 128}, 16, kjit::DType::F32);
  std::set<std::string> want;
  for (int sms : {132, 114})
    for (const kjit::Spec& s :
         kjit::ops::group_norm_specs_for(p, kjit::Target::for_arch("sm_90", sms), {}, true))
      want.insert(s.instantiation());
  // The kernels a dry run of the problem lists for these targets.
  auto listed = [&](const std::string& targets) {
    auto r = run_tool("kjit-precompile",
                      "-n --json " + targets +
                          " -p 'group_norm f32 nchw 1x256x128x128 g=16' --cache-dir " + dir.path +
                          "/cache",
                      dir.path);
    INFO(r.err);
    REQUIRE(r.rc == 0);
    std::set<std::string> got;
    const json out = r.json();  // kept: a range-for over a temporary's member would dangle
    for (const auto& k : out["kernels"]) got.insert(k["instantiation"].get<std::string>());
    return got;
  };
  CHECK(listed("-a sm_90:132,sm_90:114") == want);
  CHECK(want.size() > kjit::ops::group_norm_specs_for(p, kjit::Target::for_arch("sm_90"), {}, true)
                          .size());  // the two devices really differ here
  // --sm-count is for archs without their own ':N': here sm_90 alone; sm_90:114 keeps its 114.
  CHECK(listed("-a sm_90:114,sm_90 --sm-count 132") == want);
}

// An empty element of an -a list (a doubled or trailing comma) is refused by name, not dropped:
// the targets a run compiles for are exactly the ones written.
TEST_CASE("-a refuses an empty element of its list") {
  TempDir dir;
  for (const char* archs : {"sm_90,,sm_80", "sm_90,", ",sm_90"}) {
    CAPTURE(archs);
    auto r =
        run_tool("kjit-precompile",
                 std::string("-n -a '") + archs +
                     "' -p 'layer_norm f32 rows=8 width=64' --cache-dir " + dir.path + "/cache",
                 dir.path);
    CHECK(r.rc == 2);
    CHECK(r.err.find("arch '' is not of the form") != std::string::npos);
  }
  auto r = run_tool("kjit-precompile",
                    "-n --json -a sm_90 -a sm_80,sm_90 -p 'layer_norm f32 rows=8 width=64' "
                    "--cache-dir " +
                        dir.path + "/cache",
                    dir.path);
  REQUIRE(r.rc == 0);
  CHECK(r.json()["kernels"].size() == 2);  // sm_90 (once) and sm_80
}
