// The fake driver's state (fake_cuda.h): one device, its primary context, loaded modules,
// streams with their captures and clocks, events, memory, and the faults a test asked for.
// Shared by the files that implement its entry points (fake_entries.hpp).
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cubin_info.hpp"
#include "fake_cuda.h"

namespace kjit_fake {

// An H200's numbers, as the real driver reports them.
constexpr int kSms = 132, kMaxThreads = 1024, kSmemOptin = 232448, kSmemPerSm = 233472;
constexpr int kSmemDefault = 48 * 1024, kReservedSmemPerBlock = 1024, kMaxBlocksPerSm = 32;
constexpr int kRegsPerSm = 65536;  // also the most one block may hold
constexpr uint32_t kMagicStream = 0x5354524d, kMagicEvent = 0x4556544e;

// The version cuDriverGetVersion reports: 13000 (the H200's driver), or KJIT_FAKE_DRIVER_VERSION.
int driver_version();

struct Function {
  std::string name;
  const KernelInfo* info = nullptr;
  uint64_t cost_ns = 0;  // what one launch adds to its stream's clock (cuEventElapsedTime)
  std::atomic<int> max_dynamic_smem{0};
  std::atomic<bool> nonportable{false};
};

struct Module {
  std::vector<unsigned char> image;
  CubinInfo cubin;
  std::vector<std::unique_ptr<Function>> functions;
  std::mutex mu;
};

struct Node {
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_KERNEL;
  CUfunction fn = nullptr;  // kernel nodes
  uint64_t cost_ns = 0;
};

// A stream: its capture (if one is under way) and its clock, which each launch advances by its
// kernel's cost, so that events time what was launched between them.
struct Stream {
  uint32_t magic = kMagicStream;
  bool legacy = false;  // the legacy (null) stream, which cannot be captured
  std::atomic<uint64_t> clock_ns{0};
  std::atomic<bool> capturing{false};
  std::mutex mu;  // guards the rest
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  std::thread::id capturer;
  bool invalidated = false;  // a capture-unsafe call while this capture was under way
  std::vector<Node> captured;
};

struct Graph {
  std::vector<std::unique_ptr<Node>> nodes;
  uint64_t cost_ns = 0;
};

struct Event {
  uint32_t magic = kMagicEvent;
  std::atomic<bool> recorded{false};
  std::atomic<uint64_t> at_ns{0};
};

// Entry points a test may make fail (kjit_fake_fail).
enum FaultPoint { kLaunch, kModuleLoad, kFuncGetAttribute, kMemAlloc, kFaultPoints };
extern const char* const kFaultNames[kFaultPoints];

struct Fault {
  std::atomic<int> left{0};
  std::atomic<CUresult> with{CUDA_SUCCESS};
};

// Device memory: an address range no host code may touch, and the host bytes behind it.
struct Allocation {
  size_t bytes = 0;
  std::unique_ptr<unsigned char[]> host;
};

struct State {
  std::atomic<uint64_t> launches{0}, module_loads{0}, graph_launches{0};
  std::atomic<int64_t> live_modules{0};
  Fault faults[kFaultPoints];
  std::mutex mem_mu;
  std::map<uintptr_t, Allocation> allocations;  // by device address
  uintptr_t next_device = 0;                    // the next unused device address
  std::mutex capture_mu;
  std::vector<Stream*> capturing;  // streams with a capture under way
  int context_object = 0;          // its address is the primary context
  std::atomic<int> primary_refs{0};
  Stream legacy;
};

State& state();
// True (and *r the error) while a test asked entry point p to fail.
bool injected(FaultPoint p, CUresult* r);

CUcontext primary();
CUcontext current();  // the calling thread's current context, or null

inline Function* fn_of(CUfunction f) {
  return reinterpret_cast<Function*>(f);
}
// The stream a handle names (the legacy and the calling thread's per-thread stream included);
// null for a handle that is no stream.
Stream* stream_of(CUstream s);

// A call that a capture under way forbids (an allocation, a synchronous copy, a synchronize):
// true when one does (a global-mode capture anywhere, or one this thread began in thread-local
// mode), which it invalidates, as the driver does; the call then fails with
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED.
bool capture_forbids();
// Work enqueued on s: a node of its capture when one is under way (true), else nothing (false;
// the caller does the work now). Either way the stream's clock advances by the node's cost.
bool capture_node(Stream& s, const Node& n);

// The calling thread's last launch (kjit_fake_last_launch).
kjit_fake_launch& last_launch();
bool& launched();

}  // namespace kjit_fake
