"""Shared fixtures: the GPU tests run only where a CUDA device and PyTorch are usable, and say
so when they skip (pytest -rs lists the reason)."""

import pytest

import kjit


def _torch_cuda():
    try:
        import torch
    except ImportError:
        return None, "PyTorch is not installed"
    ok, why = kjit.gpu_status()
    if not ok:
        return None, "no GPU: " + why
    if not torch.cuda.is_available():
        return None, "torch.cuda is not available"
    return torch, ""


@pytest.fixture(scope="session")
def torch_cuda():
    torch, why = _torch_cuda()
    if torch is None:
        pytest.skip(why)
    return torch
