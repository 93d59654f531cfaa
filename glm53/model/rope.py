"""Rotary position embedding with interleaved (even, odd) pairs and a cached cos/sin table.

Simplification vs GLM-5.3-Flash: the released text model has no positional encoding at all (NoPE:
`position="none"`). Here RoPE rotates the whole head (no partial-rotary split, no YaRN scaling) and positions are
absolute indices 0..T-1 (plus an offset when decoding with a cache).
"""

from __future__ import annotations

import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    """Holds cos/sin for positions [0, max_positions) in fp32, built once rather than on every call."""

    def __init__(self, head_dim: int, max_positions: int, base: float = 10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
        angles = torch.arange(max_positions, dtype=torch.float64)[:, None] * inv_freq[None, :]
        # float64 angles keep the table exact to fp32 at every position; non-persistent: not in checkpoints.
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def forward(self, length: int, offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin of shape [length, head_dim / 2] for positions offset .. offset + length - 1."""
        end = offset + length
        if end > self.cos.shape[0]:
            raise ValueError(f"position {end - 1} is beyond the RoPE table ({self.cos.shape[0]} positions); "
                             "raise max_sequence_length in ModelConfig")
        return self.cos[offset:end], self.sin[offset:end]

    def at(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin of shape [B, t, head_dim / 2] for per-row positions [B, t] (decoding rows of unequal length)."""
        if positions.numel() and int(positions.max()) >= self.cos.shape[0]:
            raise ValueError(f"position {int(positions.max())} is beyond the RoPE table ({self.cos.shape[0]} "
                             "positions); raise max_sequence_length in ModelConfig")
        return self.cos[positions], self.sin[positions]


def apply_rope_plain(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Plain reference: rotate x of shape [B, T, H, d]: each pair (x[2i], x[2i+1]) turns by angle
    position * freq_i, (e, o) -> (e cos - o sin, e sin + o cos). cos and sin are [T, d/2] (shared positions)
    or [B, T, d/2] (per-row positions)."""
    even, odd = x[..., 0::2].float(), x[..., 1::2].float()
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return rotated.flatten(-2).to(x.dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Fast form of `apply_rope_plain`, equal to it bit for bit: each pair is one complex number multiplied by
    cos + i sin (the same products and sums), on contiguous memory; on CPU about 10x the plain form in training
    and 2x in decoding. Same shapes as the plain form. Under torch.compile it is the plain form, which Inductor fuses
    into one kernel."""
    if torch.compiler.is_compiling():  # Inductor generates no code for complex numbers: the real form compiles
        return apply_rope_plain(x, cos, sin)
    shape = x.shape
    pairs = torch.view_as_complex(x.float().reshape(*shape[:-1], -1, 2))  # [B, T, H, d/2]
    rotation = torch.complex(cos.float(), sin.float()).unsqueeze(-2)  # [(B,) T, 1, d/2]
    return torch.view_as_real(pairs * rotation).reshape(shape).to(x.dtype)
