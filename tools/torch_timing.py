"""How kjit's Python benchmarks time a call, one method for every contender (kjit, PyTorch eager,
torch.compile): device time from a CUDA graph of k back-to-back calls (events around each replay,
median, divided by k), and host time per Python call (median of batches, nothing synchronized
inside a batch). Used by tools/bench.py and examples/python."""

import statistics
import time

import torch


def _capture(fn, k):
    """A CUDA graph of fn(0) ... fn(k - 1), warmed up outside it first."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(k):  # warm-up outside the graph (allocations, autotuning, loads)
            fn(i)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    # Capture on the warm-up stream: per-stream state made during warm-up (kjit's workspace)
    # is then already there, so nothing is allocated during capture.
    with torch.cuda.graph(g, stream=s):
        for i in range(k):
            fn(i)
    return g


def graph_times_us(fns, k=20, replays=20):
    """fns: {name: fn}, fn(i) enqueues call i on the current stream (i picks a rotating buffer,
    if any). Median device us per call of each. The contenders' replays are interleaved, one of
    each per round, so that whatever drifts during a run (clocks after an idle spell such as a
    torch.compile, other work on the GPU) falls on every contender alike rather than on the one
    timed first."""
    graphs = {name: _capture(fn, k) for name, fn in fns.items()}
    for _ in range(3):
        for g in graphs.values():
            g.replay()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    per_call = {name: [] for name in graphs}
    for _ in range(replays):
        for name, g in graphs.items():
            start.record()
            g.replay()
            stop.record()
            stop.synchronize()
            per_call[name].append(start.elapsed_time(stop) * 1000.0 / k)
    del graphs
    return {name: statistics.median(t) for name, t in per_call.items()}


def graph_time_us(fn, k=20, replays=20):
    """fn(i) enqueues call i on the current stream. Median device us per call."""
    return graph_times_us({"fn": fn}, k, replays)["fn"]


def host_us(fn, batch=100, batches=11):
    """Median host us per call of fn()."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t = []
    for _ in range(batches):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        t.append((time.perf_counter() - t0) * 1e6 / batch)
    torch.cuda.synchronize()
    return statistics.median(t)
