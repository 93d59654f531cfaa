"""Multi-token prediction (MTP, `mtp_depth=1`): one extra block that predicts the token after next.

For each position t, from the model's final hidden state h_t (the streams' mean, before the final norm) and the
embedding of token t+1:

    x_t = W [RMSNorm(h_t) ; RMSNorm(embed(token t+1))]      (2D -> D)
    y_t = x_t + block(x_t)                                   (one linear-attention block with its MoE)
    logits for token t+2 = head(RMSNorm(y_t))                (the model's own head, tied or not)

In pretraining its cross-entropy is added with weight `--mtp-coef` (0.3). In decoding it drafts one token that
the main model then checks (speculative.py). Its block is causal over positions like any layer, with its own
recurrent cache; it only ever reads committed tokens, so a rejected draft never needs to be undone in it.

Simplifications vs GLM-5.3-Flash (DeepSeek-V3's MTP): one depth only; its block is a linear-attention block of
the model's own kind, without hyper-connection streams; its router's balance loss is not added to the training
loss (a sigmoid-bias router still balances).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig
from .norm import RMSNorm


class MultiTokenPrediction(nn.Module):
    def __init__(self, config: ModelConfig, block: nn.Module):
        super().__init__()
        self.hidden_norm = RMSNorm(config.dim, config.norm_eps)
        self.embed_norm = RMSNorm(config.dim, config.norm_eps)
        self.combine = nn.Linear(2 * config.dim, config.dim, bias=False)
        self.block = block
        self.out_norm = RMSNorm(config.dim, config.norm_eps)

    def forward(self, hidden: torch.Tensor, next_embeds: torch.Tensor, head_weight: torch.Tensor, cos, sin,
                cache=None, positions=None) -> torch.Tensor:
        """hidden [B, T, D] (h_t), next_embeds [B, T, D] (embedding of token t+1) -> logits for token t+2 [B, T, V]."""
        x = self.combine(torch.cat((self.hidden_norm(hidden), self.embed_norm(next_embeds)), dim=-1))
        update, *_ = self.block(x, cos, sin, cache, positions)
        return F.linear(self.out_norm(x + update), head_weight)
