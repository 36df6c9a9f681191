"""What the op functions need to know about their arguments, at Python speed: which framework a
tensor is from (without importing one), the stream to launch on, and an output like the input."""

import sys

# PyTorch's Tensor type and its current-stream getter, once torch is imported (kjit never
# imports it for you: a program without torch never pays for it).
_torch_tensor = None
_raw_stream = None
_to_dlpack = None


def _find_torch():
    global _torch_tensor, _raw_stream, _to_dlpack
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "Tensor"):
        return None
    # torch.utils.dlpack.to_dlpack is PyTorch's C export of a DLPack capsule; Tensor.__dlpack__
    # wraps it in Python-level checks that cost more than the rest of a kjit call. Without it,
    # the native module calls __dlpack__ itself.
    try:
        from torch.utils.dlpack import to_dlpack as export
    except ImportError:
        def export(t):
            return t
    _to_dlpack = export
    # The raw handle getter (what torch.cuda.current_stream().cuda_stream returns, without making
    # a Stream object: ~20x cheaper); the public API where a torch build lacks it.
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is None:
        def raw(device):
            return torch.cuda.current_stream(device).cuda_stream
    _raw_stream = raw
    _torch_tensor = torch.Tensor
    # The custom ops (torch.compile, CUDA graphs) register on first sight of a torch tensor.
    from . import torch as _kjit_torch  # noqa: F401
    return _torch_tensor


def is_torch(x):
    t = _torch_tensor
    if t is None:
        t = _find_torch()
        if t is None:
            return False
    return isinstance(x, t)


def is_bool(v):
    """A Python or numpy bool: ints to Python (numpy's convert), refused where a count is meant."""
    t = type(v)
    return t is bool or (t.__module__ == "numpy" and t.__name__ in ("bool", "bool_"))


def dl(t):
    """A torch tensor as its DLPack capsule (the native module imports capsules and any DLPack
    object alike); anything else as it is. A tensor that requires grad (an nn.Parameter) is
    exported detached: kjit's ops are forward-only."""
    tt = _torch_tensor
    if tt is not None and isinstance(t, tt):
        try:
            return _to_dlpack(t)
        except RuntimeError:
            return _to_dlpack(t.detach())
    return t


def plain(t):
    """t without autograd: PyTorch refuses to export a tensor that requires grad (an
    nn.Parameter) through DLPack. kjit's ops are forward-only, so nothing is lost."""
    if t is not None and getattr(t, "requires_grad", False):
        return t.detach()
    return t


def stream_handle(stream):
    """A CUstream handle (int) from an int, a torch.cuda.Stream, a CuPy stream, or any object
    with __cuda_stream__ (the CUDA stream protocol)."""
    if type(stream) is int:
        if 0 <= stream < 2**64:
            return stream
        from ._errors import InvalidArgumentError
        raise InvalidArgumentError("kjit: stream = %d is no stream handle (0 .. 2^64-1)" % stream,
                                   field="stream")
    from ._errors import ArgumentTypeError, InvalidArgumentError
    if hasattr(stream, "__cuda_stream__"):
        h = stream.__cuda_stream__()
        h = h[1] if isinstance(h, tuple) and len(h) == 2 else None
        if type(h) is not int:
            raise InvalidArgumentError(
                "kjit: stream.__cuda_stream__() must return (version, int handle), not %r"
                % (stream.__cuda_stream__(),), field="stream")
        return stream_handle(h)  # the range check
    for attr in ("cuda_stream", "ptr", "handle"):
        h = getattr(stream, attr, None)
        if type(h) is int:  # not a bool
            return stream_handle(h)
    raise ArgumentTypeError(
        "kjit: stream must be an int handle, a torch.cuda.Stream, a CuPy stream or an object "
        "with __cuda_stream__, not %s" % type(stream).__name__, field="stream")


def stream_for(x, stream):
    """stream=, else PyTorch's current stream for x's device when x is a torch tensor, else the
    legacy default stream (0)."""
    if stream is not None:
        return stream_handle(stream)
    if is_torch(x):
        dev = x.get_device()
        return _raw_stream(dev) if dev >= 0 else 0
    return 0


def empty_like(x):
    """A new uninitialized tensor like x (shape, dtype, device, strides): torch.empty_like for
    torch tensors (channels_last stays channels_last), else the array's own namespace."""
    if is_torch(x):
        return sys.modules["torch"].empty_like(x)
    if not hasattr(x, "__dlpack__"):
        from ._errors import ArgumentTypeError
        raise ArgumentTypeError("kjit: x must be a tensor (DLPack), not %s" % type(x).__name__,
                                field="x")
    ns = getattr(x, "__array_namespace__", None)
    if ns is not None:
        return ns().empty_like(x)
    mod = sys.modules.get(type(x).__module__.split(".")[0])
    if mod is not None and hasattr(mod, "empty_like"):
        return mod.empty_like(x)
    from ._errors import InvalidArgumentError
    raise InvalidArgumentError(
        "kjit: cannot allocate an output like a %s: pass out=" % type(x).__name__, field="out")


def empty_f32(x, shape):
    """A new contiguous float32 tensor of `shape` on x's device (torch, CuPy or numpy-like)."""
    if is_torch(x):
        torch = sys.modules["torch"]
        return torch.empty(shape, dtype=torch.float32, device=x.device)
    mod = sys.modules.get(type(x).__module__.split(".")[0])
    if mod is not None and hasattr(mod, "empty"):
        if hasattr(x, "device") and type(x).__module__.startswith("cupy"):
            with x.device:
                return mod.empty(shape, dtype="float32")
        return mod.empty(shape, dtype="float32")
    from ._errors import InvalidArgumentError
    raise InvalidArgumentError(
        "kjit: cannot allocate an output for a %s: pass out=" % type(x).__name__, field="out")
