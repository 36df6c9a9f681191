// Measurement primitives of kjit-bench, as docs/PERF.md describes them: device time from events
// around CUDA-graph replays of K back-to-back launches over rotating buffers (median of many
// replays, divided by K); host time from a tight loop; copy bandwidth of the same GPU.
#pragma once

#include <cuda.h>

#include <functional>
#include <vector>

#include "kjit/kjit.hpp"

namespace kjit_bench {

struct DeviceTime {
  double median_us = 0, min_us = 0, max_us = 0;
  int launches_per_replay = 0, replays = 0;
};

// `enqueue(i)` enqueues launch i (0..k-1) on `stream`; the graph holds k of them.
DeviceTime graph_time(kjit::Runtime& rt, CUstream stream, int k, int replays,
                      const std::function<void(int)>& enqueue);

// Wall time per call of `call` in batches of `batch` calls, synchronizing between batches
// (so the launch queue never fills); median over batches.
double host_us_per_call(kjit::Runtime& rt, CUstream stream, int batch, int batches,
                        const std::function<void()>& call);

// Device-to-device copy bandwidth, bytes read + written per second (GB/s).
double copy_bandwidth_gbps(kjit::Runtime& rt, CUstream stream);

double median(std::vector<double> v);

}  // namespace kjit_bench
