"""User kernels: a CUDA C++ template from Python source (or a file), specialized with types and
values, compiled with NVRTC (or found in kjit's disk cache) and launched on tensors and scalars.

    k = kjit.kernel(SRC, "scale", types=["float32"], values=[3])
    k = kjit.kernel(pathlib.Path("kernels/scale.cuh"), "scale", ...)   # or "kernels/scale.cuh"
    k(grid, block, x, y, n, stream=None)

source: a path or the text, told apart by its type and spelling alone (_is_path).

Arguments: a tensor (any DLPack object in CUDA memory) is passed as its device pointer; a Python
int as a C int (32-bit), a float as a float, a bool as a bool; a numpy scalar (numpy.int64(n),
numpy.float64(v)) or a ctypes value or struct by its bytes. kjit checks each argument's size
against the kernel's parameters before launching.
"""

import ctypes
import hashlib
import operator
import os
import sys

from . import _kjit as _native
from ._errors import ArgumentTypeError, InvalidArgumentError
from ._tensors import is_bool, is_torch, plain, stream_for


# A str of one line ending in one of these names a file (see _is_path).
_SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".hh", ".hpp", ".hxx", ".c", ".cc", ".cpp", ".cxx", ".inl")


def _is_path(source):
    """Whether `source` names a file: an os.PathLike (pathlib.Path) always does; a str does when
    it is one line without a '{' ending in a C++ or CUDA source suffix (.cu, .cuh, .h, .hpp, .cpp,
    ...; any case): a kernel's text has a body, so a '{' (as in `__global__ void k() {} // k.cu`)
    makes it text. Whether the file exists never decides: a missing one is an IoError naming it,
    not its name compiled by NVRTC."""
    if isinstance(source, os.PathLike):
        return True
    return (isinstance(source, str) and "\n" not in source and "\r" not in source
            and "{" not in source and source.lower().endswith(_SOURCE_SUFFIXES))


def _refuse_path_as_text(source):
    # A str without a source suffix is text; one naming an existing file (kernel.txt) was meant as
    # a path: refused, rather than NVRTC's errors about its name.
    if len(source) <= 4096 and "\n" not in source and "\0" not in source \
            and os.path.exists(source):
        raise InvalidArgumentError(
            "kjit.kernel: source %r names an existing file or folder but has no source suffix "
            "(%s), so it is read as CUDA C++ text: pass pathlib.Path(%r) to read a file"
            % (source, ", ".join(_SOURCE_SUFFIXES), source), field="source")


def _read_file(path):
    """A source file's text: a regular file whose length is its stat size (a FIFO, a device, a
    folder or a pseudo-file such as /proc's is refused, never waited on or read short) of at most
    16 MiB, read by the native module (IoError names the path and the OS's reason), then decoded
    as UTF-8."""
    try:
        raw = os.fsencode(path)
    except UnicodeEncodeError as e:  # a lone surrogate no file name can hold
        raise InvalidArgumentError("kjit.kernel: source path %r cannot be a file name (%s at "
                                   "offset %d)" % (path, e.reason, e.start), field="source") from None
    data = _native.read_source_file(raw)
    path = os.fsdecode(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidArgumentError("kjit.kernel: source file %r is not UTF-8 text (%s)"
                                   % (path, e.reason), field="source") from None


def _read_source(source):
    """Source text, or the text of the file it names (_is_path). A NUL byte is refused: NVRTC
    would compile only the text before it."""
    if _is_path(source):
        source = _read_file(source)
    elif isinstance(source, str):
        _refuse_path_as_text(source)
    if not isinstance(source, str):
        raise ArgumentTypeError("kjit.kernel: source must be CUDA C++ text or a path, not %s"
                                % type(source).__name__, field="source")
    nul = source.find("\0")
    if nul >= 0:
        raise InvalidArgumentError("kjit.kernel: source holds a NUL byte at offset %d: a source is "
                                   "text" % nul, field="source")
    try:
        source.encode("utf-8")  # what NVRTC and the cache key get
    except UnicodeEncodeError as e:
        raise InvalidArgumentError("kjit.kernel: source is not Unicode text NVRTC can read (%s at "
                                   "offset %d)" % (e.reason, e.start), field="source") from None
    return source


def _require_str(value, field):
    if not isinstance(value, str):
        raise ArgumentTypeError("kjit.kernel: %s must be a str, not %s (%r)"
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
        raise ArgumentTypeError("kjit.kernel: %s must be a list or tuple, not %r (e.g. %s=[%r])"
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


def _shared_bytes(shared):
    """shared= as a byte count: an int (numpy's too) in 0 .. 2^32-1. A bool is a mistake, not 0
    or 1 byte."""
    if type(shared) is int:
        n = shared
    elif is_bool(shared):
        raise InvalidArgumentError("kjit.kernel: shared = %s is a bool; it must be an int (bytes "
                                   "of dynamic shared memory)" % bool(shared), field="shared")
    else:
        try:
            n = operator.index(shared)
        except TypeError:
            raise ArgumentTypeError("kjit.kernel: shared must be an int (bytes of dynamic "
                                    "shared memory), not %s (%r)"
                                    % (type(shared).__name__, shared), field="shared") from None
    if not 0 <= n < 2**32:
        raise InvalidArgumentError("kjit.kernel: shared = %d bytes is out of range (0 .. 2^32-1)"
                                   % n, field="shared")
    return n


class Kernel:
    """A specialized, loaded kernel on one device. Call it as k(grid, block, *args, shared=0,
    stream=None): grid and block are ints or tuples of up to 3 ints, shared the bytes of dynamic
    shared memory."""

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
        self._k.launch(grid, block, [_arg(a) for a in args], _shared_bytes(shared),
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
    `name` of `source` with template arguments types (dtype names such as
    "float32"/"float16"/"bfloat16", torch or numpy dtypes, or any C++ type name) followed by
    values (ints, bools). Raises CompileError with NVRTC's log when it does not compile.

    source is a path or CUDA C++ text, by its type and spelling alone: a pathlib.Path (any
    os.PathLike) is a path; a str is a path when it is one line ending in a C++/CUDA source
    suffix (.cu, .cuh, .h, .hh, .hpp, .hxx, .c, .cc, .cpp, .cxx, .inl; any case) and holding no
    '{' (a kernel's body), and text otherwise. A path must name a regular file whose length is
    its stat size (not a FIFO, device, folder or /proc pseudo-file), of at most 16 MiB of UTF-8:
    else an IoError naming the path and the reason. A one-line str that names an existing file
    without such a suffix is refused (InvalidArgumentError): pass pathlib.Path(...) for it."""
    return Kernel(source, name, types, values, device=device)


def compile(source, name, types=(), values=(), *, arch="sm_90"):
    """Compile without a GPU (NVRTC and the disk cache only): returns a dict with the
    instantiation, lowered_name, arch, binary (cubin bytes), log, compile_ms and from_disk.
    source: text or a path, by kjit.kernel's rule."""
    text = _read_source(source)
    return _native.compile(_header_name(text), text, _require_str(name, "name"),
                           [_type_name(t) for t in _names(types, "types")], _values(values),
                           _require_str(arch, "arch"))
