"""RMSNorm, computed in fp32 and cast back (weight only, no bias)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


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
        y = F.rms_norm(x.float(), (x.shape[-1],), eps=self.eps).to(x.dtype)
        return y * self.weight
