"""Hyper-connections: several residual streams, each layer reading a mix of them and writing back to all.

With S streams held as [B, T, S, D]:
    mixed   = sum_s softmax(input_logits)_s * stream_s         (what the layer reads)
    update  = layer(mixed)                                      (attention + MoE residual update)
    stream_s += softmax(output_logits)_s * update                (what the layer writes)
`input_logits` start at linspace(0.1, -0.1, S) and `output_logits` at linspace(-0.1, 0.1, S).

With one stream this is exactly a pre-norm residual block. The reference wrote `mixed + update` back (the
block's full output), counting the residual twice; `ModelConfig.hc_double_residual=True` restores that.

Simplifications vs GLM-5.3-Flash: the released model's manifold-constrained hyper-connections (mHC) mix
streams with an input-dependent n x n matrix projected onto doubly stochastic matrices by Sinkhorn-Knopp,
plus dynamic pre/post weights (`residual="mhc"`, manifold_hyper_connections.py). Here the weights are two static
learned S-vectors and there is no stream-to-stream mixing matrix.
"""

from __future__ import annotations

import torch
from torch import nn


class HyperConnection(nn.Module):
    def __init__(self, streams: int, layer: nn.Module, double_residual: bool = False):
        super().__init__()
        self.layer = layer
        self.double_residual = double_residual
        self.input_logits = nn.Parameter(torch.linspace(0.1, -0.1, streams))
        self.output_logits = nn.Parameter(torch.linspace(-0.1, 0.1, streams))

    def forward(self, streams: torch.Tensor, *args, **kwargs):
        """streams [B, T, S, D] -> (new streams, the layer's auxiliary outputs)."""
        read = self.input_logits.softmax(dim=0).to(streams.dtype)
        mixed = (streams * read[:, None]).sum(dim=2)  # measured faster than einsum/matmul for S = 4 on CPU
        update, *aux = self.layer(mixed, *args, **kwargs)
        written = mixed + update if self.double_residual else update
        write = self.output_logits.softmax(dim=0).to(streams.dtype)
        return streams + write[:, None] * written[:, :, None, :], *aux
