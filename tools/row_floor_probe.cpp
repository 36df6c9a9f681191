// kjit-row-floor: what one row of a norm must cost on this GPU, measured on skeleton kernels.
//
// A norm over one long row (1 x 65536) must read the row, reduce it across SMs, then write it;
// an elementwise op only reads and writes. This tool times, in CUDA-graph replays over rotating
// rows (as kjit-bench does), kernels that do only that much, so that the gap between kjit's row
// norms and the elementwise floor can be split into what the reduction itself costs and what a
// kernel adds on top:
//   empty            one CTA doing nothing: the per-kernel cost of a graph node
//   scale_spread     y = x * w on 128 CTAs of 128 threads (the elementwise floor that also reads w)
//   scale_cluster    the same work on 16 CTAs of 1024 threads launched as one cluster, no exchange
//   rms_pull         + a sum of squares exchanged as kjit's row norms first did: each CTA's sum in
//                    its own shared memory, a cluster barrier, warp 0 reads the peers', a second
//                    one
//   rms_push         + the exchange with one barrier: each CTA writes its sum into every peer
//   rms_async        + the exchange without a barrier after the start, as kjit's row norms do now:
//                    each CTA sends its sum to every peer's inbox (kjit/cluster.cuh), whose
//                    mbarrier counts the bytes that landed
//   rms_global       y = x * w * rsqrt(mean(x^2)) on 64 CTAs (no cluster) meeting through global
//                    atomics (a counter and a generation; all 64 CTAs resident)
// Each kernel's result is checked against the host (the skeletons compute RMSNorm without eps).
// Every kernel starts with griddepcontrol.wait (a no-op without programmatic launch). By default
// they launch without programmatic dependent launch: compare them with kjit under KJIT_PDL=0.
// --pdl launches them with it (the successor is scheduled as the grid exits), as kjit's kernels
// launch by default; on one row that saves kjit about 0.6 us. rms_global is left out with --pdl:
// its 64 CTAs must all be resident, which a successor scheduled early does not guarantee.
// Prints a table and, with --json, writes it. Without a GPU it says so and exits 0.
#include <CLI/CLI.hpp>
#include <kjit/kjit.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tool_util.hpp"

namespace {

const char* kSource = R"(
#include "kjit/cluster.cuh"
#include "kjit/layer_norm.cuh"
#include "kjit/pdl.cuh"

// The reduction and the remote stores are kjit's own (row_norm's team_sum, cluster_store,
// inbox_send).
namespace probe {
__device__ float4 mul(float4 a, float4 b, float s) {
  return make_float4(a.x * b.x * s, a.y * b.y * s, a.z * b.z * s, a.w * b.w * s);
}
__device__ float sq(float4 a) { return a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w; }
}  // namespace probe

__global__ void empty() { kjit::pdl_wait(); }

// kMode 0: y = x * w; 1: RMS, exchange pulled (two barriers); 2: RMS, pushed (one barrier);
// 3: RMS, sent to every peer's inbox (st.async counted on an mbarrier, as row_norm does).
template <int kThreads, int kCluster, int kMode>
__global__ void __launch_bounds__(kThreads)
    rms_cluster(const float4* x, const float4* w, float4* y, int n) {
  __shared__ float red[32];
  __shared__ float slots[kCluster > 1 ? kCluster : 1];
  __shared__ float total;
  __shared__ float4 inbox[kCluster];
  __shared__ unsigned long long bar;
  if (kMode == 3 && threadIdx.x == 0) kjit::inbox_init(&bar);
  if (kMode >= 2) kjit::cluster_arrive_relaxed();  // this CTA runs: peers may write its slots
  kjit::pdl_wait();
  const int i = blockIdx.x * kThreads + threadIdx.x;
  const float4 a = x[i], b = w[i];
  float s = 1.f, mine = 0.f;
  if (kMode > 0) {
    const float part = kjit::rownorm::team_sum<kThreads, kThreads>(probe::sq(a), red);
    const unsigned rank = kjit::cluster_rank();
    if (kMode == 1) {
      if (threadIdx.x == 0) slots[0] = part;
      kjit::cluster_arrive();
      kjit::cluster_wait();
      if (threadIdx.x < 32) {
        const float t = kjit::warp_sum(threadIdx.x < kCluster ? kjit::cluster_load(slots, threadIdx.x) : 0.f);
        if (threadIdx.x == 0) total = t;
      }
      kjit::cluster_arrive();
      __syncthreads();
    } else if (kMode == 3) {
      if (threadIdx.x == 0) kjit::inbox_expect(&bar, kCluster * sizeof(float4));
      kjit::cluster_wait();  // every peer has started and initialized its inbox
      if (threadIdx.x < kCluster)
        kjit::inbox_send(inbox + rank, &bar, threadIdx.x, make_float4(part, 0.f, 0.f, 0.f));
      kjit::inbox_wait(&bar);
      // Each warp adds the messages itself, lane l taking message l % kCluster (kCluster: 16)
      mine = kjit::rownorm::xor_sum<kCluster>(inbox[(threadIdx.x & 31) % kCluster].x);
    } else {
      kjit::cluster_wait();  // every peer has started
      if (threadIdx.x < kCluster) kjit::cluster_store(slots + rank, threadIdx.x, part);
      kjit::cluster_arrive();
      kjit::cluster_wait();
      float t = 0.f;
#pragma unroll
      for (int k = 0; k < kCluster; ++k) t += slots[k];
      if (threadIdx.x == 0) total = t;
      __syncthreads();
    }
    s = rsqrtf((kMode == 3 ? mine : total) / n);
  }
  y[i] = probe::mul(a, b, s);
  if (kMode == 1) kjit::cluster_wait();  // no peer reads this CTA's slot any more
}

// RMS over one row on gridDim.x CTAs meeting in global memory: bar = {count, generation},
// acc = {running sum, the call's total}. Every CTA must be resident (the host launches few).
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    rms_global(const float4* x, const float4* w, float4* y, int n, unsigned* bar, float* acc) {
  __shared__ float red[32];
  __shared__ float total;
  kjit::pdl_wait();
  const int i = blockIdx.x * kThreads + threadIdx.x;
  const float4 a = x[i], b = w[i];
  const float part = kjit::rownorm::team_sum<kThreads, kThreads>(probe::sq(a), red);
  if (threadIdx.x == 0) {
    volatile unsigned* gen = bar + 1;
    const unsigned g = *gen;
    atomicAdd(acc, part);
    __threadfence();
    if (atomicAdd(bar, 1u) == gridDim.x - 1) {
      __threadfence();
      acc[1] = atomicExch(acc, 0.f);
      bar[0] = 0;
      __threadfence();
      atomicAdd(bar + 1, 1u);
    } else {
      while (*gen == g) {
      }
    }
    __threadfence();
    total = *(volatile float*)(acc + 1);
  }
  __syncthreads();
  y[i] = probe::mul(a, b, rsqrtf(total / n));
}
)";

constexpr int kN = 65536;   // one row
constexpr int kSets = 320;  // rotating rows: 320 x 2 x 256 KB, past twice the 60 MB L2

struct Case {
  std::string name, what;
  kjit::Kernel kernel;
  kjit::LaunchConfig cfg;
  bool global = false;
  bool rms = false;
};

kjit::Spec spec(const char* name, std::vector<int> values) {
  kjit::Spec s("probe/row_floor.cuh", name);
  for (int v : values) s.value(v);
  return s;
}

std::vector<Case> cases(kjit::Runtime& rt, bool pdl) {
  auto cfg = [pdl](unsigned grid, unsigned block, unsigned cluster) {
    kjit::LaunchConfig c;
    c.grid.x = grid;
    c.block.x = block;
    c.cluster.x = cluster;
    c.programmatic = pdl;
    return c;
  };
  std::vector<Case> out;
  out.push_back({"empty", "one CTA, nothing", rt.kernel(spec("empty", {})), cfg(1, 32, 1)});
  out.push_back({"scale_spread", "y = x*w, 128 CTAs x 128",
                 rt.kernel(spec("rms_cluster", {128, 1, 0})), cfg(128, 128, 1)});
  out.push_back({"scale_cluster", "y = x*w, cluster 16 x 1024",
                 rt.kernel(spec("rms_cluster", {1024, 16, 0})), cfg(16, 1024, 16)});
  out.push_back({"rms_pull", "cluster 16 x 1024, 2 barriers",
                 rt.kernel(spec("rms_cluster", {1024, 16, 1})), cfg(16, 1024, 16), false, true});
  out.push_back({"rms_push", "cluster 16 x 1024, 1 barrier",
                 rt.kernel(spec("rms_cluster", {1024, 16, 2})), cfg(16, 1024, 16), false, true});
  out.push_back({"rms_async", "cluster 16 x 1024, st.async + mbarrier",
                 rt.kernel(spec("rms_cluster", {1024, 16, 3})), cfg(16, 1024, 16), false, true});
  if (!pdl)  // every CTA must be resident (see the top of this file)
    out.push_back({"rms_global", "64 CTAs x 256, global atomics",
                   rt.kernel(spec("rms_global", {256})), cfg(64, 256, 1), true, true});
  return out;
}

// Median device us per call over `replays` replays of a graph of kSets calls.
double time_case(kjit::Runtime& rt, kjit::Stream& st, const Case& c, const kjit::DeviceBuffer& x,
                 const kjit::DeviceBuffer& w, const kjit::DeviceBuffer& y,
                 const kjit::DeviceBuffer& bar, const kjit::DeviceBuffer& acc, int replays) {
  const size_t row = size_t{kN} * sizeof(float);
  auto call = [&](int k) {
    // float4 pointers on the device: any pointer of the same size here.
    const auto* xp = reinterpret_cast<const float*>(x.ptr() + row * k);
    auto* yp = reinterpret_cast<float*>(y.ptr() + row * k);
    const auto* wp = w.as<const float>();
    if (c.name == "empty")
      c.kernel(st, c.cfg);
    else if (c.global)
      c.kernel(st, c.cfg, xp, wp, yp, kN, bar.as<unsigned>(), acc.as<float>());
    else
      c.kernel(st, c.cfg, xp, wp, yp, kN);
  };
  kjit::Graph g(rt, st, [&] {
    for (int k = 0; k < kSets; ++k) call(k);
  });
  kjit::Event a(rt), b(rt);
  std::vector<double> us;
  for (int r = 0; r < replays + 2; ++r) {
    a.record(st);
    g.launch(st);
    b.record(st);
    b.synchronize();
    if (r >= 2) us.push_back(1000.0 * b.ms_since(a) / kSets);
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// The largest relative error of row k of y against the host's x * w (* rsqrt(mean(x^2))).
double check(const Case& c, const std::vector<float>& hx, const std::vector<float>& hw,
             const kjit::DeviceBuffer& y, int k) {
  std::vector<float> hy(kN);
  y.download(hy.data(), hy.size() * sizeof(float), size_t{kN} * sizeof(float) * k);
  double ss = 0;
  for (int i = 0; i < kN; ++i) ss += double(hx[size_t(k) * kN + i]) * hx[size_t(k) * kN + i];
  const double s = c.rms ? 1.0 / std::sqrt(ss / kN) : 1.0;
  double worst = 0;
  for (int i = 0; i < kN; ++i) {
    const double want = double(hx[size_t(k) * kN + i]) * hw[i] * s;
    const double e = std::abs(hy[i] - want) / std::max(1e-3, std::abs(want));
    if (!(e <= worst)) worst = std::isnan(e) ? INFINITY : e;  // an unwritten (NaN) y fails
  }
  return worst;
}

int run(int replays, bool pdl, const std::string& json_path) {
  kjit::Runtime rt;
  if (pdl && rt.props().cc_major < 9) {
    std::fprintf(stderr, "kjit-row-floor: --pdl needs sm_90 or newer (this device is sm_%d%d)\n",
                 rt.props().cc_major, rt.props().cc_minor);
    return 2;
  }
  kjit::Stream st(rt);
  rt.templates().add("probe/row_floor.cuh", kSource);
  std::vector<float> hx(size_t{kN} * kSets), hw(kN);
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = float((i * 2654435761u) % 2001) / 1000.f - 1.f;
  for (int i = 0; i < kN; ++i) hw[i] = 0.5f + float(i % 97) / 97.f;
  auto x = kjit::DeviceBuffer::from_host(rt, hx), w = kjit::DeviceBuffer::from_host(rt, hw);
  kjit::DeviceBuffer y(rt, hx.size() * sizeof(float)), bar(rt, 8), acc(rt, 8);
  bar.fill_bytes(0);
  acc.fill_bytes(0);
  nlohmann::json out = nlohmann::json::array();
  std::printf("| kernel | what | us per call | max rel err |\n|---|---|---|---|\n");
  bool ok = true;
  for (const Case& c : cases(rt, pdl)) {
    y.fill_bytes(0xFF);
    const double us = time_case(rt, st, c, x, w, y, bar, acc, replays);
    st.synchronize();
    const double err =
        c.name == "empty" ? 0.0 : std::max(check(c, hx, hw, y, 0), check(c, hx, hw, y, kSets - 1));
    ok = ok && err < 1e-4;
    std::printf("| %s | %s | %.3f | %.1e |\n", c.name.c_str(), c.what.c_str(), us, err);
    out.push_back(
        {{"kernel", c.name}, {"what", c.what}, {"us", us}, {"max_rel_err", err}, {"pdl", pdl}});
  }
  if (!json_path.empty()) kjit::tools::write_text_file(json_path, out.dump(1) + "\n");
  return ok ? 0 : 1;
}

// NVRTC only, no device: every kernel above compiles for `arch` (CI runs this without a GPU).
int compile_only(const std::string& arch) {
  kjit::cache::Options off;
  off.mode = kjit::cache::Mode::Off;
  kjit::Compiler compiler(off);
  compiler.templates().add("probe/row_floor.cuh", kSource);
  for (const kjit::Spec& s :
       {spec("empty", {}), spec("rms_cluster", {128, 1, 0}), spec("rms_cluster", {1024, 16, 0}),
        spec("rms_cluster", {1024, 16, 1}), spec("rms_cluster", {1024, 16, 2}),
        spec("rms_cluster", {1024, 16, 3}), spec("rms_global", {256})})
    compiler.compile(s, arch);
  std::printf("kjit-row-floor: 7 kernels compiled for %s\n", arch.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kjit-row-floor: skeleton kernels for one row of 65536 floats (device time)"};
  int replays = 30;
  std::string json;
  bool pdl = false;
  app.add_option("--replays", replays, "graph replays (median taken)")->check(CLI::Range(3, 10000));
  app.add_option("--json", json, "write the table to this file");
  app.add_flag("--pdl", pdl, "launch with programmatic dependent launch, as kjit's kernels do");
  std::string compile_arch;
  app.add_option("--compile-only", compile_arch,
                 "only compile the kernels for this arch (e.g. sm_90), no GPU needed");
  CLI11_PARSE(app, argc, argv);
  try {
    if (!compile_arch.empty()) return compile_only(compile_arch);
    if (!json.empty()) kjit::tools::check_output_path(json);  // before any work
    std::string why;
    if (!kjit::gpu_available(&why)) {
      std::printf("kjit-row-floor: no GPU (%s): nothing to measure\n", why.c_str());
      return 0;
    }
    return run(replays, pdl, json);
  } catch (const kjit::Error& e) {
    std::fprintf(stderr, "kjit-row-floor: %s error: %s\n", kjit::errc_name(e.code()), e.what());
    return 1;
  }
}
