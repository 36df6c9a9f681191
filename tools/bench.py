#!/usr/bin/env python3
"""kjit vs PyTorch eager vs torch.compile, same shapes, same GPU, same method.

Runs on a machine with a GPU and PyTorch. One command:

    python3 tools/bench.py --build build --out results/   # table on stdout, JSON + markdown + plot

1. runs build/tools/kjit-bench --json (kjit's device time, host overhead, its own float64 check,
   copy bandwidth measured in the same run);
2. loads kjit's C ABI (libkjit_c.so) and, for every shape, checks kjit's output against a float64
   PyTorch reference *before* timing anything (a wrong fast kernel is a failure, not a result);
3. times PyTorch eager and torch.compile (static shapes) the way kjit-bench times kjit: a CUDA
   graph of K back-to-back calls over rotating inputs larger than the L2, events around each
   replay, median over replays, divided by K; also each one's host time per call.
"""
import argparse
import ctypes
import json
import math
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from torch_timing import graph_time_us, graph_times_us, host_us

# One compiled function per shape: never fall back to eager because of the recompile limit.
torch._dynamo.config.recompile_limit = 10_000
torch._dynamo.config.cache_size_limit = 10_000

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
ROTATE_BYTES = 160 << 20  # > 2x the 60 MB L2 of an H200


def rel_l2(out, ref):
    out, ref = out.double(), ref.double()
    if not torch.isfinite(out).all():
        return math.inf
    return ((out - ref).norm() / ref.norm().clamp_min(1e-300)).item()


class Kjit:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.kjit_last_error.restype = ctypes.c_char_p
        self.lib.kjit_group_norm.argtypes = [
            ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
            ctypes.c_int64, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_float, ctypes.c_void_p, ctypes.c_int,
            ctypes.c_char_p]
        self.lib.kjit_group_norm_prepare.argtypes = [
            ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
            ctypes.c_int64, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_char_p,
            ctypes.c_char_p, ctypes.c_int64]

        self.lib.kjit_layer_norm.argtypes = [
            ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64,
            ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_float, ctypes.c_void_p, ctypes.c_int,
            ctypes.c_char_p]

        self.lib.kjit_linear_gn_min.argtypes = [
            ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_float, ctypes.c_void_p, ctypes.c_int,
            ctypes.c_char_p]
        self.lib.kjit_linear_gn_min_prepack.argtypes = [
            ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_void_p)]
        self.lib.kjit_linear_gn_min_pack_free.argtypes = [ctypes.c_void_p]
        self.lib.kjit_linear_gn_min_packed.argtypes = [
            ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_float, ctypes.c_void_p, ctypes.c_int,
            ctypes.c_char_p]

    def linear_gn_min(self, precision, x, lin, gn, bias, out, pack=None):
        """pack: a weight from prepack (split precision), used instead of lin.weight."""
        m, k = x.shape
        n = lin.weight.shape[0]
        stream = torch.cuda.current_stream().cuda_stream
        if pack is not None:
            self.check(self.lib.kjit_linear_gn_min_packed(
                precision.encode(), m, k, n, gn.num_groups, x.data_ptr(), pack,
                lin.bias.data_ptr(), gn.weight.data_ptr(), gn.bias.data_ptr(), bias.data_ptr(),
                out.data_ptr(), gn.eps, stream, 0, None))
            return
        self.check(self.lib.kjit_linear_gn_min(
            precision.encode(), m, k, n, gn.num_groups, x.data_ptr(), lin.weight.data_ptr(),
            lin.bias.data_ptr(), gn.weight.data_ptr(), gn.bias.data_ptr(), bias.data_ptr(),
            out.data_ptr(), gn.eps, stream, 0, None))

    def prepack(self, precision, weight):
        """The weight packed once for `precision` (kjit_linear_gn_min_prepack); free with
        pack_free once no queued call uses it."""
        n, k = weight.shape
        pack = ctypes.c_void_p()
        self.check(self.lib.kjit_linear_gn_min_prepack(
            precision.encode(), n, k, weight.data_ptr(), torch.cuda.current_stream().cuda_stream,
            ctypes.byref(pack)))
        return pack

    def pack_free(self, pack):
        self.check(self.lib.kjit_linear_gn_min_pack_free(pack))

    def check(self, rc):
        if rc != 0:
            raise RuntimeError("kjit: " + self.lib.kjit_last_error().decode())

    def layer_norm(self, kind, dtype, x, w, b, y, eps=1e-5):
        rows, width = x.shape
        stream = torch.cuda.current_stream().cuda_stream
        self.check(self.lib.kjit_layer_norm(
            kind.encode(), dtype.encode(), None, rows, width, 0, x.data_ptr(), None,
            y.data_ptr(), None, w.data_ptr(), b.data_ptr() if b is not None else None, eps,
            stream, 0, None))

    def group_norm(self, dtype, x, groups, w, b, y, eps=1e-5):
        n, c = x.shape[0], x.shape[1]
        s = x.numel() // max(1, n * c)
        stream = torch.cuda.current_stream().cuda_stream
        self.check(self.lib.kjit_group_norm(
            dtype.encode(), b"nchw", n, c, s, groups, 1, x.data_ptr(), y.data_ptr(),
            w.data_ptr(), b.data_ptr(), eps, stream, 0, None))


def time_peers(row, x0, kjit_call, eager, compiled, replays):
    """Device time of kjit through its C ABI (kjit_call(x, y)), eager, torch.compile and the
    elementwise floor F.silu(x) over rotating copies of x0 (together larger than the L2), and the
    peers' host time per call, into row. Returns (xs, ys, nsets, k) for further timings."""
    nbytes = x0.numel() * x0.element_size()
    nsets = max(2, -(-ROTATE_BYTES // (2 * nbytes)))
    k = max(nsets, 20)
    xs = [x0.clone() for _ in range(nsets)]
    ys = [torch.empty_like(x0) for _ in range(nsets)]
    # kjit writes where the peers do: an output allocated in the call. Inside a graph the caching
    # allocator hands every call the block the last one freed, so the L2 absorbs part of each
    # call's writes (up to 1.5 us on 16 MB outputs). Outputs rotated with the inputs are timed too.
    times = graph_times_us({
        "kjit_torch_graph_us": lambda i: kjit_call(xs[i % nsets], torch.empty_like(x0)),
        "kjit_torch_graph_rotated_y_us": lambda i: kjit_call(xs[i % nsets], ys[i % nsets]),
        "eager_us": lambda i: eager(xs[i % nsets]),
        "compile_us": lambda i: compiled(xs[i % nsets]),
        "silu_only_us": lambda i: F.silu(xs[i % nsets]),
    }, k, replays)
    row.update(times)
    row["eager_host_us"] = host_us(lambda: eager(x0))
    row["compile_host_us"] = host_us(lambda: compiled(x0))
    return xs, ys, nsets, k


def bench_group_norm(kj, case, replays):
    shape, groups, dt = case["shape"], case["groups"], case["dtype"]
    tdt = DTYPES[dt]
    torch.manual_seed(0)
    x0 = torch.randn(shape, device="cuda", dtype=torch.float32).mul_(2).add_(1).to(tdt)
    w = torch.randn(shape[1], device="cuda").mul_(0.5).add_(1).to(tdt)
    b = torch.randn(shape[1], device="cuda").mul_(0.5).to(tdt)
    ref = F.silu(F.group_norm(x0.double(), groups, w.double(), b.double(), 1e-5))
    tol = 1e-5 if dt == "f32" else 1e-2
    row = {"op": "group_norm", "dtype": dt,
           "shape": "x".join(map(str, shape)) + f"/G{groups}"}

    def eager(x):
        return F.silu(F.group_norm(x, groups, w, b, 1e-5))

    torch._dynamo.reset()
    compiled = torch.compile(eager, dynamic=False)
    # Correct first: kjit, eager and compile against the float64 reference.
    y = torch.full_like(x0, float("nan"))
    kj.group_norm(dt, x0, groups, w, b, y)
    torch.cuda.synchronize()
    row["kjit_rel_l2"] = rel_l2(y, ref)
    row["kjit_allclose_1e-4"] = bool(torch.allclose(y.double(), ref, atol=1e-4, rtol=1e-4))
    row["kjit_correct"] = row["kjit_rel_l2"] <= tol
    row["eager_rel_l2"] = rel_l2(eager(x0), ref)
    row["compile_rel_l2"] = rel_l2(compiled(x0), ref)
    del ref
    if not row["kjit_correct"]:
        return row

    xs, ys, nsets, k = time_peers(
        row, x0, lambda x, y: kj.group_norm(dt, x, groups, w, b, y), eager, compiled, replays)
    row["torch_copy_us"] = graph_time_us(lambda i: ys[i % nsets].copy_(xs[i % nsets]), k, replays)
    return row


ROW_NORMS = ("layer_norm", "rms_norm")


def bench_row_norm(kj, case, replays):
    """F.layer_norm(x, [width], w, b) or F.rms_norm(x, [width], w) on x [rows, width]."""
    op, (rows, width), dt = case["op"], case["shape"], case["dtype"]
    tdt = DTYPES[dt]
    torch.manual_seed(0)
    x0 = torch.randn(rows, width, device="cuda").mul_(2).add_(1).to(tdt)
    w = torch.randn(width, device="cuda").mul_(0.5).add_(1).to(tdt)
    b = torch.randn(width, device="cuda").mul_(0.5).to(tdt) if op == "layer_norm" else None
    eps = 1e-5
    row = {"op": op, "dtype": dt, "shape": f"{rows}x{width}"}

    if op == "layer_norm":
        def eager(x):
            return F.layer_norm(x, (width,), w, b, eps)
        ref = F.layer_norm(x0.double(), (width,), w.double(), b.double(), eps)
    else:
        def eager(x):
            return F.rms_norm(x, (width,), w, eps)
        ref = F.rms_norm(x0.double(), (width,), w.double(), eps)

    torch._dynamo.reset()
    compiled = torch.compile(eager, dynamic=False)
    # Correct first: kjit against the float64 reference, before anything is timed.
    y = torch.full_like(x0, float("nan"))
    kj.layer_norm(op, dt, x0, w, b, y, eps)
    torch.cuda.synchronize()
    tol = 1e-4 if dt == "f32" else 1e-2
    row["kjit_rel_l2"] = rel_l2(y, ref)
    row["kjit_allclose"] = bool(torch.allclose(y.double(), ref, atol=tol, rtol=tol))
    row["kjit_correct"] = row["kjit_allclose"] and row["kjit_rel_l2"] <= (1e-5 if dt == "f32" else 1e-2)
    row["eager_rel_l2"] = rel_l2(eager(x0), ref)
    row["compile_rel_l2"] = rel_l2(compiled(x0), ref)
    del ref
    if not row["kjit_correct"]:
        return row

    xs, _, nsets, k = time_peers(row, x0, lambda x, y_: kj.layer_norm(op, dt, x, w, b, y_, eps),
                                 eager, compiled, replays)
    # A second floor: the elementwise op that also reads the parameters (x * w + b, or x * w),
    # which for few rows are as large as x itself.
    if op == "layer_norm":
        row["affine_only_us"] = graph_time_us(lambda i: torch.addcmul(b, xs[i % nsets], w), k,
                                              replays)
    else:
        row["affine_only_us"] = graph_time_us(lambda i: xs[i % nsets] * w, k, replays)
    row["kjit_c_host_us"] = host_us(lambda: kj.layer_norm(op, dt, x0, w, b, y, eps))
    return row


def rn_table(kb, peers):
    """The row norms against the elementwise floor F.silu(x) and PyTorch, with the targets.

    kjit's device time is the one measured the way the peers are (through the C ABI inside a
    torch CUDA graph, x rotated, the same weight and bias every call, the output allocated in the
    call as the peers' are); beside it kjit writing into outputs rotated with x, and kjit-bench's
    own, which rotates every operand."""
    by_key = {(r["op"], r["shape"], r["dtype"]): r for r in kb.get("results", [])}
    lines = ["| op | rows x width | dtype | kjit us | kjit us, y rotated | kjit-bench us | "
             "F.silu floor us | kjit / floor | x*w(+b) us | eager us | compile us | kjit host us | "
             "eager host us | config | check | targets |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    met = 0
    for p in peers:
        k = by_key.get((p["op"], p["shape"], p["dtype"]), {})
        nan = float("nan")
        kus, floor = p.get("kjit_torch_graph_us", nan), p.get("silu_only_us", nan)
        eager, comp, host = p.get("eager_us", nan), p.get("compile_us", nan), k.get("host_us", nan)
        ok = p.get("kjit_correct") and k.get("correct", False)
        # Targets: <= 1.15x the floor, faster than both peers, <= 5 us of host time per call.
        hit = ok and kus <= 1.15 * floor and kus < eager and kus < comp and host <= 5.0
        met += bool(hit)
        lines.append(
            f"| {p['op']} | {p['shape']} | {p['dtype']} | {kus:.2f} | "
            f"{p.get('kjit_torch_graph_rotated_y_us', nan):.2f} | {k.get('device_us', nan):.2f} | "
            f"{floor:.2f} | {kus / floor:.2f} | {p.get('affine_only_us', nan):.2f} | {eager:.2f} | "
            f"{comp:.2f} | {host:.2f} | {p.get('eager_host_us', nan):.1f} | {k.get('config', '')} | "
            f"{'ok (%.1e)' % p['kjit_rel_l2'] if ok else 'WRONG'} | {'met' if hit else 'MISSED'} |")
    lines.append(f"\nTargets met on {met} of {len(peers)} shapes (kjit <= 1.15x F.silu(x), faster "
                 "than eager and torch.compile, host <= 5 us per call).")
    return "\n".join(lines)


class Model(torch.nn.Module):
    """The seed module (docs/ARCHITECTURE.md, "The seed workloads"): Linear -> GroupNorm -> min over channels -> + bias."""

    def __init__(self, in_f, out_f, groups):
        super().__init__()
        self.gemm = torch.nn.Linear(in_f, out_f)
        self.group_norm = torch.nn.GroupNorm(groups, out_f)
        self.bias = torch.nn.Parameter(torch.randn(1, out_f, 1, 1))

    def forward(self, x):
        x = self.gemm(x)
        x = self.group_norm(x)
        x = torch.min(x, dim=1, keepdim=True)[0]
        return x + self.bias


def bench_linear_gn_min(kj, case, replays):
    """dtype fp32, tf32, fp32x3 (split precision, weight prepacked once) or fp32x3-percall (the
    weight split in every call). Split precision is held to strict FP32's allclose(1e-4) and
    compared with the FP32 peers: PyTorch has no such mode."""
    m, k, n = case["shape"]
    g, dtype = case["groups"], case["dtype"]
    precision = "fp32x3" if dtype.startswith("fp32x3") else dtype
    fp32_class = precision in ("fp32", "fp32x3")
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"  # peers in the same precision
    torch.manual_seed(0)
    model = Model(k, n, g).cuda()
    with torch.no_grad():  # GroupNorm's affine as trained models have it: not 1 and 0
        model.group_norm.weight.copy_(torch.randn(n) * 0.5 + 1)
        model.group_norm.bias.copy_(torch.randn(n) * 0.5)
    x = torch.randn(m, k, device="cuda")
    row = {"op": "linear_gn_min", "dtype": dtype, "shape": f"{m}x{k}x{n}/G{g}"}
    pack = kj.prepack(precision, model.gemm.weight) if dtype == "fp32x3" else None
    try:
        return lgm_measure(kj, row, model, x, precision, pack, fp32_class, replays)
    finally:
        torch.cuda.synchronize()
        if pack is not None:
            kj.pack_free(pack)
        torch.backends.cuda.matmul.allow_tf32 = False


def lgm_measure(kj, row, model, x, precision, pack, fp32_class, replays):
    m, n, g = x.shape[0], model.gemm.weight.shape[0], model.group_norm.num_groups
    with torch.no_grad():
        xd = x.double()
        y = torch.nn.functional.linear(xd, model.gemm.weight.double(), model.gemm.bias.double())
        y = torch.nn.functional.group_norm(y, g, model.group_norm.weight.double(),
                                           model.group_norm.bias.double(), model.group_norm.eps)
        ref = torch.min(y, dim=1, keepdim=True)[0] + model.bias.double()
        out = torch.full((1, n, m, 1), float("nan"), device="cuda")
        kj.linear_gn_min(precision, x, model.gemm, model.group_norm, model.bias, out, pack)
        torch.cuda.synchronize()
        eager_out = model(x)
        row["shape_matches_pytorch"] = list(out.shape) == list(eager_out.shape) == list(ref.shape)
        row["kjit_max_abs"] = (out.double() - ref).abs().max().item()
        row["kjit_rel_l2"] = rel_l2(out, ref)
        row["kjit_allclose_1e-4"] = bool(torch.allclose(out.double(), ref, atol=1e-4, rtol=1e-4))
        row["eager_max_abs"] = (eager_out.double() - ref).abs().max().item()
        row["kjit_correct"] = row["shape_matches_pytorch"] and (
            row["kjit_allclose_1e-4"] if fp32_class else row["kjit_max_abs"] < 5e-3)
        del y, xd, ref
        if not row["kjit_correct"]:
            return row
        compiled = torch.compile(model, dynamic=False)
        row["compile_max_abs"] = (compiled(x).double() - eager_out.double()).abs().max().item()
        kk = 5
        row.update(graph_times_us({
            "kjit_torch_graph_us": lambda i: kj.linear_gn_min(
                precision, x, model.gemm, model.group_norm, model.bias, out, pack),
            "eager_us": lambda i: model(x),
            "compile_us": lambda i: compiled(x),
            "gemm_alone_us": lambda i: model.gemm(x),
        }, kk, replays))
        row["eager_host_us"] = host_us(lambda: model(x), batch=5, batches=5)
    return row


def run_kjit_bench(build, replays, extra):
    out = os.path.join(build, "kjit-bench.json")
    cmd = [os.path.join(build, "tools", "kjit-bench"), "--json", out, "--replays", str(replays)] + extra
    print("+", " ".join(cmd), flush=True)
    if os.path.exists(out):
        os.remove(out)  # never report an earlier run's results as this one's
    rc = subprocess.run(cmd, check=False).returncode
    # 3: kjit-bench ran every case but found a WRONG one; still tabulate, and fail at the end.
    if rc not in (0, 3) or not os.path.exists(out):
        sys.exit(f"bench.py: kjit-bench failed (exit {rc}); no results")
    with open(out) as f:
        kb = json.load(f)
    kb["exit_code"] = rc
    return kb


def geomean(v):
    v = [x for x in v if x and x > 0]
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else float("nan")


def table(kb, peers):
    copy = kb["copy_gbps"]
    by_key = {(r["op"], r["shape"], r["dtype"]): r for r in kb.get("results", [])}
    lines = ["| op | shape | dtype | kjit us | eager us | compile us | speedup vs best peer | "
             "GB/s | % of copy | kjit host us | eager host us | check |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    speedups, floor_speedups = [], []
    for p in peers:
        k = by_key.get((p["op"], p["shape"], p["dtype"]), {})
        kus = k.get("device_us")
        best = min(p.get("eager_us", math.inf), p.get("compile_us", math.inf))
        sp = best / kus if kus and math.isfinite(best) else float("nan")
        if p.get("silu_only_us") and math.isfinite(best):
            floor_speedups.append(best / p["silu_only_us"])
        if p.get("kjit_correct") and k.get("correct", False):
            speedups.append(sp)
            check = f"ok ({p['kjit_rel_l2']:.1e})"
        else:
            check = "WRONG"
        lines.append(
            f"| {p['op']} | {p['shape']} | {p['dtype']} | {kus or float('nan'):.2f} | "
            f"{p.get('eager_us', float('nan')):.2f} | {p.get('compile_us', float('nan')):.2f} | "
            f"{sp:.2f}x | {k.get('gbps', float('nan')):.0f} | "
            f"{100 * k.get('gbps', float('nan')) / copy:.1f}% | {k.get('host_us', float('nan')):.2f} | "
            f"{p.get('eager_host_us', float('nan')):.1f} | {check} |")
    lines.append(f"\nGeometric-mean speedup over the faster peer: **{geomean(speedups):.2f}x** "
                 f"({len(speedups)} shapes). Copy bandwidth measured in the same run: {copy:.0f} GB/s.")
    # What no GroupNorm can beat by much: an op that takes as long as PyTorch's elementwise
    # F.silu(x) on the same tensor (one read, one write, no statistics).
    lines.append(f"If kjit took only the time of `F.silu(x)` on each shape, the geometric mean would "
                 f"be {geomean(floor_speedups):.2f}x ({len(floor_speedups)} shapes).")
    return "\n".join(lines)


def lgm_table(kb, peers):
    by_key = {(r["op"], r["shape"], r["dtype"]): r for r in kb.get("results", [])}
    lines = ["| op | M x K x N / G | precision | kjit us | eager us | compile us | PyTorch GEMM alone us | "
             "kjit / GEMM alone | speedup vs best peer | kjit TFLOP/s | kjit max abs err | check |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in peers:
        k = by_key.get((p["op"], p["shape"], p["dtype"]), {})
        kus = k.get("device_us", float("nan"))
        best = min(p.get("eager_us", math.inf), p.get("compile_us", math.inf))
        lines.append(
            f"| linear_gn_min | {p['shape']} | {p['dtype']} | {kus:.1f} | {p.get('eager_us', float('nan')):.1f} | "
            f"{p.get('compile_us', float('nan')):.1f} | {p.get('gemm_alone_us', float('nan')):.1f} | "
            f"{kus / p.get('gemm_alone_us', float('nan')):.3f} | {best / kus:.2f}x | "
            f"{k.get('tflops', float('nan')):.1f} | {p.get('kjit_max_abs', float('nan')):.1e} | "
            f"{'ok' if p.get('kjit_correct') else 'WRONG'} |")
    return "\n".join(lines)


def plot(kb, peers, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
        return
    copy = kb["copy_gbps"]
    by_key = {(r["op"], r["shape"], r["dtype"]): r for r in kb.get("results", [])}
    labels, kj, ea, co = [], [], [], []
    for p in peers:
        k = by_key.get((p["op"], p["shape"], p["dtype"]))
        if not k or "eager_us" not in p:
            continue
        nbytes = k["bytes"]
        pct = lambda us: 100.0 * nbytes / (us * 1e-6) / 1e9 / copy
        labels.append(f"{p['shape']} {p['dtype']}")
        kj.append(pct(k["device_us"]))
        ea.append(pct(p["eager_us"]))
        co.append(pct(p["compile_us"]))
    fig, ax = plt.subplots(figsize=(max(8, len(labels) * 0.6), 5))
    xs = range(len(labels))
    ax.bar([i - 0.27 for i in xs], kj, 0.27, label="kjit")
    ax.bar(list(xs), co, 0.27, label="torch.compile")
    ax.bar([i + 0.27 for i in xs], ea, 0.27, label="PyTorch eager")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("% of measured copy bandwidth (read x + write y)")
    ax.axhline(80, color="gray", linestyle="--", linewidth=0.8)
    ax.set_title(f"{kb['device']['name']}: GroupNorm+SiLU, % of {copy:.0f} GB/s copy bandwidth")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--replays", type=int, default=30)
    ap.add_argument("--only", default="", help="substring filter on 'shape dtype'")
    ap.add_argument("--kjit-args", default="", help="extra arguments for kjit-bench")
    ap.add_argument("--ops", default="",
                    help="only these ops, comma-separated (group_norm, linear_gn_min, layer_norm, "
                         "rms_norm); e.g. --ops layer_norm,rms_norm runs the row-norm shapes alone")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    extra = args.kjit_args.split()
    if args.ops:
        extra += ["--op", args.ops, "--skip-jit"]
    kb = run_kjit_bench(args.build, args.replays, extra)
    kj = Kjit(os.path.join(args.build, "runtime", "libkjit_c.so"))
    peers = []
    for r in kb.get("results", []):
        if args.only and args.only not in f"{r['op']} {r['shape']} {r['dtype']}":
            continue
        shape, _, g = r["shape"].partition("/G")
        case = {"op": r["op"], "shape": [int(v) for v in shape.split("x")],
                "groups": int(g) if g else 0, "dtype": r["dtype"]}
        t0 = time.time()
        if r["op"] in ROW_NORMS:
            row = bench_row_norm(kj, case, args.replays)
        elif r["op"] == "linear_gn_min":
            row = bench_linear_gn_min(kj, case, max(10, args.replays // 3))
        else:
            row = bench_group_norm(kj, case, args.replays)
        peers.append(row)
        print(json.dumps(row), f"({time.time() - t0:.0f}s)", flush=True)
        torch.cuda.empty_cache()
    if not peers:  # before anything is written over an earlier run's results
        sys.exit("bench.py: no case was measured (check --only and --kjit-args)")
    gn = [p for p in peers if p["op"] == "group_norm"]
    lgm = [p for p in peers if p["op"] == "linear_gn_min"]
    rn = [p for p in peers if p["op"] in ROW_NORMS]
    parts = ([table(kb, gn)] if gn else []) + ([lgm_table(kb, lgm)] if lgm else []) + \
        ([rn_table(kb, rn)] if rn else [])
    md = "\n\n".join(parts)
    env = (f"GPU {kb['device']['name']}, driver {kb['device']['driver']}, NVRTC {kb['device']['nvrtc']}, "
           f"PyTorch {torch.__version__} (CUDA {torch.version.cuda}), "
           f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    bare = kb.get("host_us_bare_launch", [])
    if bare:  # the driver's own host cost per launch in this run: host times drift run to run
        env += ", bare cuLaunchKernel host us (before / after the cases): " + \
            " / ".join(f"{b:.2f}" for b in bare)
    with open(os.path.join(args.out, "bench.md"), "w") as f:
        f.write(env + "\n\n" + md + "\n")
    with open(os.path.join(args.out, "bench.json"), "w") as f:
        json.dump({"kjit": kb, "peers": peers, "env": env}, f, indent=1)
    if gn:
        plot(kb, gn, os.path.join(args.out, "bench.png"))
    print(env)
    print(md)
    ok = all(p.get("kjit_correct") for p in peers) and kb["exit_code"] == 0
    sys.exit(0 if ok else 3)


if __name__ == "__main__":
    main()
