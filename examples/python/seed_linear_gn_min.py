#!/usr/bin/env python3
"""Seed 2 on kjit: Linear -> GroupNorm -> min -> + bias (docs/ARCHITECTURE.md, "The seed
workloads"), in_features = out_features = 8192, 512 groups, batch 1024, fp32.

Model is the PyTorch module kjit was founded on, verbatim in behaviour; KjitModel has the same
parameters and runs its forward with one kjit.linear_gn_min call (cuBLASLt strict-FP32 GEMM, then
one kernel for GroupNorm, min and the broadcast bias). The script checks the two (allclose 1e-4,
fp32, TF32 off as PyTorch's default for matmuls) and times eager, torch.compile, kjit and kjit
inside torch.compile on the same GPU.

    python3 examples/python/seed_linear_gn_min.py [--batch 1024 --in 8192 --out 8192 --groups 512]
"""

import argparse
import json
import os
import sys

import torch
import torch.nn as nn

import kjit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import check_and_time  # noqa: E402


class Model(nn.Module):
    """The PyTorch module kjit replaces."""

    def __init__(self, in_features, out_features, num_groups, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.gemm(x)
        x = self.group_norm(x)
        x = torch.min(x, dim=1, keepdim=True)[0]
        return x + self.bias


class KjitModel(nn.Module):
    """The same forward on kjit, sharing the module's parameters."""

    def __init__(self, m: Model):
        super().__init__()
        self.m = m

    def forward(self, x):
        m = self.m
        return kjit.linear_gn_min(x, m.gemm.weight, m.gemm.bias, m.group_norm.weight,
                                  m.group_norm.bias, m.bias, m.group_norm.num_groups,
                                  m.group_norm.eps)


def run(batch=1024, in_features=8192, out_features=8192, groups=512, seed=0, time_it=True):
    torch.backends.cuda.matmul.allow_tf32 = False  # strict FP32, as kjit's default precision
    torch.manual_seed(seed)
    ref = Model(in_features, out_features, groups, (1, out_features, 1, 1)).cuda().eval()
    with torch.no_grad():
        ref.group_norm.weight.normal_(1.0, 0.5)
        ref.group_norm.bias.normal_(0.0, 0.5)
    ours = KjitModel(ref)
    x = torch.randn(batch, in_features, device="cuda")
    row = {"batch": batch, "in_features": in_features, "out_features": out_features,
           "groups": groups}
    # A call takes milliseconds: fewer calls per graph and per host batch.
    row.update(check_and_time(ref, ours, x, time_it, k=5, replays=10, batch=20, batches=5))
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--in", dest="in_features", type=int, default=8192)
    ap.add_argument("--out", dest="out_features", type=int, default=8192)
    ap.add_argument("--groups", type=int, default=512)
    a = ap.parse_args()
    row = run(a.batch, a.in_features, a.out_features, a.groups)
    print(json.dumps(row, indent=1))
    return 0 if row["allclose_1e-4"] and row["compiled_allclose_1e-4"] else 1


if __name__ == "__main__":
    sys.exit(main())
