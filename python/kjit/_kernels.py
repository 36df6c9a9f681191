"""User kernels: a CUDA C++ template from Python source (or a file), specialized with types and
values, compiled with NVRTC (or found in kjit's disk cache) and launched on tensors and scalars.

    k = kjit.kernel(SRC, "scale", types=["float32"], values=[3])
    k(grid, block, x, y, n, stream=None)

Arguments: a tensor (any DLPack object in CUDA memory) is passed as its device pointer; a Python
int as a C int (32-bit), a float as a float, a bool as a bool; a numpy scalar (numpy.int64(n),
numpy.float64(v)) or a ctypes value or struct by its bytes. kjit checks each argument's size
against the kernel's parameters before launching.
"""

import ctypes
import hashlib
import os
import sys

from . import _kjit as _native
from ._errors import InvalidArgumentError
from ._tensors import is_torch, plain, stream_for


def _read_file(path):
    """A source file's text, read as kjit reads a template header (kjit::read_template_file: a
    regular file, never a FIFO or a device, of at most 16 MiB; IoError names the path and the
    OS's reason), then decoded as UTF-8."""
    data = _native.read_source_file(os.fsencode(path))
    path = os.fsdecode(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidArgumentError("kjit.kernel: source file %r is not UTF-8 text (%s)"
                                   % (path, e.reason), field="source") from None


def _read_source(source):
    """Source text, or the text of the file it names (a path: os.PathLike, or one line naming an
    existing file). A NUL byte is refused: NVRTC would compile only the text before it."""
    if isinstance(source, os.PathLike) or (isinstance(source, str) and "\n" not in source
                                           and "\0" not in source and os.path.isfile(source)):
        source = _read_file(source)
    if not isinstance(source, str):
        raise InvalidArgumentError("kjit.kernel: source must be CUDA C++ text or a path, not %s"
                                   % type(source).__name__, field="source")
    nul = source.find("\0")
    if nul >= 0:
        raise InvalidArgumentError("kjit.kernel: source holds a NUL byte at offset %d: a source is "
                                   "text" % nul, field="source")
    return source


def _require_str(value, field):
    if not isinstance(value, str):
        raise InvalidArgumentError("kjit.kernel: %s must be a str, not %s (%r)"
                                   % (field, type(value).__name__, value), field=field)
    if "\0" in value:
        raise InvalidArgumentError("kjit.kernel: %s %r holds a NUL byte" % (field, value),
                                   field=field)
    return value


def _header_name(text):
    # By content: the same source registers once per runtime, and an edited one is a new header
    # (kjit's cache key covers the text either way).
    return "python/%s.cuh" % hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def _names(seq, field):
    """types= / values= as a list: one str (or int) there is a mistake, not a list of its parts."""
    if isinstance(seq, (str, bytes)) or not hasattr(seq, "__iter__"):
        raise InvalidArgumentError("kjit.kernel: %s must be a list or tuple, not %r (e.g. %s=[%r])"
                                   % (field, seq, field, seq), field=field)
    return list(seq)


def _type_name(t):
    if isinstance(t, str):
        return t
    if isinstance(t, (bool, int, float)):
        raise InvalidArgumentError("kjit.kernel: types must be type names or dtypes, not %r "
                                   "(template values go in values=)" % (t,), field="types")
    name = getattr(t, "name", None) or getattr(t, "__name__", None)  # numpy dtype / scalar type
    if name is None and type(t).__module__.split(".")[0] == "torch":
        name = str(t)  # torch.float16
    if not isinstance(name, str):
        raise InvalidArgumentError("kjit.kernel: types must be type names (str) or dtypes, not %r"
                                   % (t,), field="types")
    return _require_str(name.rsplit(".", 1)[-1], "types")  # torch.float16 -> float16


def _values(values):
    out = []
    for v in _names(values, "values"):
        if hasattr(v, "item") and not isinstance(v, (bool, int)):
            v = v.item()  # numpy integer
        if not isinstance(v, (bool, int)):
            raise InvalidArgumentError("kjit.kernel: values must be ints or bools, not %r" % (v,),
                                       field="values")
        out.append(v)
    return out


def _arg(a):
    t = type(a)
    if t is bool or t is int or t is float:
        return a
    if t.__module__ == "numpy" and getattr(a, "shape", None) == () \
            and not hasattr(a, "__dlpack__"):
        return a.tobytes()  # a numpy scalar (numpy.float64 is also a float): its exact width
    if isinstance(a, (bool, int, float)):
        return a
    if isinstance(a, (ctypes._SimpleCData, ctypes.Structure, ctypes.Union)):
        return bytes(a)
    return plain(a)  # a tensor (the native side checks it)


def _default_device():
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return torch.cuda.current_device()
    return 0


def _device_index(device):
    """A CUDA device ordinal from an int, "cuda:N" / "cuda", or a torch.device."""
    if type(device) is int:
        if 0 <= device < 2**31:
            return device
        raise InvalidArgumentError("kjit.kernel: device = %d is no device ordinal" % device,
                                   field="device")
    is_torch_device = type(device).__name__ == "device"
    text = str(device) if is_torch_device else device
    if isinstance(text, str) and (text == "cuda" or text.startswith("cuda:")):
        index = device.index if is_torch_device else None
        if text == "cuda":
            return _default_device() if index is None else index
        if text[5:].isascii() and text[5:].isdigit() and len(text) <= 14:
            return int(text[5:])
    raise InvalidArgumentError("kjit.kernel: device must be an int, 'cuda:N' or a torch.device, "
                               "not %r" % (device,), field="device")


class Kernel:
    """A specialized, loaded kernel on one device. Call it as k(grid, block, *args, shared=0,
    stream=None): grid and block are ints or tuples of up to 3 ints."""

    def __init__(self, source, name, types=(), values=(), *, device=None):
        text = _read_source(source)
        dev = _default_device() if device is None else _device_index(device)
        self._k = _native.Kernel(dev, _header_name(text), text, _require_str(name, "name"),
                                 [_type_name(t) for t in _names(types, "types")], _values(values))

    def __call__(self, grid, block, *args, shared=0, stream=None):
        if stream is None:
            for a in args:
                if is_torch(a):
                    stream = stream_for(a, None)
                    break
        self._k.launch(grid, block, [_arg(a) for a in args], shared,
                       0 if stream is None else stream_for(None, stream))

    @property
    def instantiation(self):
        return self._k.instantiation

    @property
    def num_params(self):
        return self._k.num_params

    @property
    def num_registers(self):
        return self._k.num_registers

    def __repr__(self):
        return "kjit.Kernel(%s on cuda:%d)" % (self._k.instantiation, self._k.device)


def kernel(source, name, types=(), values=(), *, device=None):
    """Specialize, compile (or load from the disk cache) and load a __global__ function template
    `name` of `source` (CUDA C++ text or a path) with template arguments types (dtype names such
    as "float32"/"float16"/"bfloat16", torch or numpy dtypes, or any C++ type name) followed by
    values (ints, bools). Raises CompileError with NVRTC's log when it does not compile."""
    return Kernel(source, name, types, values, device=device)


def compile(source, name, types=(), values=(), *, arch="sm_90"):
    """Compile without a GPU (NVRTC and the disk cache only): returns a dict with the
    instantiation, lowered_name, arch, binary (cubin bytes), log, compile_ms and from_disk."""
    text = _read_source(source)
    return _native.compile(_header_name(text), text, _require_str(name, "name"),
                           [_type_name(t) for t in _names(types, "types")], _values(values),
                           _require_str(arch, "arch"))
