"""kjit for Python: run-time specialized CUDA C++ kernels on any DLPack tensor (PyTorch, CuPy, ...).

    import torch, kjit
    y = kjit.group_norm(x, 32, w, b, activation="silu")   # any shape, NCHW or channels_last

The ops (group_norm, linear_gn_min, layer_norm, rms_norm) and user kernels (kjit.kernel) go
through kjit's C++ runtime: NVRTC specialization on the real sizes, the verified disk cache,
launches on the caller's stream, CUDA-graph safety (kjit.prepare before capturing). With PyTorch,
kjit.torch registers the ops as torch custom ops for torch.compile. docs/PYTHON.md has the rest.
"""

from . import _kjit as _native
from ._errors import (ArgumentTypeError, CaptureCompileError, CompileError, CublasError,
                      CudaError, Error, InvalidArgumentError, IoError, NoDeviceError,
                      NoDriverError, NotFoundError, NvrtcError, UnsupportedError)
from ._kernels import Kernel, compile, kernel
from ._ops import group_norm, layer_norm, linear_gn_min, prepack_linear_gn_min, prepare, rms_norm
from ._tensors import _find_torch

# A weight split once for a precision (kjit.prepack_linear_gn_min), passed as weight=.
LinearGnMinWeights = _native.LinearGnMinWeights

# kjit.autotune = True: each op times its candidate configs once per problem and keeps the
# fastest (stored in the disk cache, reused by later processes); as KJIT_AUTOTUNE=1 does.
autotune = False

__version__ = _native.version()


def version():
    """kjit's version, e.g. "0.2.0"."""
    return _native.version()


def gpu_available():
    """True when a CUDA driver and a device are usable (no exception, no context made)."""
    return _native.gpu_status()[0]


def gpu_status():
    """(available, why): why not, when no driver or device is usable."""
    return _native.gpu_status()


def cache_stats():
    """NVRTC compiles and disk cache counters of each device's runtime made so far ("cuda:0":
    {"kernels_loaded", "nvrtc_compiles", "nvrtc_ms", "disk": {hits, misses, ...}}) and of
    kjit.compile's host compiler ("host")."""
    return _native.cache_stats()


def nvrtc_version():
    return _native.nvrtc_version()


# A program that imported torch first gets the custom ops now (torch.compile may trace before
# any kjit call); otherwise on the first torch tensor a call sees.
_find_torch()

__all__ = [
    "ArgumentTypeError", "CaptureCompileError", "CompileError", "CublasError", "CudaError",
    "Error", "InvalidArgumentError", "IoError", "Kernel", "LinearGnMinWeights", "NoDeviceError",
    "NoDriverError", "NotFoundError", "NvrtcError", "UnsupportedError", "autotune",
    "cache_stats", "compile", "gpu_available", "gpu_status", "group_norm", "kernel", "layer_norm",
    "linear_gn_min", "nvrtc_version", "prepack_linear_gn_min", "prepare", "rms_norm", "version",
]
