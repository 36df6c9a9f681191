#!/usr/bin/env python3
"""How much a row norm's device time depends on where its operands lie and on what else the
process times, through kjit's C ABI as tools/bench.py calls it.

At one row of 65536 the same LayerNorm kernel, in the same kind of graph, has measured anywhere
between 2.25 and 2.90 us, and bench.py's kjit column runs 0.2-0.4 us above kjit-bench's on those
rows. This probe times one LayerNorm or RMSNorm problem over rotating operand sets (together
larger than the L2, as bench.py's) laid out in several ways:

  bench         x rotated, weight and bias fixed, y allocated in the call (bench.py's kjit column)
  xy_rotated    x and y rotated, weight and bias fixed
  all_separate  x, weight, bias and y all rotated, each from its own list of buffers
  all_per_set   the same, allocated set by set (x, w, b, y in turn, as kjit-bench allocates them)
  x_fixed       one x, weight, bias; y allocated in the call (the data stays in L2)

then F.silu(x) over the rotated x and over the fixed one (bench.py's floor). Each variant is
timed alone (its own graph_times_us), then all of them interleaved, one replay of each per
round, as bench.py times its contenders. Prints the times (us per call) and writes them as JSON.

    python3 tools/placement_probe.py --build build --op layer_norm --dtype f32 --width 65536
"""

import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import DTYPES, ROTATE_BYTES, Kjit  # noqa: E402
from torch_timing import graph_times_us  # noqa: E402


def operands(op, rows, width, tdt):
    """x, weight, bias (None for RMSNorm) as bench.py makes them."""
    torch.manual_seed(0)
    x = torch.randn(rows, width, device="cuda").mul_(2).add_(1).to(tdt)
    w = torch.randn(width, device="cuda").mul_(0.5).add_(1).to(tdt)
    b = torch.randn(width, device="cuda").mul_(0.5).to(tdt) if op == "layer_norm" else None
    return x, w, b


def variants(kj, op, dt, x0, w0, b0, n):
    """name -> fn(i) enqueuing call i, each over its own buffers laid out as the name says."""
    clone = (lambda t: t.clone() if t is not None else None)
    xs = [x0.clone() for _ in range(n)]
    ys = [torch.empty_like(x0) for _ in range(n)]
    ws, bs = [clone(w0) for _ in range(n)], [clone(b0) for _ in range(n)]
    per_set = [(x0.clone(), clone(w0), clone(b0), torch.empty_like(x0)) for _ in range(n)]

    def call(x, w, b, y):
        kj.layer_norm(op, dt, x, w, b, y)

    return {
        "bench": lambda i: call(xs[i % n], w0, b0, torch.empty_like(x0)),
        "xy_rotated": lambda i: call(xs[i % n], w0, b0, ys[i % n]),
        "all_separate": lambda i: call(xs[i % n], ws[i % n], bs[i % n], ys[i % n]),
        "all_per_set": lambda i: call(*per_set[i % n]),
        "x_fixed": lambda i: call(x0, w0, b0, torch.empty_like(x0)),
        "silu_rotated": lambda i: F.silu(xs[i % n]),
        "silu_fixed": lambda i: F.silu(x0),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--op", choices=["layer_norm", "rms_norm"], default="layer_norm")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="f32")
    ap.add_argument("--rows", type=int, default=1)
    ap.add_argument("--width", type=int, default=65536)
    ap.add_argument("--replays", type=int, default=30)
    ap.add_argument("--json", default="", help="write the results here")
    a = ap.parse_args()
    if a.rows < 1 or a.width < 1 or a.replays < 1:
        ap.error("--rows, --width and --replays must be >= 1")
    if not torch.cuda.is_available():
        print("placement_probe: no CUDA device: nothing to measure")
        return 0

    lib = os.path.join(a.build, "runtime", "libkjit_c.so")
    if not os.path.isfile(lib):
        ap.error(f"--build {a.build!r}: no {lib} (build the tree first)")
    kj = Kjit(lib)
    x0, w0, b0 = operands(a.op, a.rows, a.width, DTYPES[a.dtype])
    n = max(2, -(-ROTATE_BYTES // (2 * x0.numel() * x0.element_size())))
    fns = variants(kj, a.op, a.dtype, x0, w0, b0, n)
    torch.cuda.synchronize()
    k = max(n, 20)
    alone = {name: graph_times_us({name: fn}, k, a.replays)[name] for name, fn in fns.items()}
    together = graph_times_us(fns, k, a.replays)

    print(f"{a.op} {a.dtype} {a.rows}x{a.width}, {n} sets, {k} calls per graph, us per call")
    print(f"{'variant':<14} {'alone':>8} {'interleaved':>12}")
    for name in fns:
        print(f"{name:<14} {alone[name]:>8.3f} {together[name]:>12.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"op": a.op, "dtype": a.dtype, "rows": a.rows, "width": a.width,
                       "sets": n, "calls_per_graph": k, "alone_us": alone,
                       "interleaved_us": together}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
