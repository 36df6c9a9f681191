#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "../../runtime/src/param_sizes.hpp"
#include "error_text.hpp"
#include "gpu_env.hpp"
#include "kjit/host_math.hpp"
#include "test_util.hpp"

using kjit_test::runtime;

namespace {

kjit::Spec affine(kjit::DType t, int scale, int offset, bool add_one) {
  kjit::Spec s("kjit/test_kernels.cuh", "kjit::test_affine");
  s.type(t).value(scale).value(offset).value(add_one);
  return s;
}

}  // namespace

TEST_CASE("device properties are read" * doctest::test_suite("host_logic")) {
  const auto& p = runtime().props();
  MESSAGE(p.name << " cc " << p.cc() << " SMs " << p.sm_count << " (context may use "
                 << p.context_sm_count << ") arch " << runtime().arch());
  CHECK(p.sm_count > 0);
  CHECK((p.context_sm_count > 0 && p.context_sm_count <= p.sm_count));
  CHECK(p.cc() >= 50);
  CHECK(p.max_smem_per_block_optin >= 48 * 1024);
  CHECK(p.l2_bytes > 0);
  CHECK(p.driver_version >= 12000);
}

TEST_CASE("compile, load and launch a template; a repeated call compiles nothing") {
  auto& rt = runtime();
  kjit::Stream stream(rt);
  const int n = 1000 + static_cast<int>(kjit_test::uniform(0, 5000));
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(kjit_test::uniform(-1000, 1000)) / 8.f;
  auto dx = kjit::DeviceBuffer::from_host(runtime(), x);
  kjit::DeviceBuffer dy(rt, n * sizeof(float));
  dy.fill_bytes(0xFF);
  kjit::Kernel k = rt.kernel(affine(kjit::DType::F32, 3, 2, true));
  const auto before = rt.stats();
  kjit::LaunchConfig cfg;
  cfg.grid.x = (n + 255) / 256;
  cfg.block.x = 256;
  k(stream, cfg, dx.ptr(), dy.ptr(), n);
  stream.synchronize();
  auto y = dy.to_host<float>(n);
  for (int i = 0; i < n; ++i) REQUIRE(y[i] == 3 * x[i] + 3);

  for (int rep = 0; rep < 10; ++rep) {
    kjit::Kernel again = rt.kernel(affine(kjit::DType::F32, 3, 2, true));
    CHECK(again.function() == k.function());
  }
  const auto after = rt.stats();
  CHECK(after.compiler.nvrtc_compiles == before.compiler.nvrtc_compiles);
  CHECK(after.kernels_loaded == before.kernels_loaded);
}

// A kernel handle keeps the code it was loaded with; a header replaced through templates().add()
// gives new code to later Runtime::kernel calls for the same spec.
TEST_CASE("a replaced template header is loaded afresh; an old handle keeps its code") {
  kjit_test::TempDir dir;
  kjit::RuntimeOptions o;
  o.cache.dir = dir.path;
  kjit::Runtime rt(o);
  auto source = [](int v) {
    return "template <int kScale>\n__global__ void put(int* p) { p[threadIdx.x] = kScale * " +
           std::to_string(v) + "; }\n";
  };
  const kjit::Spec spec = kjit::Spec("app/put.cuh", "put").value(3);
  kjit::Stream stream(rt);
  kjit::DeviceBuffer out(rt, 32 * sizeof(int));
  kjit::LaunchConfig cfg;
  cfg.block.x = 32;
  auto run = [&](const kjit::Kernel& k) {
    out.fill_bytes(0);
    k(stream, cfg, out.ptr());
    stream.synchronize();
    return out.to_host<int>(32)[31];
  };
  rt.templates().add("app/put.cuh", source(1));
  const kjit::Kernel v1 = rt.kernel(spec);
  CHECK(run(v1) == 3);
  rt.templates().add("app/put.cuh", source(5));
  const kjit::Kernel v5 = rt.kernel(spec);
  CHECK(run(v5) == 15);
  CHECK(run(v1) == 3);
  CHECK(rt.kernel(spec).function() == v5.function());  // no reload without a change
  // An unrelated header added later leaves the loaded kernel in place: no reload, and a capture
  // still gets it (it raised CaptureCompile when any add() invalidated every kernel).
  const uint64_t loaded = rt.stats().kernels_loaded;
  rt.templates().add("app/unrelated.cuh", "// nothing\n");
  CHECK(rt.kernel(spec).function() == v5.function());
  kjit::Graph g(rt, stream, [&] { rt.kernel(spec, stream)(stream, cfg, out.ptr()); });
  CHECK(rt.stats().kernels_loaded == loaded);
  // A header the spec's header includes is part of its closure: replacing it reloads.
  rt.templates().add("app/scale.cuh", "constexpr int kTimes = 7;\n");
  rt.templates().add("app/put2.cuh",
                     "#include \"app/scale.cuh\"\ntemplate <int kScale>\n__global__ void "
                     "put2(int* p) { p[threadIdx.x] = kScale * kTimes; }\n");
  const kjit::Spec spec2 = kjit::Spec("app/put2.cuh", "put2").value(3);
  CHECK(run(rt.kernel(spec2)) == 21);
  rt.templates().add("app/scale.cuh", "constexpr int kTimes = 11;\n");
  CHECK(run(rt.kernel(spec2)) == 33);
}

TEST_CASE("bf16 conversions round to nearest even") {
  auto& rt = runtime();
  kjit::Stream stream(rt);
  const int n = 4096;
  std::vector<uint16_t> x(n);
  for (int i = 0; i < n; ++i)
    x[i] = kjit::host::float_to_bf16(static_cast<float>(kjit_test::uniform(-9999, 9999)) / 37.f);
  auto dx = kjit::DeviceBuffer::from_host(runtime(), x);
  kjit::DeviceBuffer dy(rt, n * 2);
  kjit::Kernel k = rt.kernel(affine(kjit::DType::BF16, 3, 0, false));
  kjit::LaunchConfig cfg;
  cfg.grid.x = n / 128;
  cfg.block.x = 128;
  k(stream, cfg, dx.ptr(), dy.ptr(), n);
  stream.synchronize();
  auto y = dy.to_host<uint16_t>(n);
  for (int i = 0; i < n; ++i)
    REQUIRE(y[i] == kjit::host::float_to_bf16(3.f * kjit::host::bf16_to_float(x[i])));
}

TEST_CASE("dynamic shared memory above 48 KB is enabled for the launch") {
  auto& rt = runtime();
  kjit::Stream stream(rt);
  const int bytes = 100 * 1024;
  kjit::Spec s("kjit/test_kernels.cuh", "kjit::test_big_smem");
  s.value(bytes);
  kjit::Kernel k = rt.kernel(s);
  kjit::DeviceBuffer dy(rt, 8 * sizeof(int));
  kjit::LaunchConfig cfg;
  cfg.grid.x = 8;
  cfg.block.x = 256;
  cfg.shared_bytes = bytes;
  k(stream, cfg, dy.ptr());
  stream.synchronize();
  auto y = dy.to_host<int>(8);
  for (int b = 0; b < 8; ++b) CHECK(y[b] == b + bytes);
}

// Each round is a fresh kernel whose first launches race from several threads with different
// shared sizes: a raise must never leave a smaller limit set after a larger one. After the race,
// a launch at the largest size must still run.
TEST_CASE("first launches of one kernel with different shared sizes race safely") {
  auto& rt = runtime();
  const int max_smem = rt.props().max_smem_per_block_optin;
  const int threads = 8;
  // 56 KB .. the device maximum: every launch needs the limit above the 48 KB default.
  auto size_of = [&](int t) {
    return static_cast<unsigned>(56 * 1024 + (max_smem - 56 * 1024) * t / (threads - 1)) & ~15u;
  };
  for (int round = 0; round < 12; ++round) {
    const int bytes = 1024 + 16 * round;  // a new kernel each round, never one already raised
    kjit::Spec s("kjit/test_kernels.cuh", "kjit::test_big_smem");
    s.value(bytes);
    kjit::Kernel k = rt.kernel(s);
    kjit::DeviceBuffer dy(rt, (threads + 1) * sizeof(int));
    dy.fill_bytes(0xFF);
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> pool;
    std::vector<std::string> errors(threads);
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        try {
          kjit::Stream stream(rt);
          kjit::LaunchConfig cfg;
          cfg.block.x = 128;
          cfg.shared_bytes = size_of(t);
          ready.fetch_add(1);
          while (!go.load()) std::this_thread::yield();
          k(stream, cfg, dy.ptr() + t * sizeof(int));
          stream.synchronize();
        } catch (const kjit::Error& e) {
          errors[t] = e.what();
        }
      });
    }
    while (ready.load() < threads) std::this_thread::yield();
    go.store(true);
    for (auto& th : pool) th.join();
    for (int t = 0; t < threads; ++t) CHECK_MESSAGE(errors[t].empty(), errors[t]);
    kjit::Stream stream(rt);
    kjit::LaunchConfig cfg;
    cfg.block.x = 128;
    cfg.shared_bytes = size_of(threads - 1);
    CHECK_NOTHROW(k(stream, cfg, dy.ptr() + threads * sizeof(int)));
    stream.synchronize();
    auto y = dy.to_host<int>(threads + 1);
    for (int t = 0; t <= threads; ++t) CHECK(y[t] == bytes);
  }
}

namespace {

// A kernel that uses 100 KB of dynamic shared memory, and a launch of it: `grid` CTAs of 256.
kjit::Kernel big_smem_kernel(kjit::Runtime& rt, unsigned grid, kjit::LaunchConfig* cfg) {
  kjit::Spec s("kjit/test_kernels.cuh", "kjit::test_big_smem");
  s.value(100 * 1024);
  cfg->grid.x = grid;
  cfg->block.x = 256;
  cfg->shared_bytes = 100 * 1024;
  return rt.kernel(s);
}

}  // namespace

TEST_CASE("fits() says whether the device can run a launch shape" *
          doctest::test_suite("host_logic")) {
  auto& rt = runtime();
  kjit::LaunchConfig cfg;
  kjit::Kernel k = big_smem_kernel(rt, 8, &cfg);
  CHECK(k.fits(cfg));  // raises the 48 KB default limit, as a launch would
  cfg.shared_bytes = static_cast<unsigned>(rt.props().max_smem_per_block_optin) + 1024;
  CHECK_FALSE(k.fits(cfg));  // more shared memory than a block may have
  cfg.shared_bytes = 0;
  cfg.block.x = 4096;  // over the 1024-thread limit
  CHECK_FALSE(k.fits(cfg));
  if (rt.props().cluster_launch) {
    cfg.block.x = 128;
    cfg.cluster.x = 4;
    cfg.grid.x = 8;
    CHECK(k.fits(cfg));
  }
  // Cooperative: the whole grid must be resident at once.
  cfg.cluster.x = 1;
  cfg.block.x = 256;
  cfg.cooperative = true;
  cfg.grid.x = static_cast<unsigned>(rt.props().sm_count);
  CHECK(k.fits(cfg));
  cfg.grid.x = static_cast<unsigned>(rt.props().sm_count) * 9;  // 2304 threads on an SM: > 2048
  CHECK_FALSE(k.fits(cfg));
  CHECK_KJIT_ERROR(kjit::Kernel().fits(cfg), kjit::Errc::InvalidArgument);
}

TEST_CASE("resident_ctas() counts what a persistent grid may launch, as fits() does" *
          doctest::test_suite("host_logic")) {
  auto& rt = runtime();
  kjit::LaunchConfig cfg;
  kjit::Kernel k = big_smem_kernel(rt, 1, &cfg);  // at most two CTAs per SM (228 KB of smem)
  const int64_t sms = rt.props().context_sm_count;
  const int64_t n = k.resident_ctas(cfg);
  CHECK(n > 0);
  CHECK(n % sms == 0);
  CHECK(n <= 2 * sms);
  // The same count bounds a cooperative grid: that many fit at once, one more does not.
  cfg.cooperative = true;
  cfg.grid.x = static_cast<unsigned>(n);
  CHECK(k.fits(cfg));
  cfg.grid.x = static_cast<unsigned>(n + 1);
  CHECK_FALSE(k.fits(cfg));
  cfg.cooperative = false;
  cfg.shared_bytes = static_cast<unsigned>(rt.props().max_smem_per_block_optin) + 1024;
  CHECK(k.resident_ctas(cfg) == 0);  // more shared memory than a block may have
  cfg.shared_bytes = 0;
  cfg.cluster.x = 2;
  cfg.grid.x = 2;
  CHECK_KJIT_ERROR(k.resident_ctas(cfg), kjit::Errc::InvalidArgument);  // clusters: not counted
  cfg.cluster.x = 1;
  CHECK_KJIT_ERROR(kjit::Kernel().resident_ctas(cfg), kjit::Errc::InvalidArgument);
}

TEST_CASE("a zero dimension or a grid of partial clusters is an InvalidArgument" *
          doctest::test_suite("host_logic")) {
  auto& rt = runtime();
  kjit::Stream stream(rt);
  kjit::Kernel k = rt.kernel(affine(kjit::DType::F32, 2, 0, false));  // y = 2x: overflows
  kjit::DeviceBuffer y(rt, 4096);
  y.fill_bytes(0x7F);
  int n = 1024;
  CUdeviceptr p = y.ptr();
  kjit::LaunchConfig cfg;
  cfg.grid.x = 8;
  cfg.block.x = 128;
  cfg.cluster.x = 0;  // used to launch without a cluster
  CHECK_KJIT_ERROR(k(stream, cfg, p, p, n), kjit::Errc::InvalidArgument);
  CHECK_KJIT_ERROR(k.fits(cfg), kjit::Errc::InvalidArgument);
  cfg.cluster.x = 1;
  cfg.block.y = 0;
  CHECK_KJIT_ERROR(k(stream, cfg, p, p, n), kjit::Errc::InvalidArgument);
  cfg.block.y = 1;
  cfg.grid.z = 0;
  CHECK_KJIT_ERROR(k(stream, cfg, p, p, n), kjit::Errc::InvalidArgument);
  cfg.grid.z = 1;
  cfg.cluster.x = 3;  // 8 CTAs are not a whole number of 3-CTA clusters
  try {
    k(stream, cfg, p, p, n);
    FAIL("a grid of 8 in clusters of 3 launched");
  } catch (const kjit::Error& e) {
    CHECK(e.code() == kjit::Errc::InvalidArgument);
    CHECK(std::string(e.what()).find("cluster (3,1,1)") != std::string::npos);
  }
  cfg.cluster.x = 2;
  cfg.cooperative = true;  // kjit's cooperative grids have no clusters
  CHECK_KJIT_ERROR(k(stream, cfg, p, p, n), kjit::Errc::InvalidArgument);
  CHECK_KJIT_ERROR(k.fits(cfg), kjit::Errc::InvalidArgument);
  stream.synchronize();
  CHECK(y.to_host<unsigned>(1024)[0] == 0x7F7F7F7Fu);  // nothing ran
}

TEST_CASE("a refused launch names the kernel and the configuration" *
          doctest::test_suite("host_logic")) {
  auto& rt = runtime();
  kjit::Stream stream(rt);
  kjit::Kernel k = rt.kernel(affine(kjit::DType::F32, 1, 0, false));
  kjit::LaunchConfig cfg;
  cfg.block.x = 4096;  // over the 1024-thread limit
  int n = 0;
  CUdeviceptr p = 0;
  try {
    k(stream, cfg, p, p, n);
    FAIL("launch with 4096 threads per block succeeded");
  } catch (const kjit::Error& e) {
    CHECK(e.code() == kjit::Errc::Cuda);
    CHECK(std::string(e.what()).find("test_affine") != std::string::npos);
    CHECK(std::string(e.what()).find("block (4096,1,1)") != std::string::npos);
  }
}

TEST_CASE("a cooperative grid larger than the device holds is refused as Unsupported") {
  // What a GroupNorm coop plan sees when MPS lets the context use fewer SMs than fits() counts:
  // a refusal it can fall back from, and the context stays usable.
  auto& rt = runtime();
  kjit::Stream stream(rt);
  kjit::Kernel k = rt.kernel(affine(kjit::DType::F32, 2, 0, false));
  const int n = 1024;
  std::vector<float> x(n, 1.5f);
  auto dx = kjit::DeviceBuffer::from_host(rt, x);
  kjit::DeviceBuffer dy(rt, n * 4);
  kjit::LaunchConfig cfg;
  cfg.block.x = 1024;
  cfg.cooperative = true;
  cfg.grid.x = static_cast<unsigned>(rt.props().sm_count) * 3;  // 3072 threads on an SM: > 2048
  REQUIRE_FALSE(k.fits(cfg));
  try {
    k(stream, cfg, dx.ptr(), dy.ptr(), n);
    FAIL("a cooperative grid of 3 x 1024-thread CTAs per SM launched");
  } catch (const kjit::Error& e) {
    CHECK(e.code() == kjit::Errc::Unsupported);
    CHECK(std::string(e.what()).find("cooperative") != std::string::npos);
  }
  cfg.grid.x = 1;
  k(stream, cfg, dx.ptr(), dy.ptr(), n);
  stream.synchronize();
  auto y = dy.to_host<float>(n);
  for (int i = 0; i < n; ++i) REQUIRE(y[i] == 3.f);
}

TEST_CASE("a cluster launch runs (sm_90)") {
  auto& rt = runtime();
  if (!rt.props().cluster_launch) return;
  kjit::Stream stream(rt);
  const int n = 8 * 128;
  std::vector<float> x(n, 1.5f);
  auto dx = kjit::DeviceBuffer::from_host(runtime(), x);
  kjit::DeviceBuffer dy(rt, n * 4);
  kjit::Kernel k = rt.kernel(affine(kjit::DType::F32, 2, 0, false));
  kjit::LaunchConfig cfg;
  cfg.grid.x = 8;
  cfg.block.x = 128;
  cfg.cluster.x = 4;
  k(stream, cfg, dx.ptr(), dy.ptr(), n);
  stream.synchronize();
  auto y = dy.to_host<float>(n);
  for (int i = 0; i < n; ++i) REQUIRE(y[i] == 3.f);
}

// A node made from a CUkernel (a CUlibrary's, as the CUDA runtime launches) and no CUfunction:
// graph_kernel_names() names it. The driver fills in the CUfunction (driver 580, for captured
// launches too), which cuFuncGetName names.
TEST_CASE("graphs: graph_kernel_names names a node added with only a CUkernel") {
  auto& rt = runtime();
  const kjit::CompiledKernel ck =
      rt.compiler().get(affine(kjit::DType::F32, 4, 1, false), rt.arch());
  REQUIRE_FALSE(ck.is_ptx);
  auto proc = [](const char* name) { return kjit::driver_proc(name); };
  const auto load = reinterpret_cast<decltype(&cuLibraryLoadData)>(proc("cuLibraryLoadData"));
  const auto get = reinterpret_cast<decltype(&cuLibraryGetKernel)>(proc("cuLibraryGetKernel"));
  const auto unload = reinterpret_cast<decltype(&cuLibraryUnload)>(proc("cuLibraryUnload"));
  const auto create = reinterpret_cast<decltype(&cuGraphCreate)>(proc("cuGraphCreate"));
  const auto destroy = reinterpret_cast<decltype(&cuGraphDestroy)>(proc("cuGraphDestroy"));
  const auto add_node =
      reinterpret_cast<decltype(&cuGraphAddKernelNode)>(proc("cuGraphAddKernelNode"));
  CUlibrary lib = nullptr;
  REQUIRE_NOTHROW(kjit::check_driver(
      load(&lib, ck.binary.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cuLibraryLoadData"));
  CUkernel kern = nullptr;
  CHECK_NOTHROW(kjit::check_driver(get(&kern, lib, ck.lowered_name.c_str()), "cuLibraryGetKernel"));
  CUgraph graph = nullptr;
  REQUIRE_NOTHROW(kjit::check_driver(create(&graph, 0), "cuGraphCreate"));
  kjit::DeviceBuffer dx(rt, 1024), dy(rt, 1024);
  CUdeviceptr px = dx.ptr(), py = dy.ptr();
  int count = 256;
  void* args[] = {&px, &py, &count};
  CUDA_KERNEL_NODE_PARAMS params{};
  params.kern = kern;
  params.gridDimX = params.gridDimY = params.gridDimZ = 1;
  params.blockDimX = 256;
  params.blockDimY = params.blockDimZ = 1;
  params.kernelParams = args;
  params.ctx = rt.context();  // a CUkernel runs in the context the node names (none is current)
  CUgraphNode node = nullptr;
  REQUIRE_NOTHROW(
      kjit::check_driver(add_node(&node, graph, nullptr, 0, &params), "cuGraphAddKernelNode"));
  const std::vector<std::string> names = kjit::graph_kernel_names(rt, graph);
  REQUIRE(names.size() == 1u);
  CHECK(names[0] == ck.lowered_name);
  CHECK_NOTHROW(kjit::check_driver(destroy(graph), "cuGraphDestroy"));
  CHECK_NOTHROW(kjit::check_driver(unload(lib), "cuLibraryUnload"));
}

TEST_CASE("graphs: a loaded kernel captures; an unloaded one raises CaptureCompile") {
  auto& rt = runtime();
  kjit::Stream stream(rt);
  const int n = 512;
  std::vector<float> x(n, 2.f);
  auto dx = kjit::DeviceBuffer::from_host(runtime(), x);
  kjit::DeviceBuffer dy(rt, n * 4);
  rt.kernel(affine(kjit::DType::F32, 5, 0, false), stream);  // prepare before capture
  kjit::LaunchConfig cfg;
  cfg.grid.x = 2;
  cfg.block.x = 256;
  kjit::Graph g(rt, stream, [&] {
    kjit::Kernel again = rt.kernel(affine(kjit::DType::F32, 5, 0, false), stream);
    again(stream, cfg, dx.ptr(), dy.ptr(), n);
  });
  dy.fill_bytes(0xFF);
  g.launch(stream);
  stream.synchronize();
  auto y = dy.to_host<float>(n);
  for (int i = 0; i < n; ++i) REQUIRE(y[i] == 10.f);
  // The graph names the kernel it recorded (mangled: the template arguments follow the name).
  const std::vector<std::string> names = g.kernel_names();
  REQUIRE(names.size() == 1u);
  CHECK(names[0].rfind("_ZN4kjit11test_affineI", 0) == 0);
  const auto memset32 =
      reinterpret_cast<decltype(&cuMemsetD32Async)>(kjit::driver_proc("cuMemsetD32Async"));
  kjit::Graph memset_only(rt, stream, [&] {
    REQUIRE_NOTHROW(kjit::check_driver(memset32(dy.ptr(), 0u, static_cast<size_t>(n), stream),
                                       "cuMemsetD32Async"));
  });
  CHECK(memset_only.nodes() == 1u);
  CHECK(memset_only.kernel_names().empty());
  CHECK_KJIT_ERROR(
      kjit::Graph(rt, stream, [&] { rt.kernel(affine(kjit::DType::F32, 77, 1, true), stream); }),
      kjit::Errc::CaptureCompile);
}

// The typed launch compares its arguments with the kernel's parameters (read once at load): a
// missing argument or an int64 where the kernel takes an int would launch with garbage.
TEST_CASE("typed launches are checked against the kernel's parameters" *
          doctest::test_suite("host_logic")) {
  auto& rt = runtime();
  const kjit::Kernel k = rt.kernel(affine(kjit::DType::F32, 2, 3, false));
  REQUIRE(k.num_params() == 3);  // (const float* x, float* y, int n)
  kjit::LaunchConfig cfg;
  const float* x = nullptr;
  float* y = nullptr;
  auto field_of = [](auto fn) -> std::string {
    try {
      fn();
    } catch (const kjit::Error& e) {
      CHECK(e.code() == kjit::Errc::InvalidArgument);
      return std::string(e.field()) + ": " + e.what();
    }
    return "(launched)";
  };
  CHECK(field_of([&] { k(nullptr, cfg, x, y); }) ==
        "args: kernel " + k.instantiation() + " takes 3 parameters, launched with 2 arguments");
  CHECK(field_of([&] { k(nullptr, cfg, x, y, int64_t{5}); }) ==
        "args: kernel " + k.instantiation() + ": parameter 2 is 4 bytes, argument 2 is 8 bytes");
  // The right ones launch (an empty range: n = 0 writes nothing).
  kjit::Stream stream(rt);
  k(stream.get(), cfg, x, y, 0);
  stream.synchronize();
}

// Where the driver has cuFuncGetParamCount, kjit reads the sizes up to that count instead of
// probing past the last parameter: both must give the same sizes for a loaded kernel. (The CUDA
// 13.0 driver has no count query: there this compares nothing and says so.)
TEST_CASE("parameter sizes: the driver's count query agrees with the probe") {
  const kjit::detail::ParamCountFn count = kjit::detail::driver_param_count_fn();
  const kjit::detail::ParamInfoFn info = kjit::detail::driver_param_info_fn();
  if (!count || !info) {
    MESSAGE("the driver has no cuFuncGetParamCount (or no cuFuncGetParamInfo): nothing to compare");
    return;
  }
  auto& rt = runtime();
  const kjit::Kernel k = rt.kernel(affine(kjit::DType::F32, 2, 3, false));
  const auto counted = kjit::detail::read_param_sizes(k.function(), count, info);
  const auto probed = kjit::detail::read_param_sizes(k.function(), nullptr, info);
  REQUIRE(counted.has_value());
  REQUIRE(probed.has_value());
  CHECK(*counted == *probed);
  CHECK(*counted == std::vector<size_t>{sizeof(float*), sizeof(float*), sizeof(int)});
}

namespace {

// Two kernels whose own limits cap their blocks below the device's 1024 threads: one by its
// __launch_bounds__, one by its registers (every load precedes the first store, which may alias
// them, so many values are live at once).
const char* kLimitsSource = R"(
template <int kThreads>
__global__ void __launch_bounds__(kThreads) bounded(float* y) {
  y[blockIdx.x * blockDim.x + threadIdx.x] = 1.f;
}
template <int kN>
__global__ void __maxnreg__(104) heavy(const float* x, float* y) {
  const int base = (blockIdx.x * blockDim.x + threadIdx.x) * kN;
  float v[kN];
#pragma unroll
  for (int i = 0; i < kN; ++i) v[i] = x[base + i];
#pragma unroll
  for (int i = 0; i < kN; ++i) y[base + i] = v[i] * v[(i * 37 + 1) % kN];
})";

// Warps of a kernel with `regs` registers per thread that one SM's registers hold: registers go
// to a warp 8 per thread at a time, from four banks of 16K (one per SM sub-partition) that each
// hold whole warps. An H200 gives a 104-register kernel at most 512 threads per block and 16
// one-warp blocks per SM (twenty-sixth session); the CUDA toolkit's cuda_occupancy.h agrees.
int warps_by_registers(int regs) {
  const int per_warp = (regs + 7) / 8 * 8 * 32;
  return 16384 / per_warp * 4;
}

// The Error(Cuda) a launch raises, as its message; "" when it launched.
template <class Fn>
std::string cuda_error_of(Fn fn) {
  return kjit_test::error_text(fn, kjit::Errc::Cuda);
}

}  // namespace

// The driver reports a kernel's own limits (num_registers, max_threads_per_block) and refuses a
// block past them; kjit passes both on, names the kernel, and fits() says no (the driver's
// occupancy query alone would count blocks past the launch bounds). The fake driver models the
// same rules from the cubin, and this case runs on both.
TEST_CASE("a kernel's launch bounds and registers cap its block; a launch past them is refused" *
          doctest::test_suite("host_logic")) {
  auto& rt = runtime();
  rt.templates().add("test/limits.cuh", kLimitsSource);
  kjit::Stream stream(rt);
  constexpr int kN = 128;
  kjit::DeviceBuffer x(rt, 1024 * kN * sizeof(float)), y(rt, 1024 * kN * sizeof(float));
  x.fill_bytes(0);
  kjit::LaunchConfig cfg;

  kjit::Spec bounded_spec("test/limits.cuh", "bounded");
  const kjit::Kernel bounded = rt.kernel(bounded_spec.value(128));
  CHECK(bounded.max_threads_per_block() == 128);
  CHECK((bounded.num_registers() > 0 && bounded.num_registers() <= 255));
  cfg.block.x = 128;
  CHECK(bounded.fits(cfg));
  CHECK(cuda_error_of([&] { bounded(stream, cfg, y.ptr()); }) == "");
  cfg.block.x = 256;
  CHECK_FALSE(bounded.fits(cfg));
  const std::string past_bounds = cuda_error_of([&] { bounded(stream, cfg, y.ptr()); });
  CHECK(past_bounds.find("bounded<128>") != std::string::npos);
  CHECK(past_bounds.find("CUDA_ERROR_INVALID_VALUE") != std::string::npos);

  kjit::Spec heavy_spec("test/limits.cuh", "heavy");
  const kjit::Kernel heavy = rt.kernel(heavy_spec.value(kN));
  const int regs = heavy.num_registers(), cap = heavy.max_threads_per_block();
  MESSAGE("heavy<" << kN << ">: " << regs << " registers, at most " << cap << " threads per block");
  REQUIRE((regs > 64 && regs <= 104));  // so that 1024 threads cannot share 64K registers
  CHECK(cap == std::min(1024, warps_by_registers(regs) * 32));
  // One-warp blocks: as many per SM as the registers hold (at most 32).
  cfg.block.x = 32;
  CHECK(heavy.resident_ctas(cfg) ==
        int64_t{std::min(32, warps_by_registers(regs))} * rt.props().context_sm_count);
  cfg.block.x = static_cast<unsigned>(cap);
  CHECK(heavy.fits(cfg));
  CHECK(cuda_error_of([&] { heavy(stream, cfg, x.ptr(), y.ptr()); }) == "");
  cfg.block.x = static_cast<unsigned>(cap + 32);
  CHECK_FALSE(heavy.fits(cfg));
  const std::string past_registers = cuda_error_of([&] { heavy(stream, cfg, x.ptr(), y.ptr()); });
  CHECK(past_registers.find("heavy<128>") != std::string::npos);
  CHECK(past_registers.find("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES") != std::string::npos);
  stream.synchronize();
}
