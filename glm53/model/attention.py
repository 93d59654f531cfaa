"""What the softmax and elu attentions share: a bias-free qkv projection with RoPE on q and k (none when
`position="none"`, the released model's NoPE), and an output projection.

The attention cores run in fp32 even under bf16 autocast: the running sums of linear attention and the softmax
lose too much in bf16, CPU SDPA measured twice as slow in bf16 on one CPU, and the cores are a small share of the
FLOPs. The sparse core may run in bf16 (`sparse_attention_core`), and the fast linear core's chunk products may
take bf16 operands (`linear_attention_core`, its prefix sums staying fp32), where `glm53 calibrate` measured it
faster.
"""

from __future__ import annotations

import torch
from torch import nn

from .config import ModelConfig
from .norm import RMSNorm
from .rope import apply_rope


class AttentionProjections(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.heads = config.heads
        self.rotary = config.position == "rope"
        self.qkv = nn.Linear(config.dim, 3 * config.dim, bias=False)
        self.out = nn.Linear(config.dim, config.dim, bias=False)
        # QK-norm: each head's q and k at unit RMS (times a learned gain), so attention logits cannot grow with the
        # weights; a speedrun lever, off in the reference
        self.q_norm = RMSNorm(config.head_dim, config.norm_eps) if config.qk_norm else None
        self.k_norm = RMSNorm(config.head_dim, config.norm_eps) if config.qk_norm else None

    def project(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, dtype: torch.dtype | None = None):
        """x [B, T, D] -> q, k, v [B, T, H, d] in fp32, or in `dtype` when given (a core that takes bf16 operands
        skips the round trip; RoPE still rotates in fp32 and rounds once), RoPE applied to q and k (unless position
        is none)."""
        # unbind over the [B, T, 3, H, d] view: its backward stacks the three gradients straight into qkv's layout
        # (unpacking a three-first rearrangement stacked them three-first, then copied them back)
        q, k, v = self.qkv(x).unflatten(-1, (3, self.heads, -1)).unbind(2)
        q, k, v = (t.to(dtype or torch.promote_types(t.dtype, torch.float32)) for t in (q, k, v))
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if not self.rotary:
            return q, k, v
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v
