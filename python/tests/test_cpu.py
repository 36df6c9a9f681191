"""CPU tests: import, version, argument validation and compile errors, with numpy arrays as the
DLPack tensors; no GPU or driver needed (every rule below is checked before the device)."""

import ctypes
import os
import pathlib
import re
import sys

import numpy as np
import pytest

import kjit


def f32(*shape):
    return np.zeros(shape, np.float32)


def test_version_matches_the_cmake_project():
    with open(__file__.rsplit("/python/", 1)[0] + "/CMakeLists.txt") as f:
        want = re.search(r"project\(kjit VERSION ([0-9.]+)", f.read()).group(1)
    assert kjit.version() == want
    assert kjit.__version__ == want
    assert re.fullmatch(r"[0-9]+\.[0-9]+", kjit.nvrtc_version())


def test_gpu_status_says_why():
    ok, why = kjit.gpu_status()
    assert isinstance(ok, bool)
    assert ok or why  # no GPU: a reason


def test_autotune_switch_defaults_off_and_is_checked():
    assert kjit.autotune is False
    try:
        kjit.autotune = "yes"
        with pytest.raises(kjit.InvalidArgumentError, match="autotune"):
            kjit.group_norm(f32(2, 8, 4), 4)
    finally:
        kjit.autotune = False


def test_cpu_tensor_is_refused_naming_the_argument():
    with pytest.raises(ValueError, match=r"kjit.group_norm: x is on cpu") as e:
        kjit.group_norm(f32(2, 8, 4), 4)
    assert isinstance(e.value, kjit.Error)
    assert e.value.code == "invalid_argument" and e.value.field == "x"


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.uint8, np.complex64])
def test_bad_dtype(dtype):
    with pytest.raises(kjit.InvalidArgumentError,
                       match="x has dtype .*float32, float16 or bfloat16"):
        kjit.group_norm(np.zeros((2, 8, 4), dtype), 4)


def test_bad_groups():
    with pytest.raises(kjit.InvalidArgumentError, match="divisible by groups = 3") as e:
        kjit.group_norm(f32(2, 8, 4), 3)
    assert e.value.field == "groups"
    with pytest.raises(kjit.InvalidArgumentError):
        kjit.group_norm(f32(2, 8, 4), 0)


def test_bad_layout():
    x = f32(2, 8, 6)[:, :, ::2]  # strided: neither contiguous nor channels_last
    with pytest.raises(kjit.InvalidArgumentError,
                       match="neither contiguous .NCHW. nor channels_last"):
        kjit.group_norm(x, 4)


def test_channels_last_layout_passes_the_layout_check():
    x = np.zeros((2, 5, 5, 8), np.float32).transpose(0, 3, 1, 2)  # NHWC memory, NCHW shape
    with pytest.raises(kjit.InvalidArgumentError, match="x is on cpu"):
        kjit.group_norm(x, 4)  # layout, shape and groups accepted; only the device is left


def test_too_few_dims():
    with pytest.raises(kjit.InvalidArgumentError, match=r"\[N, C, \*\]"):
        kjit.group_norm(f32(8), 4)


def test_bad_weight_and_bias():
    x = f32(2, 8, 4)
    with pytest.raises(kjit.InvalidArgumentError, match="weight has shape \\[7\\]"):
        kjit.group_norm(x, 4, weight=f32(7))
    with pytest.raises(kjit.InvalidArgumentError, match="weight's dtype"):
        kjit.group_norm(x.astype(np.float16), 4, weight=f32(8), bias=np.zeros(8, np.float16))
    with pytest.raises(kjit.InvalidArgumentError, match="bias must be a tensor"):
        kjit.group_norm(x, 4, bias=[0.0] * 8)


def test_bad_out():
    x = f32(2, 8, 4)
    with pytest.raises(kjit.InvalidArgumentError, match="out has shape"):
        kjit.group_norm(x, 4, out=f32(2, 8, 5))
    with pytest.raises(kjit.InvalidArgumentError, match="out has dtype"):
        kjit.group_norm(x, 4, out=np.zeros((2, 8, 4), np.float16))
    ro = f32(2, 8, 4)
    ro.flags.writeable = False
    with pytest.raises(kjit.InvalidArgumentError, match="out must be a writable tensor"):
        kjit.group_norm(x, 4, out=ro)


def test_bad_activation_and_eps():
    with pytest.raises(kjit.InvalidArgumentError, match="'bogus' is not one of"):
        kjit.group_norm(f32(2, 8, 4), 4, activation="bogus")
    with pytest.raises(kjit.InvalidArgumentError, match="activation must be a name"):
        kjit.group_norm(f32(2, 8, 4), 4, activation=None)


def test_linear_gn_min_validation():
    x, w, v = f32(16, 32), f32(64, 32), f32(64)
    with pytest.raises(kjit.InvalidArgumentError, match="weight has shape \\[64, 31\\]"):
        kjit.linear_gn_min(x, f32(64, 31), v, v, v, v, 8)
    with pytest.raises(kjit.InvalidArgumentError, match="gamma has shape"):
        kjit.linear_gn_min(x, w, v, f32(63), v, v, 8)
    with pytest.raises(kjit.InvalidArgumentError, match="divisible|groups"):
        kjit.linear_gn_min(x, w, v, v, v, v, 7)
    with pytest.raises(kjit.InvalidArgumentError, match="x has dtype float16"):
        kjit.linear_gn_min(x.astype(np.float16), w, v, v, v, v, 8)
    with pytest.raises(kjit.InvalidArgumentError, match="is not one of|precision"):
        kjit.linear_gn_min(x, w, v, v, v, v, 8, precision="fp8")
    with pytest.raises(kjit.InvalidArgumentError, match="x is on cpu"):
        kjit.linear_gn_min(x, w, v, v, v, f32(1, 64, 1, 1), 8)
    for precision in ("fp32", "tf32", "fp32x3"):  # every fp32-input mode reaches the device check
        with pytest.raises(kjit.InvalidArgumentError, match="x is on cpu"):
            kjit.linear_gn_min(x, w, v, v, v, v, 8, precision=precision)
    bf = np.zeros((16, 32), np.float16)  # numpy has no bfloat16: the dtype rule names it
    with pytest.raises(kjit.InvalidArgumentError,
                       match="must be bfloat16 .precision='bf16-inputs'"):
        kjit.linear_gn_min(bf, w, v, v, v, v, 8, precision="bf16-inputs")


def test_norm_validation():
    with pytest.raises(kjit.InvalidArgumentError, match="last dimension only"):
        kjit.layer_norm(f32(4, 8), (4, 8))
    with pytest.raises(kjit.InvalidArgumentError, match="residual has shape"):
        kjit.layer_norm(f32(4, 8), residual=f32(4, 9))
    with pytest.raises(kjit.InvalidArgumentError, match="not contiguous"):
        kjit.rms_norm(f32(8, 4).T)
    with pytest.raises(kjit.InvalidArgumentError, match="x is on cpu"):
        kjit.rms_norm(f32(4, 8), 8, f32(8))


def test_prepare_rejects_unknown_ops():
    with pytest.raises(kjit.InvalidArgumentError, match="kjit.prepare: op must be one of"):
        kjit.prepare(print, f32(2, 8, 4), 4)
    with pytest.raises(kjit.InvalidArgumentError, match="x is on cpu"):
        kjit.prepare("group_norm", f32(2, 8, 4), 4)


def test_every_error_code_maps_to_its_class():
    classes = {
        "invalid_argument": kjit.InvalidArgumentError, "no_driver": kjit.NoDriverError,
        "no_device": kjit.NoDeviceError, "cuda": kjit.CudaError, "nvrtc": kjit.NvrtcError,
        "compile": kjit.CompileError, "cublas": kjit.CublasError,
        "unsupported": kjit.UnsupportedError, "capture_compile": kjit.CaptureCompileError,
        "not_found": kjit.NotFoundError, "io": kjit.IoError,
    }
    for code, cls in classes.items():
        with pytest.raises(cls) as e:
            kjit._native._raise_for_test(code, "message " + code, "the log", "")
        assert e.value.code == code and str(e.value) == "message " + code
        assert e.value.log == "the log" and e.value.field is None
        assert isinstance(e.value, kjit.Error)
        assert isinstance(e.value, ValueError) == (code == "invalid_argument")
    with pytest.raises(kjit.InvalidArgumentError) as e:
        kjit._native._raise_for_test("invalid_argument", "m", "", "groups")
    assert e.value.field == "groups"


BROKEN = """
template <class T>
__global__ void broken(T* x) { x[0] = this_name_does_not_exist; }
"""

GOOD = """
template <class T, int kScale>
__global__ void scale(const T* x, T* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * kScale;
}
"""


def test_compile_error_carries_the_nvrtc_log():
    with pytest.raises(kjit.CompileError) as e:
        kjit.compile(BROKEN, "broken", types=["float32"])
    assert e.value.code == "compile"
    assert "this_name_does_not_exist" in e.value.log and "error" in e.value.log
    assert "broken<float>" in str(e.value)  # the message names the instantiation too


COPY = """
#include "kjit/types.cuh"  // kjit::half, kjit::bfloat16 (what float16 / bfloat16 name)
template <class T>
__global__ void copy(const T* x, T* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}
"""


def test_compile_without_a_gpu(tmp_path):
    r = kjit.compile(COPY, "copy", types=[np.float16], arch="sm_80")
    assert r["instantiation"] == "copy<kjit::half>"
    r = kjit.compile(GOOD, "scale", types=[np.float32], values=[3], arch="sm_80")
    assert r["instantiation"] == "scale<float, 3>"
    assert r["arch"] == "sm_80" and r["binary"][:4] == b"\x7fELF"
    path = tmp_path / "scale.cuh"
    path.write_text(GOOD)
    r2 = kjit.compile(path, "scale", types=["float32"], values=[2])
    assert r2["instantiation"] == "scale<float, 2>"
    with pytest.raises(kjit.InvalidArgumentError, match="values must be ints or bools"):
        kjit.compile(GOOD, "scale", types=["float32"], values=[2.5])
    assert kjit.cache_stats()["host"]["nvrtc_compiles"] + \
        kjit.cache_stats()["host"]["disk"]["hits"] >= 2


def test_kernel_needs_a_device_without_one():
    if kjit.gpu_available():
        pytest.skip("a GPU is here: the GPU tests launch kernels")
    with pytest.raises((kjit.NoDriverError, kjit.NoDeviceError)):
        kjit.kernel(GOOD, "scale", types=["float32"], values=[3])


def test_kernel_argument_marshalling_helpers():
    from kjit import _kernels
    assert _kernels._arg(np.int64(5)) == (5).to_bytes(8, "little")
    assert _kernels._arg(np.float64(1.5)) == np.float64(1.5).tobytes()
    assert _kernels._arg(ctypes.c_short(3)) == (3).to_bytes(2, "little")
    assert _kernels._arg(7) == 7 and _kernels._arg(2.5) == 2.5
    assert _kernels._type_name(np.float32) == "float32"
    assert _kernels._type_name(np.dtype("float16")) == "float16"


def test_stream_handles():
    from kjit._tensors import stream_handle

    class Torchish:
        cuda_stream = 1234

    class Protocol:
        def __cuda_stream__(self):
            return (0, 99)

    assert stream_handle(5) == 5
    assert stream_handle(Torchish()) == 1234
    assert stream_handle(Protocol()) == 99
    with pytest.raises(kjit.InvalidArgumentError, match="stream must be"):
        stream_handle("default")


def test_dlpack_capsules_are_read_like_tensors():
    # The torch fast path hands the native module capsules (torch.utils.dlpack.to_dlpack).
    x = f32(2, 8, 4)
    with pytest.raises(kjit.InvalidArgumentError, match="x is on cpu"):
        kjit._native.group_norm(x.__dlpack__(), f32(2, 8, 4).__dlpack__(), None, None, 4, 1e-5,
                                1, False, 0)
    with pytest.raises(kjit.InvalidArgumentError, match="x has dtype float64"):
        kjit._native.group_norm(x.astype(np.float64).__dlpack__(), f32(2, 8, 4), None, None, 4,
                                1e-5, 1, False, 0)


class _FakeTorchTensor(np.ndarray):
    """A numpy array that looks like a torch tensor to kjit._tensors (get_device, requires_grad,
    detach), so that the torch path of the op functions runs without PyTorch."""

    requires_grad = False

    def get_device(self):
        return -1  # CPU

    def detach(self):
        d = self.view(_FakeTorchTensor)
        d.requires_grad = False
        return d


def test_torch_path_exports_capsules_and_detaches(monkeypatch):
    import types
    from kjit import _tensors
    exported = []

    def to_dlpack(t):
        if t.requires_grad:
            raise RuntimeError("Can't export tensors that require gradient")
        exported.append(t.shape)
        return t.__dlpack__()

    monkeypatch.setattr(_tensors, "_torch_tensor", _FakeTorchTensor)
    monkeypatch.setattr(_tensors, "_to_dlpack", to_dlpack)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(empty_like=np.empty_like))
    x = f32(2, 8, 4).view(_FakeTorchTensor)
    w = np.ones(8, np.float32).view(_FakeTorchTensor)
    w.requires_grad = True  # an nn.Parameter: exported detached
    with pytest.raises(kjit.InvalidArgumentError, match="x is on cpu"):
        kjit.group_norm(x, 4, w, None)
    assert exported == [(2, 8, 4), (2, 8, 4), (8,)]  # x, out, w (detached); bias None
    with pytest.raises(kjit.InvalidArgumentError, match="weight has shape \\[8\\].*must have 16"):
        kjit.group_norm(f32(2, 16, 4).view(_FakeTorchTensor), 4, w)


# --- DLPack exports that claim CUDA memory (no GPU needed: nothing is read through them) -------

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_keep = []  # the capsules' memory, alive for the whole session


def cuda_capsule(*shape, data=0x10000, device=0):
    """A DLPack capsule of a contiguous float32 tensor in "CUDA memory" at `data` (0: an empty
    PyTorch tensor's null pointer). Only the checks before the device read it."""
    n = len(shape)
    dims = (ctypes.c_int64 * max(n, 1))(*shape)
    strides = (ctypes.c_int64 * max(n, 1))()
    step = 1
    for i in reversed(range(n)):
        strides[i] = step
        step *= shape[i]
    mt = _DLManagedTensor()
    mt.dl_tensor = _DLTensor(data or None, _DLDevice(2, device), n, _DLDataType(2, 32, 1), dims,
                             strides, 0)
    _keep.append((dims, strides, mt))
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p,
                                                   ctypes.c_void_p]
    return new(ctypes.addressof(mt), b"dltensor", None)


def test_empty_tensors_are_nothing_to_do():
    # PyTorch exports an empty CUDA tensor with a null data pointer: F.group_norm / F.layer_norm
    # return an empty result, so kjit does too (no runtime, no launch: no GPU needed here).
    kjit._native.group_norm(cuda_capsule(0, 8, 4, data=0), cuda_capsule(0, 8, 4, data=0), None,
                            None, 4, 1e-5, 1, False, 0)
    kjit._native.layer_norm(0, cuda_capsule(0, 8, data=0), None, cuda_capsule(0, 8, data=0), None,
                            None, None, 1e-5, 0, False, 0)
    # The rules still hold for an empty batch.
    with pytest.raises(kjit.InvalidArgumentError, match="divisible by groups = 3"):
        kjit._native.group_norm(cuda_capsule(0, 8, 4, data=0), cuda_capsule(0, 8, 4, data=0),
                                None, None, 3, 1e-5, 1, False, 0)
    with pytest.raises(kjit.InvalidArgumentError, match="out has shape"):
        kjit._native.group_norm(cuda_capsule(0, 8, 4, data=0), cuda_capsule(0, 8, 5, data=0),
                                None, None, 4, 1e-5, 1, False, 0)
    # A pinned config is checked against the empty problem, as the C++ and C calls check it:
    # that needs the device's properties, so the call gets as far as the runtime.
    _no_driver_yet(lambda: kjit._native.layer_norm(
        0, cuda_capsule(0, 8, data=0), None, cuda_capsule(0, 8, data=0), None, None, None, 1e-5,
        0, False, 0, "threads=32 team=8 vec=1 iters=1 cluster=1"))
    _no_driver_yet(lambda: kjit._native.group_norm(
        cuda_capsule(0, 8, 4, data=0), cuda_capsule(0, 8, 4, data=0), None, None, 4, 1e-5, 1,
        False, 0, "threads=256 team=256 vec=4 iters=1 cluster=1"))


def test_prepack_linear_gn_min_validation():
    """Every rule a CPU can check comes before the device (a pack itself needs a GPU)."""
    assert kjit.LinearGnMinWeights.__name__ == "LinearGnMinWeights"
    w = f32(64, 32)
    with pytest.raises(kjit.InvalidArgumentError, match="weight is on cpu"):
        kjit.prepack_linear_gn_min(w)
    with pytest.raises(kjit.InvalidArgumentError, match="only fp32x3 has a prepacked form"):
        kjit.prepack_linear_gn_min(w, precision="fp32")
    with pytest.raises(kjit.InvalidArgumentError, match="precision"):
        kjit.prepack_linear_gn_min(w, precision="fp64")
    with pytest.raises(kjit.InvalidArgumentError, match="dtype float16, must be float32"):
        kjit.prepack_linear_gn_min(w.astype(np.float16))
    with pytest.raises(kjit.InvalidArgumentError, match=r"shape \[64, 32, 1\], must be \[N, K\]"):
        kjit.prepack_linear_gn_min(w.reshape(64, 32, 1))
    with pytest.raises(kjit.InvalidArgumentError, match="not contiguous"):
        kjit.prepack_linear_gn_min(f32(32, 64).T)
    with pytest.raises(ValueError):  # InvalidArgumentError is a ValueError too
        kjit.prepack_linear_gn_min(np.zeros((0, 32), np.float32))


def test_linear_gn_min_out_must_have_the_result_shape():
    x, w, v = f32(16, 32), f32(64, 32), f32(64)
    # [M, N] has the result's element count but not its [1, N, M, 1] order: refused.
    with pytest.raises(kjit.InvalidArgumentError, match=r"out has shape \[16, 64\], must have "
                       r"the result's \[1, N, M, 1\] = \[1, 64, 16, 1\]"):
        kjit.linear_gn_min(x, w, v, v, v, v, 8, out=f32(16, 64))
    with pytest.raises(kjit.InvalidArgumentError, match="x is on cpu"):
        kjit.linear_gn_min(x, w, v, v, v, v, 8, out=f32(1, 64, 16, 1))


def test_linear_gn_min_allocates_float32_whatever_gamma_is():
    x, w, v = f32(16, 32), f32(64, 32), f32(64)
    with pytest.raises(kjit.InvalidArgumentError, match="gamma must be a tensor"):
        kjit.linear_gn_min(x, w, v, [1.0] * 64, v, v, 8)  # not an AttributeError from allocating


class _TracedTensor(np.ndarray):
    def copy_(self, src):
        self[...] = src
        return self


def test_out_is_written_inside_torch_compile(monkeypatch):
    # While dynamo traces, the public functions call the custom ops, which return new tensors:
    # out= (and sum_out=) must still receive the result.
    import types
    from kjit import _ops

    def result(*shape):
        return np.full(shape, 7.0, np.float32)

    ops = types.SimpleNamespace(
        group_norm=lambda x, *a: result(*x.shape),
        linear_gn_min=lambda x, w, *a: result(1, w.shape[0], x.shape[0], 1),
        layer_norm=lambda x, *a: result(*x.shape), rms_norm=lambda x, *a: result(*x.shape),
        add_layer_norm=lambda x, *a: (result(*x.shape), result(*x.shape) + 1),
        add_rms_norm=lambda x, *a: (result(*x.shape), result(*x.shape) + 1))
    monkeypatch.setattr(_ops, "_compiling", lambda: True)
    monkeypatch.setattr(_ops, "_torch_ops", ops)

    def out(*shape):
        return np.zeros(shape, np.float32).view(_TracedTensor)

    y = out(2, 8, 4)
    assert kjit.group_norm(f32(2, 8, 4), 4, out=y) is y and (y == 7).all()
    y = out(1, 64, 16, 1)
    v = f32(64)
    assert kjit.linear_gn_min(f32(16, 32), f32(64, 32), v, v, v, v, 8, out=y) is y
    assert (y == 7).all()
    for fn in (kjit.layer_norm, kjit.rms_norm):
        y = out(4, 8)
        assert fn(f32(4, 8), out=y) is y and (y == 7).all()
        y, s = out(4, 8), out(4, 8)
        r = fn(f32(4, 8), residual=f32(4, 8), out=y, sum_out=s)
        assert r[0] is y and r[1] is s and (y == 7).all() and (s == 8).all()
    assert kjit.group_norm(f32(2, 8, 4), 4).shape == (2, 8, 4)  # no out=: the op's result


def test_kernel_types_and_values_are_checked():
    # Each a kjit error naming the argument: not std::bad_cast, not "scale<f, l, o, a, t, 3>".
    with pytest.raises(kjit.InvalidArgumentError, match="values must fit a 64-bit int"):
        kjit.compile(GOOD, "scale", types=["float32"], values=[2**70])
    with pytest.raises(kjit.InvalidArgumentError, match=r"types must be a list or tuple"):
        kjit.compile(GOOD, "scale", types="float32", values=[2])
    with pytest.raises(kjit.InvalidArgumentError, match=r"values must be a list or tuple"):
        kjit.compile(GOOD, "scale", types=["float32"], values=2)
    with pytest.raises(kjit.InvalidArgumentError, match="template values go in values="):
        kjit.compile(GOOD, "scale", types=[3])


def test_wrong_types_are_type_errors_and_invalid_arguments():
    # Python's convention (TypeError) and kjit's (InvalidArgumentError, .field) at once, whether
    # the Python layer or the native module finds the wrong type.
    x = f32(2, 8, 4)
    calls = [
        ("x", lambda: kjit.layer_norm([1.0, 2.0])),                 # the Python layer
        ("x", lambda: kjit.group_norm(None, 4)),
        ("weight", lambda: kjit.layer_norm(f32(4, 8), weight=[1.0] * 8)),  # the native module
        ("eps", lambda: kjit.layer_norm(f32(4, 8), eps="1e-5")),
        ("num_groups", lambda: kjit.group_norm(x, "4")),
        ("activation", lambda: kjit.group_norm(x, 4, activation=3)),
        ("normalized_shape", lambda: kjit.layer_norm(f32(4, 8), 8.0)),
        ("stream", lambda: kjit.group_norm(x, 4, stream="s")),
        ("source", lambda: kjit.compile(123, "k")),
        ("name", lambda: kjit.compile(GOOD, 5)),
    ]
    for field, call in calls:
        with pytest.raises(kjit.ArgumentTypeError) as e:
            call()
        assert isinstance(e.value, TypeError) and isinstance(e.value, kjit.InvalidArgumentError)
        assert e.value.field == field, (field, str(e.value))
        assert e.value.code == "invalid_argument"
    # A value of the right type that breaks a rule is no TypeError.
    with pytest.raises(kjit.InvalidArgumentError) as e:
        kjit.group_norm(x, 3)
    assert not isinstance(e.value, TypeError)


def test_wrong_argument_types_name_the_argument():
    x, w, v = f32(2, 8, 4), f32(64, 32), f32(64)
    # TypeErrors that name the public argument, not the private native signature.
    with pytest.raises(TypeError, match="kjit.group_norm: num_groups must be an int, not float"):
        kjit.group_norm(x, 4.0)
    for eps in ("small", "1e-5"):
        with pytest.raises(TypeError, match="kjit.group_norm: eps must be a float, not str"):
            kjit.group_norm(x, 4, eps=eps)
    with pytest.raises(TypeError, match="kjit.linear_gn_min: num_groups must be an int"):
        kjit.linear_gn_min(f32(16, 32), w, v, v, v, v, 8.0)
    with pytest.raises(TypeError, match="kjit.layer_norm: eps must be a float"):
        kjit.layer_norm(f32(4, 8), eps=[1e-5])
    # Values of the right type but outside the rule: kjit errors naming the argument.
    for bad in (-1, 2**64):
        with pytest.raises(kjit.InvalidArgumentError, match="is no stream handle") as e:
            kjit.group_norm(x, 4, stream=bad)
        assert e.value.field == "stream"
    for fn in (lambda t: kjit.group_norm(t, 4), lambda t: kjit.layer_norm(t),
               lambda t: kjit.group_norm(t, 4, out=x),
               lambda t: kjit.linear_gn_min(t, w, v, v, v, v, 8)):
        with pytest.raises(kjit.InvalidArgumentError, match="x must be a tensor") as e:
            fn(None)
        assert e.value.field == "x"
    with pytest.raises(kjit.InvalidArgumentError, match="activation must be a name"):
        kjit.group_norm(x, 4, activation=["silu"])  # unhashable: not a TypeError from a dict
    with pytest.raises(kjit.InvalidArgumentError, match="precision must be a name"):
        kjit.linear_gn_min(f32(16, 32), w, v, v, v, v, 8, precision=["fp32"])
    with pytest.raises(kjit.InvalidArgumentError, match="normalized_shape must be an int"):
        kjit.layer_norm(f32(4, 8), 8.0)
    with pytest.raises(kjit.InvalidArgumentError, match="name must be a str"):
        kjit.compile(GOOD, None)
    with pytest.raises(kjit.InvalidArgumentError, match="arch must be a str"):
        kjit.compile(GOOD, "scale", ["float32"], [2], arch=90)


def test_import_kjit_imports_no_torch(tmp_path):
    # A torch that records its import, first on the path: `import kjit` must not import it
    # (a program without torch never pays for it), while kjit still finds one imported first.
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("import sys\nsys.stderr.write('TORCH IMPORTED\\n')\n")
    import os
    import subprocess
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path)] + sys.path)
    code = "import kjit, sys; print('torch' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False" and "TORCH IMPORTED" not in r.stderr


def test_kernel_device_forms():
    from kjit._kernels import _device_index
    assert _device_index(3) == 3 and _device_index("cuda:2") == 2
    assert _device_index("cuda") == _device_index(0)
    for bad in ("cpu", "cuda:x", 1.0, None):
        with pytest.raises(kjit.InvalidArgumentError, match="device must be an int") as e:
            _device_index(bad)
        assert e.value.field == "device"
    with pytest.raises(kjit.InvalidArgumentError, match="device must be an int"):
        kjit.kernel(GOOD, "scale", types=["float32"], values=[3], device="cpu")


def test_linear_gn_min_allocates_no_workspace_for_a_cpu_tensor(monkeypatch):
    # The torch path sizes its workspace (the seed in fp32x3: 0.37 GB) before the native checks:
    # a CPU tensor, refused there, must not get one allocated first.
    import types
    from kjit import _tensors
    allocated = []

    def empty(shape, dtype=None, device=None):
        allocated.append(shape)
        return np.empty(shape, np.float32 if dtype == "f32" else np.uint8)

    monkeypatch.setattr(_tensors, "_torch_tensor", _FakeTorchTensor)
    monkeypatch.setattr(_tensors, "_to_dlpack", lambda t: t.__dlpack__())
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(
        empty=empty, float32="f32", uint8="u8", empty_like=np.empty_like))
    x, w, v = (f32(*s).view(_FakeTorchTensor) for s in ((16, 32), (64, 32), (64,)))
    with pytest.raises(kjit.InvalidArgumentError, match="x is on cpu"):
        kjit.linear_gn_min(x, w, v, v, v, v, 8, precision="fp32x3")
    assert allocated == [(1, 64, 16, 1)]  # the result only, no workspace


def test_hostile_source_files_and_text_are_refused(tmp_path):
    """A FIFO or a device (whose read would wait or never end), a folder, a missing file, bytes
    that are not UTF-8 and a NUL byte (NVRTC would compile only the text before it)."""
    import os
    fifo = tmp_path / "pipe.cu"
    os.mkfifo(fifo)
    for path, why in ((fifo, "not a regular file"), ("/dev/zero", "not a regular file"),
                      (tmp_path, "a directory"), (tmp_path / "none.cu", "No such file")):
        p = path if not isinstance(path, str) else __import__("pathlib").Path(path)
        with pytest.raises(kjit.IoError, match=why):
            kjit.compile(p, "k")
    bad = tmp_path / "bad.cu"
    bad.write_bytes(b"\xff\xfe kernel")
    with pytest.raises(kjit.InvalidArgumentError, match="not UTF-8"):
        kjit.compile(bad, "k")
    with pytest.raises(kjit.InvalidArgumentError, match="NUL byte at offset 6"):
        kjit.compile("int a;\0 int b;", "k")
    with pytest.raises(kjit.InvalidArgumentError, match="NUL byte"):
        kjit.compile("int a;", "k\0x")
    good = tmp_path / "good.cu"
    good.write_text("int ok;")
    with pytest.raises(kjit.InvalidArgumentError, match="NUL byte"):  # never good.cu itself
        kjit.compile(__import__("pathlib").Path(str(good) + "\0.evil"), "k")


def test_shapes_strides_and_scalars_that_lie_are_named():
    """Element counts past 64 bits, zero-stride views of petabytes (refused, not allocated),
    eps beyond float32 or not finite, and a stream object whose handle is no handle."""
    from numpy.lib.stride_tricks import as_strided
    for shape in ((2, 4, 2**32, 2**32), (2**62, 4, 4)):  # numpy makes no such array: a capsule
        with pytest.raises(kjit.InvalidArgumentError, match="overflows 64 bits"):
            kjit.group_norm(cuda_capsule(*shape), 4, out=cuda_capsule(*shape))
    wide = as_strided(np.zeros(1, np.float32), shape=(2**30, 2**30), strides=(0, 0))
    with pytest.raises(kjit.InvalidArgumentError, match="x is not contiguous"):
        kjit.layer_norm(wide)  # not a MemoryError from allocating the output first
    x = f32(2, 8, 4)
    for eps, why in ((float("nan"), "must be finite"), (1e300, "must be finite"),
                     (10**400, "does not fit a float")):
        with pytest.raises(kjit.InvalidArgumentError, match=why):
            kjit.group_norm(cuda_capsule(2, 8, 4), 4, eps=eps, out=cuda_capsule(2, 8, 4))

    class Liar:
        def __cuda_stream__(self):
            return (0, -5)
    with pytest.raises(kjit.InvalidArgumentError, match="no stream handle"):
        kjit.group_norm(x, 4, out=f32(2, 8, 4), stream=Liar())
    with pytest.raises(kjit.InvalidArgumentError, match="x must be a tensor"):
        kjit.layer_norm(None, 8)
    # An empty array is contiguous (numpy exports it with zero strides): refused for its device.
    with pytest.raises(kjit.InvalidArgumentError, match="is on cpu"):
        kjit.layer_norm(np.zeros((0, 8), np.float32))


# --- Input handling: every rule before the runtime, sum_out, paths, pseudo-files, bools -------

def _no_driver_yet(fn):
    """fn() with arguments that pass every rule: on a machine without a GPU it gets as far as
    making the runtime (so the refusals around it are the rules', not the missing driver's)."""
    if kjit.gpu_available():
        return
    with pytest.raises((kjit.NoDriverError, kjit.NoDeviceError)):
        fn()


def test_prepare_checks_every_argument_the_op_checks_before_the_runtime():
    # Tensors that claim CUDA memory (capsules): only the runtime is left to make, so a
    # NoDriverError here would mean that a rule was skipped or checked after it.
    cc = cuda_capsule
    with pytest.raises(kjit.InvalidArgumentError, match="out has shape") as e:
        kjit.prepare(kjit.group_norm, cc(2, 8, 4), 4, out=cc(2, 8, 5))
    assert e.value.field == "out"
    with pytest.raises(kjit.InvalidArgumentError, match="out has shape"):
        kjit.prepare("layer_norm", cc(4, 8), out=cc(4, 9))
    with pytest.raises(kjit.InvalidArgumentError, match="out has dtype"):
        kjit.prepare("rms_norm", cc(4, 8), out=np.zeros((4, 8), np.float16))
    with pytest.raises(kjit.InvalidArgumentError, match="sum_out has shape") as e:
        kjit.prepare("rms_norm", cc(4, 8), residual=cc(4, 8), sum_out=cc(4, 9))
    assert e.value.field == "sum_out"
    for op in ("layer_norm", "rms_norm"):
        with pytest.raises(kjit.InvalidArgumentError, match="no stream handle"):
            kjit.prepare(op, cc(4, 8), stream=-1)
    with pytest.raises(kjit.InvalidArgumentError, match=r"out has shape \[16, 64\]"):
        kjit.prepare(kjit.linear_gn_min, cc(16, 32), cc(64, 32), cc(64), cc(64), cc(64), cc(64),
                     8, out=cc(16, 64))
    # The calls themselves, each with one bad argument.
    with pytest.raises(kjit.InvalidArgumentError, match="eps = -1 must be finite"):
        kjit.group_norm(cc(2, 8, 4), 4, eps=-1.0, out=cc(2, 8, 4))
    with pytest.raises(kjit.InvalidArgumentError, match="'bogus' is not one of"):
        kjit.layer_norm(cc(4, 8), activation="bogus", out=cc(4, 8))
    _no_driver_yet(lambda: kjit.prepare("layer_norm", cc(4, 8), out=cc(4, 8), stream=0))
    _no_driver_yet(lambda: kjit.prepare(kjit.group_norm, cc(2, 8, 4), 4, out=cc(2, 8, 4)))


def test_config_is_a_configs_text_checked_before_the_runtime():
    # config= pins a config by the text kjit.prepare returns: a text that is no config of the op
    # is refused naming the word, and a value that is no str naming config, all before the
    # runtime; a config's text reaches the runtime (no driver here).
    cc = cuda_capsule
    def lin():  # fresh capsules: a call consumes its own
        return cc(16, 32), cc(64, 32), cc(64), cc(64), cc(64), cc(64), 8
    calls = [
        lambda c: kjit.group_norm(cc(2, 8, 4), 4, out=cc(2, 8, 4), config=c),
        lambda c: kjit.prepare(kjit.group_norm, cc(2, 8, 4), 4, config=c),
        lambda c: kjit.layer_norm(cc(4, 8), out=cc(4, 8), config=c),
        lambda c: kjit.rms_norm(cc(4, 8), out=cc(4, 8), config=c),
        lambda c: kjit.prepare("rms_norm", cc(4, 8), residual=cc(4, 8), config=c),
        lambda c: kjit.linear_gn_min(*lin(), out=cc(1, 64, 16, 1), config=c),
        lambda c: kjit.prepare(kjit.linear_gn_min, *lin(), config=c),
    ]
    for call in calls:
        with pytest.raises(kjit.InvalidArgumentError, match="config: unknown key") as e:
            call("threads=256 team=32 vec=4 iters=1 cluster=1 slice=32 sub=1 seq=1 tiles=4")
        assert e.value.field == "config" and e.value.code == "invalid_argument"
        with pytest.raises(kjit.ArgumentTypeError, match="config must be a config's text") as e:
            call(256)
        assert e.value.field == "config"
        with pytest.raises(kjit.InvalidArgumentError, match="byte 0 at offset 11"):
            call("threads=256\0 team=32")  # the NUL reaches the parser
        with pytest.raises(kjit.InvalidArgumentError, match="config is not encodable") as e:
            call("threads=\ud800")  # a lone surrogate: no UTF-8 form
        assert e.value.field == "config"
    # Linear-GN-min's text may name the GEMM after the config (kjit.prepare's text before
    # "; kernel"); prepare's whole report is refused, not partly read.
    lgm = "threads=256 slice=32 sub=4 seq=2 vec=4"
    gemm = "; GEMM id=21 tile=20 stages=8 splitk=1 reduction=0 swizzle=0 cluster=0"
    for call in calls[-2:]:
        with pytest.raises(kjit.InvalidArgumentError, match="is its report, not a pin") as e:
            call(lgm + gemm + "; kernel kjit::gn_min<...>; GEMM from heuristic")
        assert e.value.field == "config"
        with pytest.raises(kjit.InvalidArgumentError, match="stages=<integer> is missing"):
            call(lgm + "; GEMM id=21 tile=20")
    _no_driver_yet(lambda: kjit.prepare(kjit.linear_gn_min, *lin(), config=lgm + gemm))
    _no_driver_yet(lambda: kjit.layer_norm(cc(4, 8), out=cc(4, 8),
                                           config="threads=32 team=8 vec=1 iters=1 cluster=1"))
    _no_driver_yet(lambda: kjit.group_norm(cc(2, 8, 4), 4, out=cc(2, 8, 4),
                                           config="threads=256 team=256 vec=4 iters=1 cluster=1"))


def test_kernel_checks_its_template_arguments_and_source_before_the_runtime():
    with pytest.raises(kjit.InvalidArgumentError, match="values must fit a 64-bit int"):
        kjit.kernel(GOOD, "scale", types=["float32"], values=[2**70])
    with pytest.raises(kjit.InvalidArgumentError, match="absolute") as e:
        kjit.kernel('#include "/etc/hostname"\n' + GOOD, "scale", types=["float32"], values=[3])
    assert e.value.field == "source"
    with pytest.raises(kjit.InvalidArgumentError, match="values must be ints or bools"):
        kjit.kernel(GOOD, "scale", types=["float32"], values=[2.5])


def test_sum_out_needs_a_residual():
    # sum_out receives x + residual: without a residual it would be left unwritten.
    cc = cuda_capsule
    for fn in (kjit.layer_norm, kjit.rms_norm):
        with pytest.raises(kjit.InvalidArgumentError, match="sum_out .*needs a residual") as e:
            fn(cc(4, 8), out=cc(4, 8), sum_out=cc(4, 8))
        assert e.value.field == "sum_out" and e.value.code == "invalid_argument"
        with pytest.raises(kjit.InvalidArgumentError, match="sum_out .*needs a residual"):
            fn(f32(4, 8), sum_out=f32(4, 8))  # before the device, as every rule
        with pytest.raises(kjit.InvalidArgumentError, match="sum_out .*needs a residual"):
            kjit.prepare(fn, cc(4, 8), sum_out=cc(4, 8))
    # The native call refuses it too (as the C ABI does).
    with pytest.raises(kjit.InvalidArgumentError, match="sum_out is given without a residual") as e:
        kjit._native.layer_norm(0, cc(4, 8), None, cc(4, 8), cc(4, 8), None, None, 1e-5, 0, False,
                                0)
    assert e.value.field == "sum_out"


def test_sum_out_needs_a_residual_inside_torch_compile(monkeypatch):
    from kjit import _ops
    monkeypatch.setattr(_ops, "_compiling", lambda: True)
    monkeypatch.setattr(_ops, "_torch_ops", None)  # never reached
    with pytest.raises(kjit.InvalidArgumentError, match="sum_out .*needs a residual"):
        kjit.layer_norm(f32(4, 8), out=f32(4, 8), sum_out=f32(4, 8))


def test_source_str_or_path_rule(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # A str of one line ending in a source suffix is a path, whether or not the file exists:
    # a missing one is an IoError naming it, not NVRTC compiling its name.
    for missing in ("kernels/scale.cu", str(tmp_path / "none.cuh"), "Missing.CU"):
        with pytest.raises(kjit.IoError, match="No such file or directory") as e:
            kjit.compile(missing, "scale", types=["float32"], values=[2])
        assert missing in str(e.value) and e.value.code == "io"
    (tmp_path / "scale.cu").write_text(GOOD)
    r = kjit.compile("scale.cu", "scale", types=["float32"], values=[2])
    assert r["instantiation"] == "scale<float, 2>"
    # A Path (any os.PathLike) is always a path, whatever its name.
    (tmp_path / "scale.txt").write_text(GOOD)
    r = kjit.compile(pathlib.Path("scale.txt"), "scale", types=["float32"], values=[2])
    assert r["instantiation"] == "scale<float, 2>"
    with pytest.raises(kjit.IoError, match="No such file"):
        kjit.compile(pathlib.Path("scale.text"), "scale")
    # Any other str is source text; one naming an existing file is refused, not compiled.
    with pytest.raises(kjit.InvalidArgumentError, match="pathlib.Path") as e:
        kjit.compile("scale.txt", "scale", types=["float32"], values=[2])
    assert e.value.field == "source"
    r = kjit.compile('extern "C" __global__ void k() {}', "k")  # one line of text
    assert r["instantiation"] == "k"
    # One line of code that happens to end in a source suffix is text: it has a body ('{').
    r = kjit.compile('extern "C" __global__ void k2() {} // from k2.cu', "k2")
    assert r["instantiation"] == "k2"
    with pytest.raises(kjit.InvalidArgumentError, match="existing file or folder"):
        kjit.compile(".", "k")  # a folder, meant as a path
    with pytest.raises(kjit.InvalidArgumentError, match="source must be CUDA C.. text or a path"):
        kjit.compile(GOOD.encode(), "scale")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="no /proc")
def test_pseudo_files_are_refused_not_read_as_empty():
    # A regular file by stat, of size 0, that reads as text: /proc's files are made as they are
    # read. Refused as FIFOs and devices are, rather than read as an empty source.
    with pytest.raises(kjit.IoError, match=r"/proc/self/status.*reads as more than the 0 bytes") as e:
        kjit.compile(pathlib.Path("/proc/self/status"), "k")
    assert e.value.code == "io"


def test_an_empty_regular_file_is_still_read(tmp_path):
    empty = tmp_path / "empty.cuh"
    empty.write_text("")
    with pytest.raises(kjit.CompileError):  # read as empty text: NVRTC finds no k
        kjit.compile(empty, "k")


def test_bools_are_not_counts_or_sizes():
    x, w, v = f32(2, 8, 4), f32(64, 32), f32(64)
    for b in (True, np.True_):
        with pytest.raises(kjit.InvalidArgumentError, match="num_groups = True is a bool") as e:
            kjit.group_norm(x, b)
        assert e.value.field == "num_groups"
        with pytest.raises(kjit.InvalidArgumentError, match="num_groups = True is a bool"):
            kjit.prepare(kjit.group_norm, x, b)
        with pytest.raises(kjit.InvalidArgumentError, match="num_groups = True is a bool"):
            kjit.linear_gn_min(f32(16, 32), w, v, v, v, v, b)
        with pytest.raises(kjit.InvalidArgumentError, match="num_groups = True is a bool"):
            kjit.prepare("linear_gn_min", f32(16, 32), w, v, v, v, v, b)
    # normalized_shape=True would equal a last dimension of 1.
    for ns in (True, (True,), [1.0]):
        with pytest.raises(kjit.InvalidArgumentError, match="normalized_shape") as e:
            kjit.layer_norm(f32(4, 1), ns)
        assert e.value.field == "normalized_shape"
    with pytest.raises(kjit.InvalidArgumentError, match="eps = True is a bool") as e:
        kjit.group_norm(x, 4, eps=True)
    assert e.value.field == "eps"
    with pytest.raises(kjit.InvalidArgumentError, match="eps = False is a bool"):
        kjit.rms_norm(f32(4, 8), eps=False)
    # A kernel's bool template values are bools (template <bool B>), not refused.
    r = kjit.compile("template <bool B> __global__ void k() {}", "k", values=[True])
    assert r["instantiation"] == "k<true>"


def test_kernel_launch_sizes_are_checked():
    from kjit import _kernels
    launched = []

    class Native:
        def launch(self, *a):
            launched.append(a)

    k = _kernels.Kernel.__new__(_kernels.Kernel)
    k._k = Native()
    for bad, why in ((True, "shared = True is a bool"), (-1, "shared = -1"),
                     (2**32, "shared = 4294967296"), (1.5, "shared must be an int")):
        with pytest.raises(kjit.InvalidArgumentError, match=why) as e:
            k(1, 1, shared=bad)
        assert e.value.field == "shared"
    k(1, 1, shared=np.int64(128))
    assert launched == [(1, 1, [], 128, 0)]


def test_unencodable_source_and_odd_normalized_shapes_are_invalid_arguments(tmp_path):
    # A lone surrogate has no UTF-8 form: neither NVRTC's text nor a file name can hold it.
    for src in ('__global__ void k() {} \ud800', "\ud800.cu"):
        with pytest.raises(kjit.InvalidArgumentError) as e:
            kjit.compile(src, "k")
        assert e.value.field == "source"
    with pytest.raises(kjit.InvalidArgumentError, match="cannot be a file name"):
        kjit.compile(pathlib.Path(str(tmp_path) + "/\ud800.cu"), "k")

    class X:  # what _check_normalized_shape reads of x
        shape, dtype = (4, 8), "float32"

    for ns in (np.array(8), b"\x08", bytearray(b"\x08"), "8"):
        with pytest.raises(kjit.InvalidArgumentError, match="normalized_shape must be") as e:
            kjit._ops._check_normalized_shape("kjit.layer_norm", X(), ns)
        assert e.value.field == "normalized_shape"
    for ns in (8, (8,), [8], np.array([8]), np.int64(8)):
        kjit._ops._check_normalized_shape("kjit.layer_norm", X(), ns)
