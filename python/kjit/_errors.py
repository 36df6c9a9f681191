"""kjit's exceptions: kjit.Error and one subclass per kjit::Errc code.

Every error the native module raises is one of these, carrying kjit's code name (``.code``), its
message (``str(e)``, naming the bad value and the rule), the NVRTC log of a compile error
(``.log``; also in the message) and, for an invalid argument, the argument or field it is about
(``.field``: "x", "groups", "eps", ...). Invalid arguments are also ``ValueError``s, so code
that catches ValueError for bad input keeps working; an argument of the wrong type (a list where
a tensor goes, text where a float goes) is an ``ArgumentTypeError``, also a ``TypeError``.
"""


class Error(RuntimeError):
    """Base class of kjit's exceptions."""

    code = "error"

    def __init__(self, message, log="", field=None):
        super().__init__(message)
        self.log = log
        self.field = field


class InvalidArgumentError(Error, ValueError):
    """A value breaks a documented rule (shape, dtype, layout, device, groups, eps, ...)."""

    code = "invalid_argument"


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of the wrong type: both an InvalidArgumentError (``.field`` names it) and,
    as Python's own functions raise for a wrong type, a TypeError."""


class NoDriverError(Error):
    """No usable CUDA driver (libcuda.so.1 missing, too old, or cuInit failed)."""

    code = "no_driver"


class NoDeviceError(Error):
    """A driver, but no usable device or the ordinal is out of range."""

    code = "no_device"


class CudaError(Error):
    """A CUDA driver call failed."""

    code = "cuda"


class NvrtcError(Error):
    """NVRTC itself failed (not an error in the source)."""

    code = "nvrtc"


class CompileError(Error):
    """The kernel template did not compile; ``.log`` holds NVRTC's log."""

    code = "compile"


class CublasError(Error):
    """A cuBLASLt call failed."""

    code = "cublas"


class UnsupportedError(Error):
    """A valid request this device or toolkit cannot serve."""

    code = "unsupported"


class CaptureCompileError(Error):
    """A compile, module load or allocation would be needed inside a CUDA graph capture:
    call kjit.prepare(...) before capturing."""

    code = "capture_compile"


class NotFoundError(Error, LookupError):
    """Unknown template, op, entry or driver entry point."""

    code = "not_found"


class IoError(Error):
    """A file the caller named could not be read or written."""

    code = "io"


_BY_CODE = {
    cls.code: cls
    for cls in (InvalidArgumentError, NoDriverError, NoDeviceError, CudaError, NvrtcError,
                CompileError, CublasError, UnsupportedError, CaptureCompileError, NotFoundError,
                IoError)
}


def _from_native(code, message, log, field, wrong_type=False):
    """The exception for a kjit::Error (called by the native module's translator); wrong_type:
    the argument's type, not its value, broke the rule."""
    if wrong_type and code == InvalidArgumentError.code:
        return ArgumentTypeError(message, log, field)
    return _BY_CODE.get(code, Error)(message, log, field)
