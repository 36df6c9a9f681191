"""kjit's ops as PyTorch custom ops (torch.library), with fake implementations, so that
torch.compile graphs call them without a graph break and CUDA graphs (torch.cuda.graph,
mode="reduce-overhead") capture them. Imported by kjit itself once torch is loaded; import it
yourself (``import kjit.torch``) to get torch.ops.kjit.* before any kjit call.

    torch.ops.kjit.group_norm(x, num_groups, weight, bias, eps, activation, config) -> Tensor
    torch.ops.kjit.linear_gn_min(x, weight, linear_bias, gamma, beta, bias, num_groups, eps,
                                 precision, config) -> Tensor [1, N, M, 1]
    torch.ops.kjit.layer_norm(x, weight, bias, eps, activation, config) -> Tensor
    torch.ops.kjit.rms_norm(x, weight, eps, activation, config) -> Tensor
    torch.ops.kjit.add_layer_norm(x, residual, weight, bias, eps, activation, config)
        -> (y, x + residual)
    torch.ops.kjit.add_rms_norm(x, residual, weight, eps, activation, config) -> (y, x + residual)

config (last, default None) is a config's text, pinned, as kjit.layer_norm's config=.

kjit.group_norm and the others call these themselves while torch.compile traces. The ops are
forward-only (inference): they have no autograd formula.
"""

from typing import Optional, Tuple

import torch

from . import _ops

Tensor = torch.Tensor


@torch.library.custom_op("kjit::group_norm", mutates_args=())
def group_norm(x: Tensor, num_groups: int, weight: Optional[Tensor] = None,
               bias: Optional[Tensor] = None, eps: float = 1e-5,
               activation: str = "silu", config: Optional[str] = None) -> Tensor:
    return _ops._group_norm(x, num_groups, weight, bias, eps, activation, None, None, config)


@group_norm.register_fake
def _(x, num_groups, weight=None, bias=None, eps=1e-5, activation="silu", config=None):
    return torch.empty_like(x)  # what the op allocates: x's shape, dtype and strides


@torch.library.custom_op("kjit::linear_gn_min", mutates_args=())
def linear_gn_min(x: Tensor, weight: Tensor, linear_bias: Tensor, gamma: Tensor, beta: Tensor,
                  bias: Tensor, num_groups: int, eps: float = 1e-5,
                  precision: str = "fp32", config: Optional[str] = None) -> Tensor:
    return _ops._linear_gn_min(x, weight, linear_bias, gamma, beta, bias, num_groups, eps,
                               precision, None, None, config)


@linear_gn_min.register_fake
def _(x, weight, linear_bias, gamma, beta, bias, num_groups, eps=1e-5, precision="fp32",
      config=None):
    return x.new_empty((1, weight.shape[0], x.shape[0], 1), dtype=torch.float32)


@torch.library.custom_op("kjit::layer_norm", mutates_args=())
def layer_norm(x: Tensor, weight: Optional[Tensor] = None, bias: Optional[Tensor] = None,
               eps: float = 1e-5, activation: str = "none",
               config: Optional[str] = None) -> Tensor:
    return _ops._norm(0, x, weight, bias, eps, None, activation, None, None, None, config)


@layer_norm.register_fake
def _(x, weight=None, bias=None, eps=1e-5, activation="none", config=None):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op("kjit::rms_norm", mutates_args=())
def rms_norm(x: Tensor, weight: Optional[Tensor] = None, eps: Optional[float] = None,
             activation: str = "none", config: Optional[str] = None) -> Tensor:
    # eps None: the dtype's machine epsilon, as F.rms_norm and kjit.rms_norm.
    return _ops._norm(1, x, weight, None, _ops._rms_eps(x, eps), None, activation, None, None,
                      None, config)


@rms_norm.register_fake
def _(x, weight=None, eps=None, activation="none", config=None):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op("kjit::add_layer_norm", mutates_args=())
def add_layer_norm(x: Tensor, residual: Tensor, weight: Optional[Tensor] = None,
                   bias: Optional[Tensor] = None, eps: float = 1e-5,
                   activation: str = "none", config: Optional[str] = None) -> Tuple[Tensor, Tensor]:
    return _ops._norm(0, x, weight, bias, eps, residual, activation, None, None, None, config)


@add_layer_norm.register_fake
def _(x, residual, weight=None, bias=None, eps=1e-5, activation="none", config=None):
    like = torch.empty_like(x, memory_format=torch.contiguous_format)
    return like, torch.empty_like(like)


@torch.library.custom_op("kjit::add_rms_norm", mutates_args=())
def add_rms_norm(x: Tensor, residual: Tensor, weight: Optional[Tensor] = None,
                 eps: Optional[float] = None, activation: str = "none",
                 config: Optional[str] = None) -> Tuple[Tensor, Tensor]:
    return _ops._norm(1, x, weight, None, _ops._rms_eps(x, eps), residual, activation, None, None,
                      None, config)


@add_rms_norm.register_fake
def _(x, residual, weight=None, eps=None, activation="none", config=None):
    like = torch.empty_like(x, memory_format=torch.contiguous_format)
    return like, torch.empty_like(like)


_ops._torch_ops = torch.ops.kjit
_ops._compiling = torch.compiler.is_compiling
