// docs/API.md's examples, compiled: the GPU-free ones live here (between "// [name]" and
// "// [/name]" markers) and run without a GPU; the GPU ones live in examples/embed/. The last test
// checks that every C, C++ and CMake block in docs/API.md is a verbatim quote of such a region, so
// an example in the doc cannot drift from code that compiles. To change an example, change it
// here (or in examples/embed/) and paste the region into the doc.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "kjit/cache/size.hpp"
#include "kjit/host_math.hpp"
#include "kjit/kjit.hpp"
#include "kjit/ops/group_norm.hpp"
#include "kjit/ops/linear_gn_min.hpp"
#include "kjit/reference.hpp"
#include "test_util.hpp"

namespace {

// [runtime_options]
std::unique_ptr<kjit::Runtime> open_runtime(int device) {
  kjit::RuntimeOptions opts;  // device = -1: KJIT_DEVICE if set, else 0
  opts.device = device;       // one Runtime per device, each in its device's primary context
  opts.cache.mode = kjit::cache::Mode::ReadOnly;  // opts.cache starts from the environment
  std::string why;
  if (!kjit::gpu_available(&why)) return nullptr;  // why: "no CUDA driver found (...)", ...
  return std::make_unique<kjit::Runtime>(opts);    // Errc::NoDevice for a missing ordinal
}
// [/runtime_options]

}  // namespace

TEST_CASE("API.md: RuntimeOptions and device selection") {
  std::string why;
  if (!kjit::gpu_available(&why)) {
    CHECK(open_runtime(0) == nullptr);
    return;
  }
  auto rt = open_runtime(0);
  REQUIRE(rt != nullptr);
  CHECK(rt->props().ordinal == 0);
  CHECK(rt->compiler().disk_cache().mode() == kjit::cache::Mode::ReadOnly);
  CHECK_KJIT_ERROR(open_runtime(4096), kjit::Errc::NoDevice);
}

TEST_CASE("API.md: Spec") {
  // [spec]
  kjit::Spec s("app/scale.cuh", "scale");  // a registered header, a __global__ function template
  s.type(kjit::DType::BF16).value(3);
  // s.instantiation() == "scale<kjit::bfloat16, 3>": the NVRTC name expression
  kjit::Spec t("app/tile.cuh", "app::tile");
  t.type("float").value(int64_t{1} << 40).value(true);
  // t.instantiation() == "app::tile<float, 1099511627776ll, true>"
  // [/spec]
  CHECK(s.instantiation() == "scale<kjit::bfloat16, 3>");
  CHECK(t.instantiation() == "app::tile<float, 1099511627776ll, true>");
  CHECK_KJIT_ERROR(kjit::Spec("app/x.cuh", "k; int evil"), kjit::Errc::InvalidArgument);
}

TEST_CASE("API.md: TemplateSet, Compiler, errors") {
  kjit_test::TempDir dir;
  kjit::cache::Options cache_options;
  cache_options.dir = dir.path;
  kjit::Compiler compiler(cache_options);

  // [templates]
  kjit::TemplateSet& ts = compiler.templates();  // rt.templates() on a Runtime
  ts.add("app/common.cuh", R"(
  #pragma once
  #include "kjit/types.cuh"  // kjit::half, kjit::bfloat16, kjit::to_float, kjit::from_float
  )");
  ts.add("app/axpy.cuh", R"(
  #include "app/common.cuh"
  template <class T, int kA>
  __global__ void axpy(const T* x, T* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = kjit::from_float<T>(kA * kjit::to_float(x[i]) + kjit::to_float(y[i]));
  })");
  // ts.closure("app/axpy.cuh"): app/axpy.cuh, app/common.cuh, kjit/types.cuh (name, text)
  // [/templates]
  std::vector<std::string> names;
  for (const auto& [name, text] : ts.closure("app/axpy.cuh")) names.push_back(name);
  CHECK(names == std::vector<std::string>{"app/axpy.cuh", "app/common.cuh", "kjit/types.cuh"});

  // [compiler]
  const kjit::Spec spec = kjit::Spec("app/axpy.cuh", "axpy").type(kjit::DType::BF16).value(2);
  kjit::CompiledKernel k = compiler.get(spec, "sm_90");  // disk cache, else NVRTC (then stored)
  // k.binary: the cubin; k.lowered_name: its symbol; k.from_disk: whether the cache served it
  kjit::CompiledKernel again = compiler.get(spec, "sm_90");  // from the disk cache now
  const kjit::CompilerStats st = compiler.stats();           // nvrtc_compiles 1, disk.hits 1
  const std::string arch = kjit::Compiler::arch_for_cc(90);  // "sm_90"; a Runtime picks its own
  // [/compiler]
  CHECK_FALSE(k.from_disk);
  CHECK(again.from_disk);
  CHECK(again.binary == k.binary);
  CHECK(k.instantiation == "axpy<kjit::bfloat16, 2>");
  CHECK(st.nvrtc_compiles == 1);
  CHECK(st.disk.hits == 1);
  CHECK(arch == "sm_90");

  kjit::Errc code = kjit::Errc::Io;
  std::string name, log, what;
  ts.add("app/broken.cuh", "template <int N> __global__ void broken() { undeclared(N); }");
  // [errors]
  try {
    compiler.get(kjit::Spec("app/broken.cuh", "broken").value(1), "sm_90");
  } catch (const kjit::Error& e) {  // the one exception type kjit throws
    code = e.code();                // kjit::Errc::Compile
    name = kjit::errc_name(code);   // "compile"
    what = e.what();                // names the instantiation, the header and the options
    log = e.log();                  // NVRTC's log alone (compile errors only)
  }
  // [/errors]
  CHECK(code == kjit::Errc::Compile);
  CHECK(name == "compile");
  CHECK(what.find("broken<1>") != std::string::npos);
  CHECK(log.find("undeclared") != std::string::npos);
}

TEST_CASE("API.md: GroupNorm problems, validation and the specialization they compile to") {
  // [group_norm_problem]
  using namespace kjit::ops;
  // x [8, 24, 24, 256] channels-last in bf16, with fp32 weight (and no bias):
  GroupNormProblem p = GroupNormProblem::from_shape({8, 24, 24, 256}, /*groups=*/32,
                                                    kjit::DType::BF16, Layout::NHWC);
  p.param_dtype = kjit::DType::F32;
  p.activation = Activation::None;  // plain group_norm (from_shape leaves SiLU on)
  p.has_bias = false;               // then bias may be nullptr
  validate(p);                      // throws InvalidArgument naming the rule broken
  // p.N == 8, p.C == 256, p.S == 576 (24 * 24), p.groups == 32
  const GroupNormConfig c = group_norm_heuristic(p, /*cc=*/90);  // what a call on sm_90 uses
  // The kernels it launches: here one, "kjit::gn_fwd<kjit::bfloat16, float, true, 8, 576, ...>"
  const std::vector<kjit::Spec> specs = group_norm_specs(p, c);
  // [/group_norm_problem]
  REQUIRE(specs.size() == 1);
  const kjit::Spec& spec = specs[0];
  CHECK(p.N == 8);
  CHECK(p.C == 256);
  CHECK(p.S == 576);
  CHECK(spec.header() == "kjit/group_norm.cuh");
  CHECK(spec.instantiation().rfind("kjit::gn_fwd<kjit::bfloat16, float, true, 8, 576, ", 0) == 0);
  GroupNormProblem bad = p;
  bad.groups = 7;
  CHECK_KJIT_ERROR(validate(bad), kjit::Errc::InvalidArgument);
}

TEST_CASE("API.md: Linear-GroupNorm-min problems") {
  // [linear_gn_min_problem]
  using namespace kjit::ops;
  LinearGnMinProblem p;
  p.M = 1024;
  p.K = 8192;
  p.N = 8192;
  p.G = 512;
  p.precision = Precision::Tf32;  // opt-in; the default is Precision::Fp32 (strict)
  validate(p);  // throws InvalidArgument: M, K, N, G >= 1, N % G == 0, N <= 2^24, ...
  const std::vector<int64_t> shape = p.output_shape();  // {1, 8192, 1024, 1}, as in PyTorch
  const size_t ws = linear_gn_min_workspace_size(p);    // Y [M, N], minima [M], cuBLASLt's 32 MiB
  // [/linear_gn_min_problem]
  CHECK(shape == std::vector<int64_t>{1, 8192, 1024, 1});
  CHECK(ws == size_t{1024} * 8192 * 4 + 1024 * 4 + kLinearGnMinGemmWorkspace);
  CHECK(std::string(precision_name(p.precision)) == "tf32");
  LinearGnMinProblem bad = p;
  bad.G = 500;
  CHECK_KJIT_ERROR(validate(bad), kjit::Errc::InvalidArgument);
}

TEST_CASE("API.md: cache options") {
  // [cache_options]
  kjit::cache::Options o = kjit::cache::Options::from_env();  // KJIT_CACHE_DIR, KJIT_CACHE, ...
  o.dir = "/var/cache/myapp/kjit";
  o.mode = kjit::cache::Mode::ReadOnly;  // never write: e.g. a cache shipped with the app
  o.max_bytes = kjit::cache::parse_size("512M").value();
  // kjit::RuntimeOptions{}.cache = o, or kjit::Compiler(o)
  // [/cache_options]
  CHECK(o.max_bytes == 512ull << 20);
}

TEST_CASE("API.md: reference and host math") {
  // [reference]
  using kjit::ops::GroupNormProblem;
  const GroupNormProblem p = GroupNormProblem::from_shape({1, 4, 3}, 2, kjit::DType::BF16);
  std::vector<float> x = {0.5f, -1.f, 2.f, 3.25f, 0.f, 1.f, -2.f, 7.f, 1.5f, 0.25f, -0.75f, 4.f};
  for (float& v : x) v = kjit::host::bf16_to_float(kjit::host::float_to_bf16(v));  // as stored
  const std::vector<double> ref = kjit::reference::group_norm(p, x, nullptr, nullptr, 1e-5);
  std::vector<float> y(ref.size());  // stands in for the device's output, read back as float
  for (size_t i = 0; i < y.size(); ++i) {
    unsigned char bytes[2];
    kjit::host::store_as(kjit::DType::BF16, static_cast<float>(ref[i]), bytes);
    y[i] = kjit::host::load_as(kjit::DType::BF16, bytes);
  }
  const kjit::host::ErrorStats e = kjit::host::compare(y, ref, /*atol=*/1e-2, /*rtol=*/1e-2);
  // e.rel_l2, e.max_abs, e.allclose, e.nonfinite
  // [/reference]
  CHECK(e.nonfinite == 0);
  CHECK(e.allclose);
  CHECK(e.rel_l2 <= 1e-2);
  CHECK(e.max_abs > 0);
}

// ---- the doc quotes these regions verbatim ------------------------------------------------------

namespace {

namespace fs = std::filesystem;

// The repository: from this file's path (CMake compiles it by absolute path), else upward from
// the working directory.
fs::path repo_root() {
  std::vector<fs::path> starts = {fs::path(__FILE__).parent_path(), fs::current_path()};
  for (fs::path p : starts) {
    for (; !p.empty(); p = p.parent_path()) {
      if (fs::exists(p / "docs" / "API.md") && fs::exists(p / "examples" / "embed")) return p;
      if (p == p.parent_path()) break;
    }
  }
  return {};
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

bool is_marker(const std::string& line, const std::string& tag) {
  const std::string t = trim(line);
  return t == "// [" + tag + "]" || t == "# [" + tag + "]" || t == "/* [" + tag + "] */";
}

// The lines between the markers of region `name`, with their common indentation removed.
std::optional<std::vector<std::string>> region(const std::string& text, const std::string& name) {
  const std::vector<std::string> lines = split_lines(text);
  size_t i = 0;
  while (i < lines.size() && !is_marker(lines[i], name)) ++i;
  if (i == lines.size()) return std::nullopt;
  std::vector<std::string> body;
  for (++i; i < lines.size() && !is_marker(lines[i], "/" + name); ++i) body.push_back(lines[i]);
  if (i == lines.size()) return std::nullopt;
  size_t indent = std::string::npos;
  for (const auto& l : body)
    if (!trim(l).empty()) indent = std::min(indent, l.find_first_not_of(' '));
  for (auto& l : body) l = trim(l).empty() ? std::string() : l.substr(indent);
  return body;
}

}  // namespace

TEST_CASE("docs/API.md: every C, C++ and CMake example is a compiled region, quoted verbatim") {
  const fs::path root = repo_root();
  REQUIRE_MESSAGE(!root.empty(), "cannot find the repository (docs/API.md) from " << __FILE__);
  const std::vector<std::string> doc = split_lines(read_file(root / "docs" / "API.md"));
  REQUIRE(!doc.empty());
  const std::string open = "<!-- snippet: ", close = " -->";
  int quoted = 0;
  for (size_t i = 0; i < doc.size(); ++i) {
    if (doc[i].rfind("```", 0) != 0) continue;
    const std::string lang = trim(doc[i].substr(3));
    size_t end = i + 1;
    while (end < doc.size() && doc[end].rfind("```", 0) != 0) ++end;
    REQUIRE_MESSAGE(end < doc.size(), "docs/API.md:" << i + 1 << ": unclosed code block");
    const std::vector<std::string> block(doc.begin() + static_cast<long>(i) + 1,
                                         doc.begin() + static_cast<long>(end));
    const std::string marker = i > 0 ? trim(doc[i - 1]) : std::string();
    const bool has_marker = marker.rfind(open, 0) == 0 && marker.size() > open.size() + 4 &&
                            marker.compare(marker.size() - close.size(), close.size(), close) == 0;
    if (lang == "cpp" || lang == "c" || lang == "cmake") {
      CHECK_MESSAGE(has_marker, "docs/API.md:" << i + 1 << ": a " << lang
                                               << " example without a <!-- snippet: path#name --> "
                                                  "line above it");
    }
    if (has_marker) {
      const std::string ref =
          marker.substr(open.size(), marker.size() - open.size() - close.size());
      const size_t hash = ref.find('#');
      REQUIRE_MESSAGE(hash != std::string::npos, "docs/API.md:" << i << ": " << ref);
      const fs::path file = root / ref.substr(0, hash);
      const std::string name = ref.substr(hash + 1);
      const auto want = region(read_file(file), name);
      CHECK_MESSAGE(want.has_value(),
                    "docs/API.md:" << i << ": no region [" << name << "] in " << file.string());
      if (want) {
        CAPTURE(ref);
        std::string diff;
        for (size_t k = 0; k < std::max(want->size(), block.size()) && diff.empty(); ++k) {
          const std::string a = k < want->size() ? (*want)[k] : "<end>";
          const std::string b = k < block.size() ? block[k] : "<end>";
          if (a != b)
            diff = "first difference at line " + std::to_string(k + 1) +
                   " of the region:\n  code: " + a + "\n  doc:  " + b;
        }
        CHECK_MESSAGE(diff.empty(), "docs/API.md:" << i + 2 << ": " << diff);
        ++quoted;
      }
    }
    i = end;
  }
  MESSAGE(quoted << " examples in docs/API.md match their compiled sources");
  CHECK(quoted >= 12);
}
