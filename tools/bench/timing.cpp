#include "timing.hpp"

#include <algorithm>
#include <chrono>

namespace kjit_bench {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

DeviceTime graph_time(kjit::Runtime& rt, CUstream stream, int k, int replays,
                      const std::function<void(int)>& enqueue) {
  for (int i = 0; i < k; ++i) enqueue(i);  // warm: loads, first-touch, clocks
  kjit::Graph graph(rt, stream, [&] {
    for (int i = 0; i < k; ++i) enqueue(i);
  });
  kjit::Event start(rt), stop(rt);
  for (int i = 0; i < 3; ++i) graph.launch(stream);
  std::vector<double> per_launch;
  for (int r = 0; r < replays; ++r) {
    start.record(stream);
    graph.launch(stream);
    stop.record(stream);
    stop.synchronize();
    per_launch.push_back(stop.ms_since(start) * 1000.0 / k);
  }
  DeviceTime t;
  t.median_us = median(per_launch);
  t.min_us = *std::min_element(per_launch.begin(), per_launch.end());
  t.max_us = *std::max_element(per_launch.begin(), per_launch.end());
  t.launches_per_replay = k;
  t.replays = replays;
  return t;
}

double host_us_per_call(kjit::Runtime& rt, CUstream stream, int batch, int batches,
                        const std::function<void()>& call) {
  (void)rt;
  for (int i = 0; i < batch; ++i) call();
  kjit::Event done(rt);
  std::vector<double> us;
  for (int b = 0; b < batches; ++b) {
    done.record(stream);
    done.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < batch; ++i) call();
    const auto t1 = std::chrono::steady_clock::now();
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / batch);
  }
  done.record(stream);
  done.synchronize();
  return median(us);
}

double copy_bandwidth_gbps(kjit::Runtime& rt, CUstream stream) {
  // A kernel copy (as PyTorch's copy_ is): the copy engines behind cuMemcpyDtoD reach less.
  const size_t bytes = size_t{1} << 30;
  kjit::DeviceBuffer a(rt, bytes), b(rt, bytes);
  a.fill_bytes(0x3f);
  kjit::Kernel k = rt.kernel(kjit::Spec("kjit/copy.cuh", "kjit::copy16").value(4));
  long long n16 = static_cast<long long>(bytes / 16);
  kjit::LaunchConfig cfg;
  cfg.block.x = 256;
  cfg.grid.x = static_cast<unsigned>(rt.props().sm_count * 8);
  DeviceTime t = graph_time(rt, stream, 4, 20, [&](int i) {
    CUdeviceptr src = i % 2 ? a.ptr() : b.ptr(), dst = i % 2 ? b.ptr() : a.ptr();
    k(stream, cfg, src, dst, n16);
  });
  return 2.0 * static_cast<double>(bytes) / (t.median_us * 1e-6) / 1e9;
}

}  // namespace kjit_bench
