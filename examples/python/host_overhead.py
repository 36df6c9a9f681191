#!/usr/bin/env python3
"""Host time per Python call of kjit.group_norm against PyTorch eager, on a shape small enough
that the GPU never holds the loop back (the seed's 8x256x24x24 fp32: a few us of device time per
call), with a breakdown of where kjit's time goes. Prints a markdown table and JSON.

    python3 examples/python/host_overhead.py
"""

import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.utils.dlpack import to_dlpack

import kjit
from kjit import _kjit as native

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import host_us  # noqa: E402


def main():
    x = torch.randn(8, 256, 24, 24, device="cuda")
    w = torch.randn(256, device="cuda")
    b = torch.randn(256, device="cuda")
    y = torch.empty_like(x)
    dev = x.get_device()
    stream = torch.cuda.current_stream().cuda_stream
    raw = torch._C._cuda_getCurrentRawStream
    kjit.group_norm(x, 32, w, b)  # plan built, kernel loaded
    act = native.parse_activation("silu")
    rows = [
        ("kjit.group_norm(x, 32, w, b) (allocates y)", lambda: kjit.group_norm(x, 32, w, b)),
        ("kjit.group_norm(x, 32, w, b, out=y)", lambda: kjit.group_norm(x, 32, w, b, out=y)),
        ("torch.ops.kjit.group_norm (torch custom op)",
         lambda: torch.ops.kjit.group_norm(x, 32, w, b, 1e-5, "silu")),
        ("F.silu(F.group_norm(x, 32, w, b)) (eager)", lambda: F.silu(F.group_norm(x, 32, w, b))),
        ("F.group_norm(x, 32, w, b) (eager)", lambda: F.group_norm(x, 32, w, b)),
        ("  part: native call, 4 capsules (to_dlpack; what kjit.group_norm passes)",
         lambda: native.group_norm(to_dlpack(x), to_dlpack(y), to_dlpack(w), to_dlpack(b), 32,
                                   1e-5, act, False, stream)),
        ("  part: native call, 4 tensors (Tensor.__dlpack__ each)",
         lambda: native.group_norm(x, y, w, b, 32, 1e-5, act, False, stream)),
        ("  part: to_dlpack(x) (one capsule)", lambda: to_dlpack(x)),
        ("  part: torch.empty_like(x)", lambda: torch.empty_like(x)),
        ("  part: x.__dlpack__() (one DLPack export)", lambda: x.__dlpack__()),
        ("  part: current raw stream", lambda: raw(dev)),
        ("  part: x.data_ptr()", lambda: x.data_ptr()),
        ("  part: a Python call doing nothing", lambda: None),
    ]
    out = {}
    print("| call | host us per call |\n| --- | --- |")
    for name, fn in rows:
        out[name] = host_us(fn, batch=1000, batches=15)
        print("| %s | %.2f |" % (name, out[name]))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
