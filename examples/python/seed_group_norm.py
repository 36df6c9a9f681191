#!/usr/bin/env python3
"""Seed 1 on kjit: GroupNorm + SiLU (docs/ARCHITECTURE.md, "The seed workloads").

The PyTorch module below is what kjit's first workload was: GroupNorm(32, 256) then SiLU on
8x256x24x24 fp32 (its original built the fused op with torch.utils.cpp_extension.load_inline for
that one shape). KjitGroupNormSiLU has the same parameters and runs its forward with
kjit.group_norm, for any shape. This script checks the two against each other (allclose 1e-4,
fp32) and times eager, torch.compile, kjit, and kjit inside torch.compile, on the same GPU.

    python3 examples/python/seed_group_norm.py [--shape 8,256,24,24] [--groups 32]
"""

import argparse
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import kjit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import check_and_time  # noqa: E402


class GroupNormSiLU(nn.Module):
    """The PyTorch module kjit replaces."""

    def __init__(self, channels, groups, eps=1e-5):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels, eps=eps)

    def forward(self, x):
        return F.silu(self.norm(x))


class KjitGroupNormSiLU(nn.Module):
    """The same forward on kjit, with the same parameters (share them with from_torch)."""

    def __init__(self, norm: nn.GroupNorm):
        super().__init__()
        self.norm = norm

    @classmethod
    def from_torch(cls, m: GroupNormSiLU):
        return cls(m.norm)

    def forward(self, x):
        n = self.norm
        return kjit.group_norm(x, n.num_groups, n.weight, n.bias, n.eps, activation="silu")


def run(shape=(8, 256, 24, 24), groups=32, channels_last=False, seed=0, time_it=True):
    """Checks kjit against the module (fp32, allclose 1e-4) and times both; returns a dict."""
    torch.manual_seed(seed)
    ref = GroupNormSiLU(shape[1], groups).cuda().eval()
    with torch.no_grad():  # non-trivial affine parameters
        ref.norm.weight.normal_(1.0, 0.5)
        ref.norm.bias.normal_(0.0, 0.5)
    ours = KjitGroupNormSiLU.from_torch(ref)
    x = torch.randn(shape, device="cuda") * 2 + 0.5
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    row = {"groups": groups, "channels_last": channels_last}
    row.update(check_and_time(ref, ours, x, time_it))
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="8,256,24,24")
    ap.add_argument("--groups", type=int, default=32)
    ap.add_argument("--channels-last", action="store_true")
    a = ap.parse_args()
    row = run(tuple(int(s) for s in a.shape.split(",")), a.groups, a.channels_last)
    print(json.dumps(row, indent=1))
    return 0 if row["allclose_1e-4"] and row["compiled_allclose_1e-4"] else 1


if __name__ == "__main__":
    sys.exit(main())
