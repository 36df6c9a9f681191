// The fake driver's streams, captures, graphs and events. Each stream keeps a clock that its
// launches advance by their kernels' costs; events read it, so that timings differ by kernel.
// Captures follow the driver's modes: a call that a capture forbids fails and invalidates it,
// and its end then returns CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.
#include <algorithm>

#include "fake_entries.hpp"
#include "fake_state.hpp"

namespace kjit_fake {
namespace {

struct Exec {
  uint64_t cost_ns = 0;
};

thread_local Stream t_per_thread;  // CU_STREAM_PER_THREAD of this thread

bool event_ok(CUevent e) {
  return e && reinterpret_cast<Event*>(e)->magic == kMagicEvent;
}

Event& event_of(CUevent e) {
  return *reinterpret_cast<Event*>(e);
}

// Ends s's capture (its caller holds capture_mu); returns whether one was under way.
bool stop_capture(Stream& s) {
  auto& list = state().capturing;
  const auto it = std::find(list.begin(), list.end(), &s);
  if (it == list.end()) return false;
  list.erase(it);
  s.capturing = false;
  return true;
}

}  // namespace

Stream* stream_of(CUstream s) {
  if (s == nullptr || s == CU_STREAM_LEGACY) return &state().legacy;
  if (s == CU_STREAM_PER_THREAD) return &t_per_thread;
  auto* st = reinterpret_cast<Stream*>(s);
  return st->magic == kMagicStream ? st : nullptr;
}

bool capture_forbids() {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.capture_mu);
  bool forbidden = false;
  for (Stream* s : st.capturing) {
    std::lock_guard<std::mutex> slock(s->mu);
    const bool own = s->capturer == std::this_thread::get_id();
    if (s->mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
        (own && s->mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)) {
      s->invalidated = true;
      forbidden = true;
    }
  }
  return forbidden;
}

bool capture_node(Stream& s, const Node& n) {
  if (s.capturing.load()) {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.capturing.load()) {
      s.captured.push_back(n);
      return true;
    }
  }
  s.clock_ns.fetch_add(n.cost_ns, std::memory_order_relaxed);
  return false;
}

CUresult cuStreamCreate(CUstream* s, unsigned) {
  if (current() != primary()) return CUDA_ERROR_INVALID_CONTEXT;
  *s = reinterpret_cast<CUstream>(new Stream);
  return CUDA_SUCCESS;
}
CUresult cuStreamDestroy(CUstream s) {
  Stream* st = stream_of(s);
  if (!st || st->legacy || st == &t_per_thread) return CUDA_ERROR_INVALID_HANDLE;
  {
    std::lock_guard<std::mutex> lock(state().capture_mu);
    stop_capture(*st);
  }
  st->magic = 0;
  delete st;
  return CUDA_SUCCESS;
}
CUresult cuStreamSynchronize(CUstream s) {
  Stream* st = stream_of(s);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  if (st->capturing.load()) {
    std::lock_guard<std::mutex> lock(st->mu);
    st->invalidated = true;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (st->legacy && capture_forbids()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return CUDA_SUCCESS;
}
CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* out) {
  Stream* st = stream_of(s);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  *out = CU_STREAM_CAPTURE_STATUS_NONE;
  if (st->capturing.load()) {
    std::lock_guard<std::mutex> lock(st->mu);
    *out = st->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  }
  return CUDA_SUCCESS;
}
CUresult cuStreamGetCtx(CUstream s, CUcontext* c) {
  if (!stream_of(s)) return CUDA_ERROR_INVALID_HANDLE;
  *c = primary();
  return CUDA_SUCCESS;
}
CUresult cuStreamBeginCapture(CUstream s, CUstreamCaptureMode mode) {
  Stream* st = stream_of(s);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  if (st->legacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  std::lock_guard<std::mutex> lock(state().capture_mu);
  if (st->capturing.load()) return CUDA_ERROR_ILLEGAL_STATE;
  {
    std::lock_guard<std::mutex> slock(st->mu);
    st->mode = mode;
    st->capturer = std::this_thread::get_id();
    st->invalidated = false;
    st->captured.clear();
    st->capturing = true;
  }
  state().capturing.push_back(st);
  return CUDA_SUCCESS;
}
CUresult cuStreamEndCapture(CUstream s, CUgraph* g) {
  Stream* st = stream_of(s);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  {
    std::lock_guard<std::mutex> lock(state().capture_mu);
    if (!stop_capture(*st)) return CUDA_ERROR_ILLEGAL_STATE;
  }
  std::lock_guard<std::mutex> lock(st->mu);
  *g = nullptr;
  if (st->invalidated) {
    st->captured.clear();
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  auto graph = std::make_unique<Graph>();
  for (const Node& n : st->captured) {
    graph->nodes.push_back(std::make_unique<Node>(n));
    graph->cost_ns += n.cost_ns;
  }
  st->captured.clear();
  *g = reinterpret_cast<CUgraph>(graph.release());
  return CUDA_SUCCESS;
}
CUresult cuGraphInstantiateWithFlags(CUgraphExec* e, CUgraph g, unsigned long long) {
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  *e = reinterpret_cast<CUgraphExec>(new Exec{reinterpret_cast<Graph*>(g)->cost_ns});
  return CUDA_SUCCESS;
}
CUresult cuGraphLaunch(CUgraphExec e, CUstream s) {
  Stream* st = stream_of(s);
  if (!e || !st) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t cost = reinterpret_cast<Exec*>(e)->cost_ns;
  if (!capture_node(*st, Node{CU_GRAPH_NODE_TYPE_GRAPH, nullptr, cost}))
    state().graph_launches.fetch_add(1);
  return CUDA_SUCCESS;
}
CUresult cuGraphDestroy(CUgraph g) {
  delete reinterpret_cast<Graph*>(g);
  return CUDA_SUCCESS;
}
CUresult cuGraphExecDestroy(CUgraphExec e) {
  delete reinterpret_cast<Exec*>(e);
  return CUDA_SUCCESS;
}
CUresult cuGraphGetNodes(CUgraph g, CUgraphNode* nodes, size_t* n) {
  if (!g || !n) return CUDA_ERROR_INVALID_VALUE;
  const Graph& graph = *reinterpret_cast<Graph*>(g);
  if (nodes)
    for (size_t i = 0; i < *n && i < graph.nodes.size(); ++i)
      nodes[i] = reinterpret_cast<CUgraphNode>(graph.nodes[i].get());
  *n = graph.nodes.size();
  return CUDA_SUCCESS;
}
CUresult cuGraphNodeGetType(CUgraphNode n, CUgraphNodeType* t) {
  *t = reinterpret_cast<Node*>(n)->type;
  return CUDA_SUCCESS;
}
CUresult cuGraphKernelNodeGetParams(CUgraphNode n, CUDA_KERNEL_NODE_PARAMS_v2* p) {
  const Node& node = *reinterpret_cast<Node*>(n);
  if (node.type != CU_GRAPH_NODE_TYPE_KERNEL) return CUDA_ERROR_INVALID_VALUE;
  *p = CUDA_KERNEL_NODE_PARAMS_v2{};
  p->func = node.fn;
  return CUDA_SUCCESS;
}
CUresult cuEventCreate(CUevent* e, unsigned) {
  if (current() != primary()) return CUDA_ERROR_INVALID_CONTEXT;
  *e = reinterpret_cast<CUevent>(new Event);
  return CUDA_SUCCESS;
}
CUresult cuEventRecord(CUevent e, CUstream s) {
  Stream* st = stream_of(s);
  if (!event_ok(e) || !st) return CUDA_ERROR_INVALID_HANDLE;
  if (st->capturing.load()) return CUDA_SUCCESS;  // a marker in the capture: nothing recorded now
  event_of(e).at_ns = st->clock_ns.load();
  event_of(e).recorded = true;
  return CUDA_SUCCESS;
}
CUresult cuEventSynchronize(CUevent e) {
  if (!event_ok(e)) return CUDA_ERROR_INVALID_HANDLE;
  return capture_forbids() ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}
CUresult cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
  if (!event_ok(a) || !event_ok(b)) return CUDA_ERROR_INVALID_HANDLE;
  if (!event_of(a).recorded || !event_of(b).recorded) return CUDA_ERROR_INVALID_HANDLE;
  const double ns =
      static_cast<double>(event_of(b).at_ns.load()) - static_cast<double>(event_of(a).at_ns.load());
  *ms = static_cast<float>(ns / 1e6);
  return CUDA_SUCCESS;
}
CUresult cuEventDestroy(CUevent e) {
  if (!event_ok(e)) return CUDA_ERROR_INVALID_HANDLE;
  event_of(e).magic = 0;
  delete &event_of(e);
  return CUDA_SUCCESS;
}

}  // namespace kjit_fake
