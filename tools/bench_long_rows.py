"""LayerNorm / RMSNorm on shapes bench.py does not list (e.g. few very long rows): kjit's
heuristic config against PyTorch eager, torch.compile and F.silu(x), with bench.py's own method
(bench_row_norm: a float64 check first, then CUDA-graph replays interleaved with the peers).

  python3 tools/bench_long_rows.py 1x1048576,4x1048576 [layer_norm,rms_norm] [f32,bf16,f16]

LIB: the libkjit_c.so to load (build/runtime/libkjit_c.so); REPLAYS: graph replays (20)."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
from bench import Kjit, bench_row_norm  # noqa: E402


def parse_args(argv):
    """(shapes as (rows, width) ints, ops, dtypes, replays); SystemExit naming a bad value."""
    if not 2 <= len(argv) <= 4:
        sys.exit(__doc__)
    shapes = []
    for s in argv[1].split(","):
        parts = s.split("x")
        if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
            sys.exit(f"bench_long_rows: shape '{s}' is not ROWSxWIDTH with positive integers")
        shapes.append((int(parts[0]), int(parts[1])))
    ops = argv[2].split(",") if len(argv) > 2 else ["layer_norm", "rms_norm"]
    dts = argv[3].split(",") if len(argv) > 3 else ["f32", "bf16"]
    for name, got, allowed in (("op", ops, ("layer_norm", "rms_norm")),
                               ("dtype", dts, ("f32", "bf16", "f16"))):
        for g in got:
            if g not in allowed:
                sys.exit(f"bench_long_rows: {name} '{g}' is not one of {', '.join(allowed)}")
    reps = os.environ.get("REPLAYS", "20")
    if not reps.isdigit() or int(reps) < 1:
        sys.exit(f"bench_long_rows: REPLAYS='{reps}' must be a positive integer")
    return shapes, ops, dts, int(reps)


def main():
    shapes, ops, dts, reps = parse_args(sys.argv)
    kj = Kjit(os.path.abspath(os.environ.get("LIB", "build/runtime/libkjit_c.so")))
    for op in ops:
        for dt in dts:
            for r, w in shapes:
                t0 = time.time()
                row = bench_row_norm(kj, {"op": op, "shape": [r, w], "dtype": dt}, reps)
                f = lambda k: f"{row.get(k, float('nan')):8.2f}"  # noqa: E731
                print(f"{op:10s} {dt:4s} {r:>5d}x{w:<8d} kjit {f('kjit_torch_graph_us')} "
                      f"rot {f('kjit_torch_graph_rotated_y_us')} eager {f('eager_us')} "
                      f"compile {f('compile_us')} silu {f('silu_only_us')} "
                      f"ok={row['kjit_correct']} ({time.time() - t0:.0f}s)", flush=True)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
