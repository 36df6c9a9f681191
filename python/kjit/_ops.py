"""kjit's built-in ops on DLPack tensors: GroupNorm (+ activation), Linear -> GroupNorm -> min ->
+ bias, LayerNorm and RMSNorm (+ residual, + activation), and kjit.prepare.

Each call checks its arguments in the native module (dtype, shape, layout, then the device: a
CPU tensor is an InvalidArgumentError, also a ValueError, naming the argument), allocates the
output like the input unless out= is given, and launches on stream= or else PyTorch's current
stream (torch tensors) or else the legacy default stream. Names (activation, precision) are
parsed once and cached. Inside torch.compile the calls become kjit's torch custom ops
(kjit.torch), so a compiled graph calls them without a graph break.
"""

import numbers
import operator
import sys

from . import _kjit as _native
from . import _tensors
from ._errors import ArgumentTypeError, InvalidArgumentError
from ._tensors import (dl, empty_f32, empty_like, is_bool, is_torch, plain, stream_for,
                       stream_handle)

# Set by kjit.torch when it registers the custom ops: torch.compiler.is_compiling and
# torch.ops.kjit. While dynamo traces, the public functions call the custom ops instead.
_compiling = None
_torch_ops = None

# The package, for kjit.autotune (this module is imported while it is being made).
_pkg = sys.modules[__name__.rpartition(".")[0]]

_activations = {}
_precisions = {}
# torch.finfo(dtype).eps, F.rms_norm's eps=None, by dtype name.
_finfo_eps = {"float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}


def _autotune():
    a = sys.modules["kjit"].autotune
    if a is True or a is False:
        return a
    raise InvalidArgumentError("kjit.autotune must be True or False, not %r" % (a,),
                               field="autotune")


def _traced_config(op, config):
    """config= inside torch.compile, where the custom op's schema would report a wrong type in
    its own words: the ArgumentTypeError the native call raises outside it."""
    if config is not None and type(config) is not str:
        raise ArgumentTypeError("%s: config must be a config's text (str) or None, not %s"
                                % (op, type(config).__name__), field="config")
    return config


def _activation(name):
    code = _activations.get(name) if isinstance(name, str) else None
    if code is None:
        if not isinstance(name, str):
            raise ArgumentTypeError("activation must be a name ('silu', 'none', 'gelu', "
                                    "'gelu_tanh', 'relu'), not %r" % (name,), field="activation")
        code = _activations[name] = _native.parse_activation(name)
    return code


def _precision(name):
    code = _precisions.get(name) if isinstance(name, str) else None
    if code is None:
        if not isinstance(name, str):
            raise ArgumentTypeError("precision must be a name ('fp32', 'tf32', 'bf16-inputs', "
                                    "'fp32x3'), not %r" % (name,), field="precision")
        code = _precisions[name] = _native.parse_precision(name)
    return code


def _check_scalars(op, ints, floats):
    """After the native module refused an argument's type: an ArgumentTypeError (a TypeError)
    that names the argument (nanobind's names only the private native function's signature)."""
    for name, v in ints:
        try:
            i = operator.index(v)
        except TypeError:
            raise ArgumentTypeError("%s: %s must be an int, not %s (%r)"
                                    % (op, name, type(v).__name__, v), field=name) from None
        if not -2**63 <= i < 2**63:
            raise InvalidArgumentError("%s: %s = %d does not fit a 64-bit int" % (op, name, i),
                                       field=name)
    for name, v in floats:
        try:
            if isinstance(v, (str, bytes)):
                raise TypeError(v)  # float("1e-5") parses; the native module takes no text
            float(v)
        except (TypeError, ValueError):
            raise ArgumentTypeError("%s: %s must be a float, not %s (%r)"
                                    % (op, name, type(v).__name__, v), field=name) from None
        except OverflowError:
            raise InvalidArgumentError("%s: %s = %r does not fit a float" % (op, name, v),
                                       field=name) from None


def _no_bools(op, ints=(), floats=()):
    """A bool is an int to Python (and numpy's converts to one): the native module would read
    num_groups=True as one group and eps=True as 1.0. A bool there is a mistake, refused by name.
    Callers test `type(v) is not int` (float) first, so the hot path pays one type test."""
    for kind, pairs in (("an int", ints), ("a float", floats)):
        for name, v in pairs:
            if is_bool(v):
                raise InvalidArgumentError("%s: %s = %s is a bool; it must be %s"
                                           % (op, name, bool(v), kind), field=name)


def _refuse_sum_out(op):
    # The C ABI refuses it too: without a residual nothing would write sum_out.
    raise InvalidArgumentError(
        "%s: sum_out is given without residual: sum_out receives x + residual, so it needs a "
        "residual (pass residual=, or leave sum_out=None)" % op, field="sum_out")


def _checked(op, ints, floats, fn, *args):
    """fn(*args) (a native call), its TypeError for a scalar argument rewritten to name it."""
    try:
        return fn(*args)
    except TypeError:
        _check_scalars(op, ints, floats)
        raise


def _explain(check):
    """After allocating an output failed (e.g. a zero-stride x of petabytes): `check` runs the
    native checks without an output, so that a bad argument is named rather than the allocator's
    error reported. When every argument is fine (the refusal is about the missing output), the
    caller re-raises the allocation error."""
    try:
        check()
    except InvalidArgumentError as bad:
        if bad.field not in ("out", "sum_out"):
            raise
    except TypeError:
        pass


def _into(out, y):
    """Inside torch.compile the custom ops return new tensors (they mutate nothing, so that the
    graph needs no functionalization): out= gets the result copied in, traced as one copy_."""
    if out is None:
        return y
    out.copy_(y)
    return out


# --- GroupNorm ---------------------------------------------------------------------------------

def group_norm(x, num_groups, weight=None, bias=None, eps=1e-5, activation="silu", *, out=None,
               stream=None, config=None):
    """act(F.group_norm(x, num_groups, weight, bias, eps)) for x of shape [N, C, *] (any rank >= 2),
    contiguous (NCHW) or channels_last (NHWC), float32/float16/bfloat16 (statistics in fp32);
    weight and bias [C] of x's dtype or float32, or None. activation: "silu" (default), "none",
    "gelu", "gelu_tanh", "relu". config: None (the heuristic's, or autotuning's), or a config's
    text as kjit.prepare returns it, pinned. Returns out (allocated like x unless given)."""
    if _compiling is not None and _compiling():  # the custom op's schema types its arguments
        return _into(out, _torch_ops.group_norm(x, num_groups, weight, bias, eps, activation,
                                                _traced_config("kjit.group_norm", config)))
    if type(num_groups) is not int or type(eps) is not float:
        _no_bools("kjit.group_norm", (("num_groups", num_groups),), (("eps", eps),))
    return _group_norm(x, num_groups, weight, bias, eps, activation, out, stream, config)


def _group_norm(x, num_groups, weight, bias, eps, activation, out, stream, config=None):
    # The hot path: each helper call saved here is ~50 ns of a call that costs ~10 us in all.
    try:
        act = _activations[activation]
    except (KeyError, TypeError):  # a name not seen yet, or no name at all
        act = _activation(activation)
    auto = _pkg.autotune
    if auto is not True and auto is not False:
        auto = _autotune()  # raises
    tt = _tensors._torch_tensor
    if (isinstance(x, tt) if tt is not None else is_torch(x)):
        if out is None:
            try:
                out = sys.modules["torch"].empty_like(x)
            except Exception:
                _explain(lambda: _native.group_norm(dl(x), None, dl(weight), dl(bias), num_groups,
                                                    eps, act, auto, 0, config))
                raise
        if stream is None:
            dev = x.get_device()
            s = _tensors._raw_stream(dev) if dev >= 0 else 0
        else:
            s = stream_handle(stream)
        xd, od = dl(x), dl(out)
        wd = None if weight is None else dl(weight)
        bd = None if bias is None else dl(bias)
    else:
        if out is None:
            try:
                out = empty_like(x)
            except Exception:
                _explain(lambda: _native.group_norm(x, None, weight, bias, num_groups, eps, act,
                                                    auto, 0, config))
                raise
        s = 0 if stream is None else stream_handle(stream)
        xd, od, wd, bd = x, out, weight, bias
    try:
        _native.group_norm(xd, od, wd, bd, num_groups, eps, act, auto, s, config)
    except TypeError:
        _check_scalars("kjit.group_norm", (("num_groups", num_groups),), (("eps", eps),))
        raise
    return out


def _prepare_group_norm(x, num_groups, weight=None, bias=None, eps=1e-5, activation="silu", *,
                        out=None, stream=None, config=None):
    # Every argument the call takes is checked as the call checks it (out= too), all before
    # the device's runtime is made.
    ints, floats = (("num_groups", num_groups),), (("eps", eps),)
    _no_bools("kjit.prepare(group_norm)", ints, floats)
    x, out, weight, bias = plain(x), plain(out), plain(weight), plain(bias)
    return _checked("kjit.prepare(group_norm)", ints, floats, _native.prepare_group_norm, x, out,
                    weight, bias, num_groups, eps, _activation(activation), _autotune(),
                    stream_for(x, stream), config)


# --- Linear -> GroupNorm -> min -> + bias --------------------------------------------------------

def linear_gn_min(x, weight, linear_bias, gamma, beta, bias, num_groups, eps=1e-5,
                  precision=None, *, out=None, stream=None, config=None):
    """torch.min(GroupNorm(x @ weight.T + linear_bias), dim=1, keepdim=True)[0] + bias, as the
    seed module computes it: x [M, K], weight [N, K] (float32; bfloat16 with
    precision="bf16-inputs") or a kjit.LinearGnMinWeights from kjit.prepack_linear_gn_min,
    linear_bias, gamma, beta [N] and bias (N elements, e.g. (1, N, 1, 1)) float32. Returns
    PyTorch's broadcast result, shape [1, N, M, 1], float32. precision: "fp32" (strict, the
    default for a weight tensor), "tf32", "bf16-inputs" or "fp32x3" (split precision,
    docs/OPS.md); a packed weight's own by default, and any other is refused. config: None, or
    kjit.prepare's text before "; kernel" (the fused kernel's config, then "; GEMM " and the
    cuBLASLt algorithm), pinned; the config alone pins the kernel only. Inside
    torch.compile, a call with a packed weight runs outside the compiled graph."""
    if (type(num_groups) is not int or type(eps) is not float) and not (
            _compiling is not None and _compiling()):  # the custom op's schema types them
        _no_bools("kjit.linear_gn_min", (("num_groups", num_groups),), (("eps", eps),))
    if isinstance(weight, _native.LinearGnMinWeights):
        return _linear_gn_min(x, weight, linear_bias, gamma, beta, bias, num_groups, eps,
                              precision, out, stream, config)
    if precision is None:
        precision = "fp32"
    if _compiling is not None and _compiling():
        return _into(out, _torch_ops.linear_gn_min(x, weight, linear_bias, gamma, beta, bias,
                                                   num_groups, eps, precision,
                                                   _traced_config("kjit.linear_gn_min", config)))
    return _linear_gn_min(x, weight, linear_bias, gamma, beta, bias, num_groups, eps, precision,
                          out, stream, config)


def prepack_linear_gn_min(weight, precision="fp32x3", *, stream=None):
    """weight [N, K] float32 (CUDA) split once for `precision` ("fp32x3"; the other precisions
    use the weight as it is and are refused), as inference runtimes prepack constant weights.
    Returns a kjit.LinearGnMinWeights to pass as kjit.linear_gn_min's weight: a copy, so a
    changed weight needs a new pack; it records N, K, the precision and the device, and a call
    for another problem is refused. The split runs on stream= (else PyTorch's current stream for
    a torch tensor, else the legacy default stream): a call on another stream must wait for it."""
    prec = _precision("fp32x3" if precision is None else precision)
    w = plain(weight)
    return _native.prepack_linear_gn_min(dl(w), prec, stream_for(w, stream))


def _lgm_sizes(x, weight):
    if isinstance(weight, _native.LinearGnMinWeights):
        xs = getattr(x, "shape", ())
        return (int(xs[0]), int(xs[1]), weight.N) if len(xs) == 2 else None
    xs, ws = getattr(x, "shape", ()), getattr(weight, "shape", ())
    if len(xs) == 2 and len(ws) == 2:
        return int(xs[0]), int(xs[1]), int(ws[0])
    return None  # the native call names what is wrong


def _lgm_buffers(x, weight, num_groups, prec, packed, out, stream):
    """The output (unless given) and, for a torch tensor on the current stream, the call's
    scratch memory from PyTorch's allocator on the stream the call runs on: inside a CUDA graph
    capture it comes from the graph's pool, so a captured call needs no kjit workspace reserved
    for the capture stream."""
    sizes = _lgm_sizes(x, weight)
    if sizes is None:
        return out, None  # the native call names what is wrong
    M, K, N = sizes
    if out is None:
        out = empty_f32(x, (1, N, M, 1))  # the result is float32 whatever gamma is
    if not (stream is None and is_torch(x) and x.get_device() >= 0 and isinstance(num_groups, int)
            and num_groups > 0):
        return out, None
    try:
        nbytes = _native.linear_gn_min_workspace_size(M, K, N, num_groups, prec, packed)
    except TypeError:
        _check_scalars("kjit.linear_gn_min", (("num_groups", num_groups),), ())
        raise
    torch = sys.modules["torch"]
    return out, torch.empty(nbytes, dtype=torch.uint8, device=x.device)


def _linear_gn_min(x, weight, linear_bias, gamma, beta, bias, num_groups, eps, precision, out,
                   stream, config=None):
    packed = isinstance(weight, _native.LinearGnMinWeights)
    if precision is None and packed:
        prec = weight._precision_code
    else:
        try:
            prec = _precisions[precision]
        except (KeyError, TypeError):  # a name not seen yet, or no name at all
            prec = _precision(precision)
    call = _native.linear_gn_min_packed if packed else _native.linear_gn_min
    try:
        out, workspace = _lgm_buffers(x, weight, num_groups, prec, packed, out, stream)
    except Exception:
        _explain(lambda: call(dl(x), weight if packed else dl(weight), dl(linear_bias), dl(gamma),
                              dl(beta), dl(bias), None, None, num_groups, eps, prec, False, 0,
                              config))
        raise
    s = stream_for(x, stream)
    try:
        call(dl(x), weight if packed else dl(weight), dl(linear_bias), dl(gamma), dl(beta),
             dl(bias), dl(out), dl(workspace), num_groups, eps, prec, _autotune(), s, config)
    except TypeError:
        _check_scalars("kjit.linear_gn_min", (("num_groups", num_groups),), (("eps", eps),))
        raise
    return out


def _prepare_linear_gn_min(x, weight, linear_bias, gamma, beta, bias, num_groups, eps=1e-5,
                           precision=None, *, out=None, stream=None, config=None):
    ints, floats = (("num_groups", num_groups),), (("eps", eps),)
    _no_bools("kjit.prepare(linear_gn_min)", ints, floats)
    x, weight, linear_bias, gamma, beta, bias, out = (
        plain(t) for t in (x, weight, linear_bias, gamma, beta, bias, out))
    if precision is None:
        packed = isinstance(weight, _native.LinearGnMinWeights)
        prec = weight._precision_code if packed else _precision("fp32")
    else:
        prec = _precision(precision)
    return _checked("kjit.prepare(linear_gn_min)", ints, floats, _native.prepare_linear_gn_min, x,
                    weight, linear_bias, gamma, beta, bias, out, num_groups, eps, prec,
                    _autotune(), stream_for(x, stream), config)


# --- LayerNorm and RMSNorm -----------------------------------------------------------------------

def _all_ints(dims):
    # True == 1 and 8.0 == 8: a bool or a float would pass the comparison with x's width. A loop
    # (not any() of a generator) and type tests only: torch.compile traces this.
    for d in dims:
        if type(d) is not int and (is_bool(d) or (isinstance(d, numbers.Number)
                                                  and not isinstance(d, numbers.Integral))):
            return False
    return True


def _check_normalized_shape(op, x, normalized_shape):
    # Plain attribute and tuple work only: torch.compile traces this (x.shape is a torch.Size).
    if normalized_shape is None:
        return
    if type(normalized_shape) is int:  # the common case, and the one torch.compile traces
        ns = (normalized_shape,)
    elif isinstance(normalized_shape, numbers.Integral) and not is_bool(normalized_shape):
        ns = (normalized_shape,)  # an int, numpy's too
    elif isinstance(normalized_shape, (tuple, list)) or (
            hasattr(normalized_shape, "__len__") and getattr(normalized_shape, "ndim", 1) != 0
            and not isinstance(normalized_shape, (str, bytes, bytearray))):
        ns = tuple(normalized_shape)  # a tuple, list, torch.Size or 1-d array (not a 0-d one)
    else:
        ns = None
    if ns is None or not _all_ints(ns):
        raise ArgumentTypeError("%s: normalized_shape must be an int, a tuple of ints or None, "
                                "not %r" % (op, normalized_shape), field="normalized_shape")
    shape = getattr(x, "shape", None)
    if shape is None or len(shape) == 0:
        return  # x itself is wrong: the call names it
    width = shape[-1]
    if len(ns) == 1 and ns[0] == width:
        return
    raise InvalidArgumentError(
        "%s: normalized_shape %r: kjit normalizes over the last dimension only, so it must be "
        "(%d,) or None" % (op, tuple(ns), width), field="normalized_shape")


def _norm(kind, x, weight, bias, eps, residual, activation, out, sum_out, stream, config=None):
    try:
        act = _activations[activation]
    except (KeyError, TypeError):  # a name not seen yet, or no name at all
        act = _activation(activation)
    try:
        if out is None:
            out = empty_like(x)
        if residual is not None and sum_out is None:
            sum_out = empty_like(x)
    except Exception:
        _explain(lambda: _native.layer_norm(kind, dl(x), dl(residual), None, None, dl(weight),
                                            dl(bias), eps, act, False, 0, config))
        raise
    s = stream_for(x, stream)
    try:
        _native.layer_norm(kind, dl(x), dl(residual), dl(out), dl(sum_out), dl(weight), dl(bias),
                           eps, act, _autotune(), s, config)
    except TypeError:
        _check_scalars("kjit.layer_norm" if kind == 0 else "kjit.rms_norm", (), (("eps", eps),))
        raise
    return out if residual is None else (out, sum_out)


def layer_norm(x, normalized_shape=None, weight=None, bias=None, eps=1e-5, *, residual=None,
               activation="none", out=None, sum_out=None, stream=None, config=None):
    """act(F.layer_norm(s, [width], weight, bias, eps)) over x's last dimension, with
    s = x + residual when residual is given (then returns (y, s)); x contiguous, any rank >= 1.
    sum_out= (where s goes) needs residual=. config: None (the heuristic's, or autotuning's), or
    a config's text as kjit.prepare returns it, pinned."""
    _check_normalized_shape("kjit.layer_norm", x, normalized_shape)
    if sum_out is not None and residual is None:
        _refuse_sum_out("kjit.layer_norm")
    if _compiling is not None and _compiling():  # the custom op's schema types its arguments
        config = _traced_config("kjit.layer_norm", config)
        if residual is None:
            return _into(out, _torch_ops.layer_norm(x, weight, bias, eps, activation, config))
        y, s = _torch_ops.add_layer_norm(x, residual, weight, bias, eps, activation, config)
        return _into(out, y), _into(sum_out, s)
    if type(eps) is not float:
        _no_bools("kjit.layer_norm", (), (("eps", eps),))
    return _norm(0, x, weight, bias, eps, residual, activation, out, sum_out, stream, config)


def _rms_eps(x, eps):
    if eps is not None:
        return eps
    name = str(getattr(x, "dtype", "")).rsplit(".", 1)[-1]
    return _finfo_eps.get(name, _finfo_eps["float32"])


def rms_norm(x, normalized_shape=None, weight=None, eps=None, *, residual=None,
             activation="none", out=None, sum_out=None, stream=None, config=None):
    """act(F.rms_norm(s, [width], weight, eps)) over x's last dimension (eps=None: the dtype's
    machine epsilon, as PyTorch), with s = x + residual when given (then returns (y, s)).
    sum_out= (where s goes) needs residual=. config: as kjit.layer_norm's."""
    _check_normalized_shape("kjit.rms_norm", x, normalized_shape)
    if sum_out is not None and residual is None:
        _refuse_sum_out("kjit.rms_norm")
    if _compiling is not None and _compiling():  # the custom op's schema types its arguments
        eps = _rms_eps(x, eps)
        config = _traced_config("kjit.rms_norm", config)
        if residual is None:
            return _into(out, _torch_ops.rms_norm(x, weight, eps, activation, config))
        y, s = _torch_ops.add_rms_norm(x, residual, weight, eps, activation, config)
        return _into(out, y), _into(sum_out, s)
    if type(eps) is not float and eps is not None:
        _no_bools("kjit.rms_norm", (), (("eps", eps),))
    eps = _rms_eps(x, eps)
    return _norm(1, x, weight, None, eps, residual, activation, out, sum_out, stream, config)


def _prepare_norm(kind, op, x, normalized_shape, weight, bias, eps, residual, activation, out,
                  sum_out, stream, config):
    # As the call checks them, all before the runtime: out=, sum_out= and stream= too (the
    # stream gets the workspace of a cooperative plan, few rows too long for a cluster). Errors
    # name kjit.prepare(<op>).
    op = op.replace("kjit.", "kjit.prepare(") + ")"
    _check_normalized_shape(op, x, normalized_shape)
    if sum_out is not None and residual is None:
        _refuse_sum_out(op)
    _no_bools(op, (), (("eps", eps),))
    x, residual, out, sum_out, weight, bias = (
        plain(t) for t in (x, residual, out, sum_out, weight, bias))
    eps = _rms_eps(x, eps) if kind == 1 else eps
    return _checked(op, (), (("eps", eps),), _native.prepare_layer_norm, kind, x, residual, out,
                    sum_out, weight, bias, eps, _activation(activation), _autotune(),
                    stream_for(x, stream), config)


def _prepare_layer_norm(x, normalized_shape=None, weight=None, bias=None, eps=1e-5, *,
                        residual=None, activation="none", out=None, sum_out=None, stream=None,
                        config=None):
    return _prepare_norm(0, "kjit.layer_norm", x, normalized_shape, weight, bias, eps, residual,
                         activation, out, sum_out, stream, config)


def _prepare_rms_norm(x, normalized_shape=None, weight=None, eps=None, *, residual=None,
                      activation="none", out=None, sum_out=None, stream=None, config=None):
    return _prepare_norm(1, "kjit.rms_norm", x, normalized_shape, weight, None, eps, residual,
                         activation, out, sum_out, stream, config)


# --- prepare -----------------------------------------------------------------------------------

_preparers = {
    group_norm: _prepare_group_norm,
    linear_gn_min: _prepare_linear_gn_min,
    layer_norm: _prepare_layer_norm,
    rms_norm: _prepare_rms_norm,
}
_preparers.update({f.__name__: p for f, p in list(_preparers.items())})


def prepare(op, *args, **kwargs):
    """Compile and load what op(*args, **kwargs) launches, and give its stream the workspace it
    needs, without running it: a later call, also one captured into a CUDA graph, compiles and
    allocates nothing (a call that would compile inside a capture raises CaptureCompileError).
    op: kjit.group_norm, kjit.linear_gn_min, kjit.layer_norm, kjit.rms_norm (or their names).
    Returns a description of the plan chosen: the config's text, which the op's config= takes to
    pin it (Linear-GN-min: the fused kernel's config and "; GEMM <algorithm>", the part config=
    takes, then "; kernel ...; GEMM from ...")."""
    prep = _preparers.get(op) if isinstance(op, str) or callable(op) else None
    if prep is None:
        raise InvalidArgumentError(
            "kjit.prepare: op must be one of %s, not %r"
            % (", ".join(sorted(k for k in _preparers if isinstance(k, str))), op), field="op")
    return prep(*args, **kwargs)
