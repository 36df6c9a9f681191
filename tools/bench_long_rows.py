"""LayerNorm / RMSNorm on shapes bench.py does not list (e.g. few very long rows): kjit's
heuristic config against PyTorch eager, torch.compile and F.silu(x), with bench.py's own method
(bench_row_norm: a float64 check first, then CUDA-graph replays interleaved with the peers).

  python3 tools/bench_long_rows.py 1x1048576,4x1048576 [layer_norm,rms_norm] [f32,bf16]

LIB: the libkjit_c.so to load (build/runtime/libkjit_c.so); REPLAYS: graph replays (20)."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
from bench import Kjit, bench_row_norm  # noqa: E402


def main():
    kj = Kjit(os.path.abspath(os.environ.get("LIB", "build/runtime/libkjit_c.so")))
    shapes = [s.split("x") for s in sys.argv[1].split(",")]
    ops = sys.argv[2].split(",") if len(sys.argv) > 2 else ["layer_norm", "rms_norm"]
    dts = sys.argv[3].split(",") if len(sys.argv) > 3 else ["f32", "bf16"]
    reps = int(os.environ.get("REPLAYS", "20"))
    for op in ops:
        for dt in dts:
            for r, w in shapes:
                t0 = time.time()
                row = bench_row_norm(kj, {"op": op, "shape": [int(r), int(w)], "dtype": dt}, reps)
                f = lambda k: f"{row.get(k, float('nan')):8.2f}"
                print(f"{op:10s} {dt:4s} {r:>5s}x{w:<8s} kjit {f('kjit_torch_graph_us')} rot {f('kjit_torch_graph_rotated_y_us')} "
                      f"eager {f('eager_us')} compile {f('compile_us')} silu {f('silu_only_us')} ok={row['kjit_correct']} ({time.time()-t0:.0f}s)", flush=True)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
