"""RMSNorm, computed in fp32 and cast back (weight only, no bias).

Two forms, equal up to rounding: `rms_norm_plain` (torch's rms_norm, then the weight) and `rms_norm_fast`, an
autograd Function with the backward written out: gx = rstd * (g w - xhat * mean(g w xhat)), gw = sum(g xhat).
On the CPU torch's rms_norm is a composite of about ten element-wise passes forward and backward; the fast form
takes about half as many (both measured per call at 32 x 128 x 192 on a 2-core Zen 5: 0.85 against 1.6 ms,
forward and backward). The module uses the fast form for fp32/fp64 inputs and the plain one otherwise.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def rms_norm_plain(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x.float(), (x.shape[-1],), eps=eps).to(x.dtype) * weight


def _normalized_and_rstd(x: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.autocast(x.device.type, enabled=False):  # vecdot is a bf16 op under CPU autocast
        rstd = torch.rsqrt(torch.linalg.vecdot(x, x, dim=-1).unsqueeze(-1) / x.shape[-1] + eps)
    return x * rstd, rstd


class RMSNormFast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        normalized, rstd = _normalized_and_rstd(x, eps)
        ctx.save_for_backward(normalized, rstd, weight)
        return normalized * weight

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        normalized, rstd, weight = ctx.saved_tensors
        grad_weight = (grad * normalized).flatten(0, -2).sum(0)
        grad_normalized = grad * weight
        with torch.autocast(grad.device.type, enabled=False):
            mean = torch.linalg.vecdot(grad_normalized, normalized, dim=-1).unsqueeze(-1) / normalized.shape[-1]
        return torch.addcmul(grad_normalized, normalized, mean, value=-1).mul_(rstd), grad_weight, None


def rms_norm_fast(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
        return RMSNormFast.apply(x, weight, eps)
    return _normalized_and_rstd(x, eps)[0] * weight  # decoding: the same arithmetic without autograd's bookkeeping


class RMSNorm(nn.Module):
    """Root-mean-square norm with a learned gain.

    Same as GLM-5.3-Flash's norm up to the epsilon; the released model keeps some norms in fp32 throughout,
    here only the statistic is computed in fp32.
    """

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == self.weight.dtype and x.dtype in (torch.float32, torch.float64):
            return rms_norm_fast(x, self.weight, self.eps)
        return rms_norm_plain(x, self.weight, self.eps)
