"""What the seed examples share: the check of a kjit module against the PyTorch module it
replaces, and the timing of both (tools/torch_timing.py: the method of tools/bench.py)."""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from torch_timing import graph_time_us, host_us  # noqa: E402,F401


def check_and_time(ref, ours, x, time_it=True, k=20, replays=20, batch=100, batches=11):
    """ours(x) and, compiled with fullgraph (kjit's custom ops: no graph break), against ref(x):
    allclose(1e-4) and the largest difference; then, with time_it, device and host us per call
    of eager, torch.compile, kjit and kjit inside torch.compile."""
    compiled = torch.compile(ref)
    compiled_ours = torch.compile(ours, fullgraph=True)
    with torch.no_grad():
        want = ref(x)
        got = ours(x)
        got_compiled = compiled_ours(x)
        torch.cuda.synchronize()

        def close(a):
            return a.shape == want.shape and torch.allclose(a, want, atol=1e-4, rtol=1e-4)

        row = {
            "shape": list(got.shape), "want_shape": list(want.shape),
            "max_abs_err": (got - want).abs().max().item() if got.shape == want.shape else None,
            "allclose_1e-4": close(got),
            "compiled_allclose_1e-4": close(got_compiled),
        }
        if time_it:
            for name, fn in (("eager", ref), ("torch_compile", compiled), ("kjit", ours),
                             ("kjit_in_torch_compile", compiled_ours)):
                row[name + "_device_us"] = graph_time_us(lambda i: fn(x), k, replays)
                row[name + "_host_us"] = host_us(lambda: fn(x), batch, batches)
    return row
