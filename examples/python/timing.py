"""Timing for the examples, one method for every contender (kjit, eager, torch.compile): device
time from a CUDA graph of k back-to-back calls (events around each replay, median, divided by k),
and host time per Python call (median of batches, the GPU kept busy by nothing but the calls)."""

import statistics
import time

import torch


def graph_time_us(fn, k=20, replays=20):
    """fn() enqueues one call on the current stream. Median device us per call."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):  # warm-up outside the graph: plans, compiles, allocations
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        for _ in range(k):
            fn()
    g.replay()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = []
    for _ in range(replays):
        start.record()
        g.replay()
        stop.record()
        stop.synchronize()
        t.append(start.elapsed_time(stop) * 1000.0 / k)
    del g
    return statistics.median(t)


def host_us(fn, batch=200, batches=11):
    """Median host us per call of fn() (no synchronization inside a batch)."""
    for _ in range(10):
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
