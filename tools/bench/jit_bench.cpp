// The JIT path's costs: NVRTC first and warm compiles, a disk hit, module load, and the host
// cost of a launch through kjit against a bare cuLaunchKernel of the same kernel.
#include <cudaTypedefs.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "jit_bench.hpp"
#include "kjit/ops/group_norm.hpp"
#include "timing.hpp"

namespace kjit_bench {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

kjit::Spec affine(int scale) {
  return kjit::Spec("kjit/test_kernels.cuh", "kjit::test_affine")
      .type(kjit::DType::F32)
      .value(scale)
      .value(0)
      .value(false);
}

}  // namespace

BareLaunch::BareLaunch(kjit::Runtime& r)
    : rt(r), kernel(r.kernel(affine(2))), x(r, kN * 4), y(r, kN * 4), xp(x.ptr()), yp(y.ptr()) {}

double BareLaunch::host_us(CUstream stream) {
  // The ABI pinned, as driver_proc advises: cudaTypedefs.h's type for that version.
  auto launch =
      reinterpret_cast<PFN_cuLaunchKernel_v4000>(kjit::driver_proc("cuLaunchKernel", 4000));
  return host_us_per_call(rt, stream, 256, 41, [&] {
    kjit::check_driver(launch(kernel.function(), 4, 1, 1, 256, 1, 1, 0, stream, params, nullptr),
                       "bare cuLaunchKernel of kjit::test_affine");
  });
}

nlohmann::json run_jit(kjit::Runtime& rt, CUstream stream) {
  nlohmann::json j;
  char tmpl[] = "/tmp/kjit-bench-XXXXXX";
  const std::string dir = mkdtemp(tmpl) ? tmpl : "/tmp/kjit-bench";
  kjit::cache::Options o;
  o.dir = dir;
  {
    kjit::Compiler c(o);
    auto t0 = std::chrono::steady_clock::now();
    c.get(affine(3), rt.arch());
    j["nvrtc_first_compile_ms"] = ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    c.get(affine(5), rt.arch());
    j["nvrtc_warm_compile_ms"] = ms_since(t0);
    // The seed GroupNorm specialization, cold (its compile time matters to users most).
    auto p = kjit::ops::GroupNormProblem::from_shape({8, 256, 24, 24}, 32, kjit::DType::F32);
    t0 = std::chrono::steady_clock::now();
    for (const kjit::Spec& s : kjit::ops::group_norm_specs_for(p, kjit::Target::of(rt), {}, true))
      c.get(s, rt.arch());
    j["nvrtc_group_norm_seed_compile_ms"] = ms_since(t0);
  }
  {
    kjit::Compiler c(o);  // a new compiler: nothing in memory, everything on disk
    auto t0 = std::chrono::steady_clock::now();
    kjit::CompiledKernel k = c.get(affine(3), rt.arch());
    j["disk_hit_ms"] = ms_since(t0);
    j["disk_hit_was_hit"] = k.from_disk;
  }
  {
    kjit::RuntimeOptions ro;
    ro.device = rt.props().ordinal;
    ro.cache = o;
    kjit::Runtime fresh(ro);  // a cold process's view: empty table, warm disk
    auto t0 = std::chrono::steady_clock::now();
    fresh.kernel(affine(5));
    j["cold_first_call_disk_hit_plus_load_ms"] = ms_since(t0);
    j["cold_first_call_compiles"] = fresh.stats().compiler.nvrtc_compiles;
  }
  std::filesystem::remove_all(dir);

  // Host cost per launch: bare cuLaunchKernel vs kjit::Kernel vs the whole op call.
  BareLaunch bare(rt);
  j["host_us_bare_cuLaunchKernel"] = bare.host_us(stream);
  kjit::Kernel& k = bare.kernel;
  void** params = bare.params;
  kjit::LaunchConfig cfg;
  cfg.grid.x = 4;
  cfg.block.x = 256;
  j["host_us_kjit_kernel_launch"] =
      host_us_per_call(rt, stream, 256, 41, [&] { k.launch(stream, cfg, params); });
  auto p = kjit::ops::GroupNormProblem::from_shape({8, 256, 24, 24}, 32, kjit::DType::F32);
  const size_t bytes = static_cast<size_t>(p.N * p.C * p.S) * 4;
  kjit::DeviceBuffer gx(rt, bytes), gy(rt, bytes), gw(rt, p.C * 4), gb(rt, p.C * 4);
  gx.fill_bytes(0x3f);
  gw.fill_bytes(0x3f);
  gb.fill_bytes(0);
  kjit::ops::GroupNormOptions go;
  auto gn = [&] {
    kjit::ops::group_norm(rt, p, reinterpret_cast<void*>(gx.ptr()),
                          reinterpret_cast<void*>(gy.ptr()), reinterpret_cast<void*>(gw.ptr()),
                          reinterpret_cast<void*>(gb.ptr()), go, stream);
  };
  gn();
  j["host_us_group_norm_op_seed"] = host_us_per_call(rt, stream, 256, 41, gn);
  return j;
}

}  // namespace kjit_bench
