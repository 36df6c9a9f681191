// kjit-bench checks its shape list before it needs the device: a bad file is named with the case
// and the rule, also on a machine without a GPU (where a good one then fails for want of a driver).
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "test_util.hpp"
#include "tool_runner.hpp"

using kjit_test::run_tool;
using kjit_test::TempDir;

TEST_CASE("kjit-bench: a bad shape list is reported before any device work") {
  TempDir dir;
  const std::string path = dir.path + "/shapes.json";
  auto run = [&](const std::string& text) {
    kjit_test::write_text(path, text);
    return run_tool("kjit-bench", "--skip-jit --shapes " + path, dir.path);
  };
  struct Bad {
    const char* text;
    const char* message;
  };
  const Bad bad[] = {
      {"", "not valid JSON"},
      {R"({"op": "group_norm"})", "must be a JSON array"},
      {R"([{"op": "group_norm", "shape": [8, 256]}])", "case 0: [json.exception.out_of_range.403]"},
      {R"([{"op": "group_norm", "shape": "8x256", "groups": 32}])", "shape must be an array"},
      {R"([{"op": "group_norm", "shape": [8, 256, 4], "groups": 30.9}])",
       "groups = 30.9 must be an integer"},
      {R"([{"op": "group_norm", "shape": [8, 256.9, 4], "groups": 32}])",
       "a shape dimension = 256.9 must be an integer"},
      {R"([{"op": "group_norm", "shape": [8, 256, 4], "groups": 1e300}])", "must be an integer"},
      {R"([{"op": "group_norm", "shape": [8, 256], "groups": 32, "dtpye": "bf16"}])",
       "unknown key 'dtpye'"},
      {R"([{"op": "linear_gn_min", "shape": [8, 64, 64], "groups": 8, "layout": "nhwc"}])",
       "unknown key 'layout' for op 'linear_gn_min'"},
      {R"([{"op": "groupnorm", "shape": [8, 256], "groups": 32}])", "must be group_norm or"},
      {R"([{"op": "group_norm", "shape": [8, 256, 4], "groups": 30}])", "divisible by groups"},
      {R"([{"op": "group_norm", "shape": [8, 256], "groups": 32, "layout": "NHWC"}])",
       "layout 'NHWC' must be nchw or nhwc"},
      {R"([{"op": "group_norm", "shape": [8, 256], "groups": 32, "dtype": "fp64"}])", "fp64"},
      {R"([{"op": "linear_gn_min", "shape": [8, 64, 64], "groups": 8, "dtype": "bf16"}])",
       "must be fp32, tf32, fp32x3 or fp32x3-percall"},
      {R"([{"op": "linear_gn_min", "shape": [8, 64], "groups": 8}])", "needs shape [M, K, N]"},
      {R"([{"op": "layer_norm", "shape": [18446744073709551615, 4]}])",
       "a shape dimension = 18446744073709551615 exceeds 2^63 - 1"},
      {R"([{"op": "group_norm", "shape": [8, 256], "groups": 32}, 7])",
       "case 1: must be an object"},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.text);
    const auto r = run(b.text);
    CHECK(r.rc == 2);
    CHECK_MESSAGE(r.err.find(b.message) != std::string::npos, r.err);
    CHECK(r.err.find("no_driver") == std::string::npos);
  }
  CHECK(run(std::string(100000, '[') + std::string(100000, ']')).err.find("nested deeper") !=
        std::string::npos);
  CHECK(run_tool("kjit-bench", "--shapes " + dir.path, dir.path).err.find("is a directory") !=
        std::string::npos);
  const auto unwritable =
      run_tool("kjit-bench", "--json " + dir.path + "/no/such/dir/x.json", dir.path);
  CHECK(unwritable.rc == 2);
  CHECK(unwritable.err.find("its folder is not writable") != std::string::npos);
  // A FIFO (which an open for writing would wait on) or a symlink at the results' name is refused
  // at once, and nothing is created through the link.
  const std::string fifo = dir.path + "/results.fifo", link = dir.path + "/results.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  REQUIRE(::symlink((dir.path + "/elsewhere.json").c_str(), link.c_str()) == 0);
  for (const std::string& target : {fifo, link}) {
    const auto r = run_tool("kjit-bench", "--json " + target, dir.path);
    CAPTURE(target);
    CHECK(r.rc == 2);
    CHECK(r.err.find("is not a regular file") != std::string::npos);
  }
  CHECK_FALSE(std::filesystem::exists(dir.path + "/elsewhere.json"));
  CHECK(run_tool("kjit-bench", "--op groupnorm", dir.path).rc == 2);
  for (const char* ops : {"layer_norm,", "layer_norm,,rms_norm", "layer_norm,rms"}) {
    const auto r = run_tool("kjit-bench", std::string("--op ") + ops, dir.path);
    CAPTURE(ops);
    CHECK(r.rc == 2);  // an empty or unknown piece is named, not dropped
    CHECK(r.err.find("is not registered (registered: ") != std::string::npos);
    CHECK(r.err.find("group_norm, layer_norm, linear_gn_min, rms_norm") != std::string::npos);
  }
  CHECK(run_tool("kjit-bench", "--shapes ''", dir.path).rc == 2);  // not the default list
  {  // --sweep takes -p problems (their op's candidates); a bad one is still named first
    const auto r = run_tool("kjit-bench", "--sweep -p 'layer_norm f32 rows=1 widht=64'", dir.path);
    CHECK(r.rc == 2);
    CHECK_MESSAGE(r.err.find("widht: unknown field for op layer_norm") != std::string::npos, r.err);
    // A good one passes the arguments' checks: without a GPU it then fails for want of a device
    // (exit 1), with one it sweeps (no candidate matches the filter: nothing is timed).
    const auto ok = run_tool("kjit-bench",
                             "--skip-jit --sweep --sweep-filter no-such-config -p 'rms_norm f32 "
                             "rows=2 width=64'",
                             dir.path);
    CHECK_MESSAGE(ok.rc != 2, ok.err);
    CHECK(ok.err.find("--sweep") == std::string::npos);
  }
  CHECK(run_tool("kjit-bench", "--json ''", dir.path).rc == 2);
  // --problem goes through the op registry: a bad one names the problem and the field, before
  // the device is touched.
  for (const auto& bad_problem : std::vector<std::pair<std::string, std::string>>{
           {"'layer_norm rows=4 widht=3'", "widht: unknown field for op layer_norm"},
           {"'rms_norm rows=4'", "width: missing"},
           {"'softmax rows=4'", "unknown op 'softmax'"},
           {"'group_norm 8x250x4 g=32'", "groups: "},
           {R"('{"op":"layer_norm","rows":1,"rows":2,"width":64}')", "'rows' appears twice"}}) {
    // Named copies: clang 14 cannot capture a structured binding in CAPTURE's lambda.
    const std::string& arg = bad_problem.first;
    const std::string& message = bad_problem.second;
    CAPTURE(arg);
    const auto r = run_tool("kjit-bench", "-p " + arg, dir.path);
    CHECK(r.rc == 2);
    CHECK_MESSAGE(r.err.find(message) != std::string::npos, r.err);
    CHECK(r.err.find("no_driver") == std::string::npos);
  }
  // A run that fails (here: no driver) leaves an earlier results file as it was.
  const std::string results = dir.path + "/results.json";
  kjit_test::write_text(results, "{\"earlier\": true}\n");
  const auto failed = run_tool("kjit-bench", "--skip-jit --json " + results, dir.path);
  if (failed.err.find("no_driver") != std::string::npos)
    CHECK(kjit_test::read_text(results) == "{\"earlier\": true}\n");
}
