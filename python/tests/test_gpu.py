"""GPU tests (skipped, with the reason, without a GPU or PyTorch): kjit's ops and user kernels on
torch tensors against PyTorch in float64, layouts, streams, torch.compile, CUDA graphs and the
two seed models. KJIT_TEST_SEED picks the random shapes (printed by each random test)."""

import os
import random
import sys

import pytest

import kjit

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python")
TOL = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 4e-2}


def seed():
    s = int(os.environ.get("KJIT_TEST_SEED", random.randrange(1 << 30)))
    print("KJIT_TEST_SEED=%d" % s)
    return s


def act64(torch, name, z):
    F = torch.nn.functional
    return {"none": lambda v: v, "silu": F.silu, "relu": F.relu,
            "gelu": F.gelu, "gelu_tanh": lambda v: F.gelu(v, approximate="tanh")}[name](z)


def gn_reference(torch, x, groups, w, b, eps, act):
    """F.group_norm's definition in float64, written out: F.group_norm itself refuses groups of
    one element ("more than 1 value per channel when training"), which kjit normalizes to 0."""
    xd = x.double()
    g = xd.reshape(xd.shape[0], groups, -1)
    mean = g.mean(dim=2, keepdim=True)
    var = g.var(dim=2, unbiased=False, keepdim=True)
    z = ((g - mean) / torch.sqrt(var + eps)).reshape(xd.shape)
    affine_shape = [1, xd.shape[1]] + [1] * (xd.dim() - 2)
    if w is not None:
        z = z * w.double().reshape(affine_shape)
    if b is not None:
        z = z + b.double().reshape(affine_shape)
    return act64(torch, act, z)


def random_gn_case(torch, rng):
    dtype = rng.choice([torch.float32, torch.float16, torch.bfloat16])
    groups = rng.choice([1, 2, 4, 8, 16, 32])
    C = groups * rng.choice([1, 2, 3, 4, 8, 16])
    N = rng.randint(1, 4)
    rank = rng.choice([0, 1, 2, 2, 3])
    spatial = [rng.randint(1, 40 if rank < 3 else 12) for _ in range(rank)]
    nhwc = rank >= 1 and rng.random() < 0.4
    pd = rng.choice([dtype, torch.float32])
    affine = rng.choice(["both", "weight", "bias", "none"])
    act = rng.choice(["none", "silu", "gelu", "gelu_tanh", "relu"])
    return dict(dtype=dtype, groups=groups, shape=[N, C] + spatial, nhwc=nhwc, pd=pd,
                affine=affine, act=act, eps=rng.choice([1e-5, 1e-3]))


def make_x(torch, shape, dtype, nhwc, gen):
    if not nhwc:
        return torch.randn(shape, generator=gen, device="cuda").mul_(2).add_(0.3).to(dtype)
    # NHWC memory for any rank: channels innermost, viewed with PyTorch's [N, C, *] shape.
    t = torch.randn([shape[0]] + shape[2:] + [shape[1]], generator=gen, device="cuda")
    return t.mul_(2).add_(0.3).to(dtype).movedim(-1, 1)


def test_group_norm_random_shapes(torch_cuda):
    torch = torch_cuda
    s = seed()
    rng = random.Random(s)
    gen = torch.Generator(device="cuda").manual_seed(s)
    failures = []
    for i in range(240):
        c = random_gn_case(torch, rng)
        x = make_x(torch, c["shape"], c["dtype"], c["nhwc"], gen)
        C = c["shape"][1]
        w = torch.randn(C, generator=gen, device="cuda").to(c["pd"]) \
            if c["affine"] in ("both", "weight") else None
        b = torch.randn(C, generator=gen, device="cuda").to(c["pd"]) \
            if c["affine"] in ("both", "bias") else None
        y = kjit.group_norm(x, c["groups"], w, b, c["eps"], activation=c["act"])
        assert y.shape == x.shape and y.dtype == x.dtype and y.stride() == x.stride()
        ref = gn_reference(torch, x, c["groups"], w, b, c["eps"], c["act"])
        tol = TOL[str(c["dtype"]).split(".")[-1]]
        if not torch.allclose(y.double(), ref, atol=tol, rtol=tol):
            failures.append((i, c, (y.double() - ref).abs().max().item()))
    assert not failures, failures[:5]


def test_group_norm_out_in_place_and_channels_last_4d(torch_cuda):
    torch = torch_cuda
    x = torch.randn(4, 64, 17, 9, device="cuda").to(memory_format=torch.channels_last)
    w, b = torch.randn(64, device="cuda"), torch.randn(64, device="cuda")
    ref = gn_reference(torch, x, 8, w, b, 1e-5, "silu")
    y = torch.full_like(x, float("nan"))
    assert kjit.group_norm(x, 8, w, b, out=y) is y
    assert torch.allclose(y.double(), ref, atol=1e-4, rtol=1e-4)
    kjit.group_norm(x, 8, w, b, out=x)  # in place
    assert torch.allclose(x.double(), ref, atol=1e-4, rtol=1e-4)
    with pytest.raises(kjit.InvalidArgumentError, match="out must have x's layout"):
        kjit.group_norm(x, 8, w, b, out=torch.empty(4, 64, 17, 9, device="cuda"))


def test_group_norm_non_default_streams(torch_cuda):
    torch = torch_cuda
    x = torch.zeros(2, 32, 64, 64, device="cuda")
    ref = gn_reference(torch, torch.arange(x.numel(), device="cuda").view_as(x).float().sin(),
                       4, None, None, 1e-5, "silu")
    torch.cuda.synchronize()
    for how in ("current", "explicit"):
        s = torch.cuda.Stream()  # non-blocking: a launch on another stream would not wait
        with torch.cuda.stream(s):
            torch.cuda._sleep(20_000_000)  # the fill below lands well after any wrong launch
            x.copy_(torch.arange(x.numel(), device="cuda").view_as(x).float().sin())
            if how == "current":
                y = kjit.group_norm(x, 4)
        if how == "explicit":
            y = torch.empty_like(x)
            kjit.group_norm(x, 4, out=y, stream=s)
        s.synchronize()
        assert torch.allclose(y.double(), ref, atol=1e-4, rtol=1e-4), how
        x.zero_()
        torch.cuda.synchronize()


def test_errors_on_the_device(torch_cuda):
    torch = torch_cuda
    with pytest.raises(ValueError, match="x is on cpu"):
        kjit.group_norm(torch.zeros(2, 8, 4), 4)
    x = torch.zeros(2, 8, 4, device="cuda")
    with pytest.raises(kjit.InvalidArgumentError, match="weight is on cpu"):
        kjit.group_norm(x, 4, torch.ones(8))
    with pytest.raises(kjit.InvalidArgumentError, match="x has dtype float64"):
        kjit.group_norm(x.double(), 4)
    with pytest.raises(kjit.InvalidArgumentError, match="neither contiguous"):
        kjit.group_norm(torch.zeros(2, 8, 8, device="cuda")[:, :, ::2], 4)


def test_torch_compile_has_no_graph_break(torch_cuda):
    torch = torch_cuda
    import kjit.torch  # noqa: F401

    def via_function(x, w, b):
        return kjit.group_norm(x, 8, w, b, activation="gelu") * 2 + 1

    def via_op(x, w, b):
        return torch.ops.kjit.group_norm(x, 8, w, b, 1e-5, "relu") - x

    def norms(x, r, w):
        y, s = kjit.rms_norm(x, None, w, 1e-6, residual=r)
        return kjit.layer_norm(y, x.shape[-1:], w, None) + s

    # An int normalized_shape and eps=0 take their own argument checks (the int fast path, the
    # bool refusals after the torch.compile branch): still one graph, nothing traced into them.
    def int_shape(x, w, b):
        return kjit.layer_norm(x, 64, w, b, eps=0.0) + kjit.rms_norm(x, 64, None, eps=0)

    x = torch.randn(4, 64, 8, 8, device="cuda")
    w, b = torch.randn(64, device="cuda"), torch.randn(64, device="cuda")
    for fn, args in ((via_function, (x, w, b)), (via_op, (x, w, b)),
                     (norms, (torch.randn(8, 64, device="cuda"), torch.randn(8, 64, device="cuda"),
                              w)),
                     (int_shape, (torch.randn(8, 64, device="cuda"), w, b))):
        torch._dynamo.reset()
        explain = torch._dynamo.explain(fn)(*args)
        assert explain.graph_break_count == 0, explain.break_reasons
        assert explain.graph_count == 1
        got = torch.compile(fn, fullgraph=True)(*args)
        assert torch.allclose(got, fn(*args), atol=1e-5, rtol=1e-5)
    xl = x.to(memory_format=torch.channels_last)
    got = torch.compile(via_function, fullgraph=True)(xl, w, b)
    assert torch.allclose(got, via_function(xl, w, b), atol=1e-5, rtol=1e-5)


def test_cuda_graph_capture_and_replay(torch_cuda):
    torch = torch_cuda
    x = torch.randn(8, 128, 40, 40, device="cuda")
    w, b = torch.randn(128, device="cuda"), torch.randn(128, device="cuda")
    xl, wl = torch.randn(64, 256, device="cuda"), torch.randn(512, 256, device="cuda")
    v = [torch.randn(512, device="cuda") for _ in range(4)]
    xn, wn = torch.randn(33, 1000, device="cuda"), torch.randn(1000, device="cuda")
    s = torch.cuda.Stream()
    plans = [kjit.prepare(kjit.group_norm, x, 16, w, b, stream=s),
             kjit.prepare(kjit.linear_gn_min, xl, wl, *v, 32, stream=s),
             kjit.prepare("layer_norm", xn, None, wn, None)]
    assert all(isinstance(p, str) and p for p in plans)
    before = kjit.cache_stats()
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        y = kjit.group_norm(x, 16, w, b)
        out = kjit.linear_gn_min(xl, wl, *v, 32)
        yn = kjit.layer_norm(xn, None, wn)
    after = kjit.cache_stats()
    for dev in after:  # nothing compiled or loaded inside the capture
        assert after[dev].get("kernels_loaded") == before.get(dev, {}).get("kernels_loaded")
    for t in (x, xl, xn):
        t.copy_(torch.randn_like(t))
    g.replay()
    torch.cuda.synchronize()
    assert torch.allclose(y.double(), gn_reference(torch, x, 16, w, b, 1e-5, "silu"),
                          atol=1e-4, rtol=1e-4)
    F = torch.nn.functional
    assert torch.allclose(yn.double(), F.layer_norm(xn.double(), (1000,), wn.double()),
                          atol=1e-4, rtol=1e-4)
    h = F.group_norm((xl.double() @ wl.double().T + v[0].double()), 32, v[1].double(),
                     v[2].double())
    want = torch.min(h, dim=1, keepdim=True)[0] + v[3].double().view(1, 512, 1, 1)
    assert out.shape == (1, 512, 64, 1)
    assert torch.allclose(out.double(), want, atol=1e-3, rtol=1e-3)  # fp32 GEMM over K=256


def test_a_long_row_captures_its_cooperative_plan_after_prepare(torch_cuda):
    # One row of 2^20: CTAs on every SM meet through a per-stream workspace. kjit.prepare gives
    # the capture stream that workspace; a pinned cooperative config (no fallback) then captures.
    torch = torch_cuda
    F = torch.nn.functional
    x = torch.randn(1, 1 << 20, device="cuda") * 3 + 2
    w, b = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
    s = torch.cuda.Stream()
    plan = kjit.prepare("layer_norm", x, None, w, b, stream=s)
    plan_r = kjit.prepare("rms_norm", x, None, w, stream=s)
    assert "coop=" in plan and "coop=" in plan_r
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        y = kjit.layer_norm(x, None, w, b, config=plan)
        r = kjit.rms_norm(y, None, w, config=plan_r)
    for _ in range(3):  # replays reuse the barrier words
        x.copy_(torch.randn_like(x) * 3 + 2)
        g.replay()
    torch.cuda.synchronize()
    want = F.layer_norm(x.double(), (1 << 20,), w.double(), b.double())
    assert torch.allclose(y.double(), want, atol=1e-4, rtol=1e-4)
    want_r = F.rms_norm(y.double(), (1 << 20,), w.double(), torch.finfo(torch.float32).eps)
    assert torch.allclose(r.double(), want_r, atol=1e-4, rtol=1e-4)


def lgm_reference(torch, x, w, v, groups):
    F = torch.nn.functional
    h = F.group_norm(x.double() @ w.double().T + v[0].double(), groups, v[1].double(),
                     v[2].double())
    return torch.min(h, dim=1, keepdim=True)[0] + v[3].double().view(1, -1, 1, 1)


def test_a_pinned_config_is_checked_on_empty_tensors(torch_cuda):
    # An empty batch launches nothing, but a config that cannot run the problem is refused as
    # the C++ and C calls refuse it (it would be as soon as rows arrived); one that can runs.
    torch = torch_cuda
    x = torch.empty(0, 96, device="cuda")
    short = "threads=32 team=8 vec=4 iters=2 cluster=1"  # holds 64 of the row's 96
    with pytest.raises(kjit.InvalidArgumentError, match="fewer than width") as e:
        kjit.layer_norm(x, config=short)
    assert e.value.field == "iters"
    assert kjit.layer_norm(x, config="threads=32 team=8 vec=4 iters=3 cluster=1").shape == (0, 96)
    xg = torch.empty(0, 8, 4, device="cuda")  # groups of 2 channels x 4: 8 values
    with pytest.raises(kjit.InvalidArgumentError, match=r"iters \* team \* cluster \* vec = 1 "):
        kjit.group_norm(xg, 4, config="threads=256 team=1 vec=1 iters=1 cluster=1")


def test_linear_gn_min_prepare_text_pins_the_config_and_the_gemm(torch_cuda):
    # kjit.prepare's text before "; kernel" pins the fused kernel's config and cuBLASLt's
    # algorithm: given back, the plan is the pinned one (GEMM from "pinned"), its answer the
    # same; the whole text is refused.
    torch = torch_cuda
    x, w = torch.randn(128, 512, device="cuda"), torch.randn(256, 512, device="cuda") / 23
    v = [torch.randn(256, device="cuda") for _ in range(4)]
    text = kjit.prepare(kjit.linear_gn_min, x, w, *v, 16)
    pin = text.split("; kernel ")[0]
    assert "; GEMM id=" in pin and not pin.endswith(" ")
    again = kjit.prepare(kjit.linear_gn_min, x, w, *v, 16, config=pin)
    assert again.startswith(pin + "; kernel ") and again.endswith("; GEMM from pinned")
    got = kjit.linear_gn_min(x, w, *v, 16, config=pin)
    assert torch.equal(got, kjit.linear_gn_min(x, w, *v, 16))
    assert torch.allclose(got.double(), lgm_reference(torch, x, w, v, 16), atol=1e-4, rtol=1e-4)
    with pytest.raises(kjit.InvalidArgumentError, match="is its report, not a pin"):
        kjit.linear_gn_min(x, w, *v, 16, config=text)


def test_linear_gn_min_prepacked_weight(torch_cuda):
    torch = torch_cuda
    x, w = torch.randn(96, 300, device="cuda"), torch.randn(128, 300, device="cuda") / 17
    v = [torch.randn(128, device="cuda") for _ in range(4)]
    pack = kjit.prepack_linear_gn_min(w)
    torch.cuda.synchronize()
    assert isinstance(pack, kjit.LinearGnMinWeights)
    assert (pack.N, pack.K, pack.precision, pack.nbytes > 0) == (128, 300, "fp32x3", True)
    assert "N=128 K=300 fp32x3" in repr(pack)
    packed = kjit.linear_gn_min(x, pack, *v, 16)  # the pack's precision
    per_call = kjit.linear_gn_min(x, w, *v, 16, precision="fp32x3")
    assert packed.shape == (1, 128, 96, 1)
    assert torch.equal(packed, per_call)
    assert torch.allclose(packed.double(), lgm_reference(torch, x, w, v, 16), atol=1e-4, rtol=1e-4)
    with pytest.raises(kjit.InvalidArgumentError, match="made for N=128 K=300 fp32x3"):
        kjit.linear_gn_min(x[:, :299].contiguous(), pack, *v, 16)
    with pytest.raises(kjit.InvalidArgumentError, match="fp32x3"):
        kjit.linear_gn_min(x, pack, *v, 16, precision="fp32")
    with pytest.raises(kjit.InvalidArgumentError, match="only fp32x3"):
        kjit.prepack_linear_gn_min(w, precision="tf32")
    with pytest.raises(kjit.InvalidArgumentError, match="CUDA device memory"):
        kjit.prepack_linear_gn_min(w.cpu())
    # Prepared, then captured into a CUDA graph and replayed on new x.
    s = torch.cuda.Stream()
    assert kjit.prepare(kjit.linear_gn_min, x, pack, *v, 16, stream=s)
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        out = kjit.linear_gn_min(x, pack, *v, 16)
    x.copy_(torch.randn_like(x))
    g.replay()
    torch.cuda.synchronize()
    assert torch.allclose(out.double(), lgm_reference(torch, x, w, v, 16), atol=1e-4, rtol=1e-4)
    # Inside torch.compile the packed call runs outside the graph, with the same answer.
    fn = torch.compile(lambda t: kjit.linear_gn_min(t, pack, *v, 16) * 2)
    assert torch.equal(fn(x), kjit.linear_gn_min(x, pack, *v, 16) * 2)


def test_unprepared_call_in_a_capture_is_a_capture_compile_error(torch_cuda):
    torch = torch_cuda
    x = torch.randn(3, 24, 7, 13, device="cuda")  # a shape nothing has prepared
    s = torch.cuda.Stream()
    g = torch.cuda.CUDAGraph()
    with pytest.raises(kjit.CaptureCompileError, match="capture"):
        with torch.cuda.graph(g, stream=s):
            kjit.group_norm(x, 3)


def test_norms_against_pytorch(torch_cuda):
    torch = torch_cuda
    F = torch.nn.functional
    rng = random.Random(seed())
    for _ in range(24):
        dtype = rng.choice([torch.float32, torch.float16, torch.bfloat16])
        width = rng.choice([1, 7, 64, 768, 1000, 4096, 5120])
        x = torch.randn(rng.randint(1, 3), rng.randint(1, 50), width, device="cuda").to(dtype)
        r = torch.randn_like(x)
        w = torch.randn(width, device="cuda").to(dtype)
        bb = torch.randn(width, device="cuda").to(dtype)
        tol = TOL[str(dtype).split(".")[-1]]
        y = kjit.layer_norm(x, (width,), w, bb, 1e-5)
        ref = F.layer_norm(x.double(), (width,), w.double(), bb.double(), 1e-5)
        assert torch.allclose(y.double(), ref, atol=tol, rtol=tol), (dtype, width)
        y, s = kjit.rms_norm(x, None, w, residual=r, activation="silu")
        h = (x + r)  # the sum rounded to x's dtype, as kjit writes it
        ref = F.silu(F.rms_norm(h.double(), (width,), w.double(), torch.finfo(dtype).eps))
        assert torch.allclose(s.double(), h.double(), atol=1e-6, rtol=tol / 4)
        assert torch.allclose(y.double(), ref, atol=tol, rtol=tol), (dtype, width)


def test_config_pins_a_plan(torch_cuda):
    # config= pins what kjit.prepare reports, or another config of the op: prepare given a text
    # returns it, the call given it matches PyTorch, also inside torch.compile (the custom ops
    # carry it); a config that cannot run the problem is refused naming it, its field and the rule.
    torch = torch_cuda
    F = torch.nn.functional
    import kjit.torch  # noqa: F401
    x = torch.randn(300, 1024, device="cuda")
    w, b = torch.randn(1024, device="cuda"), torch.randn(1024, device="cuda")
    ref = F.layer_norm(x.double(), (1024,), w.double(), b.double(), 1e-5)
    chosen = kjit.prepare(kjit.layer_norm, x, None, w, b)
    for text in (chosen, "threads=256 team=256 vec=4 iters=1 cluster=1",
                 "threads=128 team=32 vec=4 iters=8 cluster=1"):
        assert kjit.prepare(kjit.layer_norm, x, None, w, b, config=text) == text
        y = kjit.layer_norm(x, None, w, b, config=text)
        assert torch.allclose(y.double(), ref, atol=1e-4, rtol=1e-4), text
        fn = torch.compile(lambda t, c=text: kjit.layer_norm(t, None, w, b, config=c),
                           fullgraph=True)
        assert torch.allclose(fn(x).double(), ref, atol=1e-4, rtol=1e-4), text
    bad = "threads=32 team=32 vec=4 iters=1 cluster=1"  # covers 128 of the row's 1024
    with pytest.raises(kjit.InvalidArgumentError, match="config " + bad) as e:
        kjit.layer_norm(x, None, w, b, config=bad)
    assert e.value.field == "iters"
    # A prepare given a config builds that plan and loads its kernel, no other: on a width no
    # other test uses, the pinned call captures and the unpinned one (whose kernel, the
    # heuristic's, is not loaded: it never picks scalar accesses for aligned rows) is refused. A
    # prepare or a call that dropped config would turn both around.
    pin = "threads=1024 team=1024 vec=1 iters=2 cluster=1"
    xf2 = torch.randn(79, 2048, device="cuda")
    w, b = torch.randn(2048, device="cuda"), torch.randn(2048, device="cuda")
    assert kjit.prepare(kjit.layer_norm, xf2, None, w, b, config=pin) == pin
    s = torch.cuda.Stream()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        yf = kjit.layer_norm(xf2, None, w, b, config=pin)
    g.replay()
    torch.cuda.synchronize()
    ref2 = F.layer_norm(xf2.double(), (2048,), w.double(), b.double(), 1e-5)
    assert torch.allclose(yf.double(), ref2, atol=1e-4, rtol=1e-4)
    with pytest.raises(kjit.CaptureCompileError, match="capture"):
        with torch.cuda.graph(torch.cuda.CUDAGraph(), stream=s):
            kjit.layer_norm(xf2, None, w, b)
    # Inside torch.compile the custom op carries config: a config that cannot run is refused.
    fn = torch.compile(lambda t: kjit.layer_norm(t, None, w, b, config=bad))
    with pytest.raises(Exception, match="config " + bad):
        fn(xf2)
    xg = torch.randn(2, 64, 24, 24, device="cuda")
    gtext = kjit.prepare(kjit.group_norm, xg, 8)
    assert kjit.prepare(kjit.group_norm, xg, 8, config=gtext) == gtext
    got = kjit.group_norm(xg, 8, config=gtext)
    assert torch.allclose(got, kjit.group_norm(xg, 8), atol=1e-6, rtol=1e-6)


SCALE = """
#include "kjit/types.cuh"
template <class T, int kScale>
__global__ void scale(const T* x, T* y, long long n, float shift) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = kjit::from_float<T>(kjit::to_float(x[i]) * kScale + shift);
}
"""


def test_user_kernel_on_torch_tensors(torch_cuda):
    torch = torch_cuda
    import numpy as np
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        k = kjit.kernel(SCALE, "scale", types=[dtype], values=[3])
        assert k.num_params == 4
        x = torch.randn(100_003, device="cuda").to(dtype)
        y = torch.empty_like(x)
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):  # torch's current stream is the launch stream
            k((x.numel() + 255) // 256, 256, x, y, np.int64(x.numel()), 0.5)
        s.synchronize()
        assert torch.allclose(y.float(), x.float() * 3 + 0.5, atol=1e-2, rtol=1e-2)
    with pytest.raises(kjit.InvalidArgumentError, match="parameter 2 is 8 bytes"):
        k(1, 256, x, y, 5, 0.5)  # a Python int is a C int: the 64-bit parameter is refused
    with pytest.raises(kjit.InvalidArgumentError, match="is on cpu"):
        k(1, 256, x.cpu(), y, np.int64(5), 0.5)
    with pytest.raises(kjit.CompileError) as e:
        kjit.kernel(SCALE.replace("kScale + shift", "kScale + nope"), "scale",
                    types=["float32"], values=[2])
    assert "nope" in e.value.log


def test_seed_group_norm(torch_cuda):
    sys.path.insert(0, EXAMPLES)
    import seed_group_norm
    for cl in (False, True):
        row = seed_group_norm.run(channels_last=cl, time_it=False)
        print(row)
        assert row["allclose_1e-4"] and row["compiled_allclose_1e-4"], row


def test_seed_linear_gn_min(torch_cuda):
    sys.path.insert(0, EXAMPLES)
    import seed_linear_gn_min
    row = seed_linear_gn_min.run(time_it=False)
    print(row)
    assert row["shape"] == row["want_shape"] == [1, 8192, 1024, 1]
    assert row["allclose_1e-4"] and row["compiled_allclose_1e-4"], row


def test_a_first_call_lets_other_threads_run(torch_cuda):
    # The op releases the GIL while it compiles: the main thread keeps running meanwhile. A
    # random shape (each run a new one) makes the call compile unless the disk cache has it.
    import threading
    import time
    torch = torch_cuda
    rng = random.Random(seed())
    x = torch.randn(2, 8 * rng.randint(60, 4000), rng.randint(3, 90), device="cuda")
    span = {}

    def call():
        span["start"] = time.perf_counter()
        kjit.group_norm(x, 8, activation="relu")
        span["end"] = time.perf_counter()

    t = threading.Thread(target=call)
    ticks = []
    t.start()
    while t.is_alive():
        ticks.append(time.perf_counter())
    t.join()
    torch.cuda.synchronize()
    took = span["end"] - span["start"]
    if took < 0.02:
        pytest.skip("the call took %.1f ms (its kernel was cached): too short to tell" %
                    (took * 1e3))
    inside = [v for v in ticks if span["start"] + 0.005 < v < span["end"] - 0.005]
    # With the GIL held through the compile, the main thread would not run in between at all.
    assert len(inside) > 100, (took, len(inside))
