"""Softmax attention over a fixed sparse pattern: the last `window` positions plus strided anchors.

Query position p sees key j when j <= p and (p - j < window or j % stride == 0). With window = stride = 32
that is at most 32 local keys plus one anchor per 32 positions.

Two forms, tested against each other:
- `sparse_attention_plain`: the plain reference; builds a per-row index table with Python loops and
  gathers the selected keys and values ([B, H, T, W, d]).
- `sparse_attention_fast`: the fast form; a boolean [T, T] mask built once per length and cached, fed to
  `scaled_dot_product_attention`.

Simplification vs GLM-5.3-Flash: the released model selects keys with a learned top-k "lightning indexer"
(DeepSeek Sparse Attention) over a latent (MLA) KV cache; `sparse_selection="indexer"` switches to such an
indexer (indexer_attention.py). Here the pattern is fixed, heads are plain
multi-head (no MLA, no GQA) and there is no attention sink.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import rearrange

from .config import ModelConfig
from .attention import AttentionProjections


def sparse_pattern(p: torch.Tensor, j: torch.Tensor, window: int, stride: int) -> torch.Tensor:
    """The pattern itself, broadcast over query positions p and key positions j: causal, and local or anchor."""
    return (j <= p) & ((p - j < window) | (j % stride == 0))


def sparse_attention_mask(length: int, window: int, stride: int, device=None) -> torch.Tensor:
    """Boolean [length, length] mask, True where query row p may attend to key column j."""
    positions = torch.arange(length, device=device)
    return sparse_pattern(positions[:, None], positions[None, :], window, stride)


def sparse_attention_index(length: int, window: int, stride: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row key indices, padded to the widest row: (index [T, W] long, valid [T, W] bool)."""
    rows = []
    for p in range(length):
        anchors = set(range(0, p + 1, stride))
        local = set(range(max(0, p - window + 1), p + 1))
        rows.append(sorted(anchors | local))
    width = max(len(r) for r in rows)
    index = torch.zeros(length, width, dtype=torch.long)
    valid = torch.zeros(length, width, dtype=torch.bool)
    for p, row in enumerate(rows):
        index[p, : len(row)] = torch.tensor(row)
        valid[p, : len(row)] = True
    return index, valid


def sparse_attention_plain(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int,
                              stride: int) -> torch.Tensor:
    """Plain reference. q, k, v are [B, H, T, d]; returns [B, H, T, d]."""
    T, d = q.shape[2], q.shape[3]
    index, valid = sparse_attention_index(T, window, stride)
    index, valid = index.to(q.device), valid.to(q.device)
    k_sel = k[:, :, index]  # [B, H, T, W, d]
    v_sel = v[:, :, index]
    scores = torch.einsum("bhtd,bhtwd->bhtw", q, k_sel) / math.sqrt(d)
    scores = scores.masked_fill(~valid, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1, dtype=torch.promote_types(scores.dtype, torch.float32)).to(q.dtype)
    return torch.einsum("bhtw,bhtwd->bhtd", weights, v_sel)


def sparse_attention_fast(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Fast form. q [B, H, Tq, d]; k, v [B, H, Tk, d]; mask [Tq, Tk] bool. Returns [B, H, Tq, d]."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class SparseAttention(AttentionProjections):
    """qkv projection -> RoPE on q, k -> sparse-pattern softmax attention -> output projection (no biases)."""

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        self.window = config.sparse_window
        self.stride = config.sparse_stride
        self.impl = config.sparse_attention_impl
        self.core_dtype = config.sparse_attention_core
        self._masks: dict[tuple[int, str], torch.Tensor] = {}

    def mask(self, length: int, device: torch.device) -> torch.Tensor:
        if torch.compiler.is_compiling():  # built inside the graph: a cache entry made while tracing would fail
            return sparse_attention_mask(length, self.window, self.stride, device)  # the guard, a compile again
        key = (length, str(device))
        if key not in self._masks:
            self._masks[key] = sparse_attention_mask(length, self.window, self.stride, device)
        return self._masks[key]

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache=None,
                positions=None) -> torch.Tensor:
        """With a LayerCache and per-row positions [B, T], write k and v into the cache at those positions and
        attend over everything cached (the KV cache decoding path)."""
        B, T, _ = x.shape
        q, k, v = self.project(x, cos, sin)
        if self.core_dtype == "bf16" and torch.is_autocast_enabled(x.device.type):
            q, k, v = (t.to(torch.bfloat16) for t in (q, k, v))  # measured faster on some CPUs (calibrate)
        with torch.autocast(x.device.type, enabled=False):
            if cache is not None:
                y = self._attend_cached(q, k, v, cache, positions)
            else:
                q, k, v = (t.transpose(1, 2) for t in (q, k, v))
                if self.impl == "fast":
                    y = sparse_attention_fast(q, k, v, self.mask(T, x.device))
                else:
                    y = sparse_attention_plain(q, k, v, self.window, self.stride)
        return self.out(rearrange(y, "b h t d -> b t (h d)").to(x.dtype))

    def _attend_cached(self, q, k, v, cache, positions: torch.Tensor) -> torch.Tensor:
        B, T, H, d = q.shape
        rows = torch.arange(B, device=q.device)[:, None]
        cache.k[rows, :, positions] = k.to(cache.k.dtype)
        cache.v[rows, :, positions] = v.to(cache.v.dtype)
        keys = torch.arange(cache.k.shape[2], device=q.device)
        mask = sparse_pattern(positions[:, :, None], keys[None, None, :], self.window, self.stride)  # [B, T, max_len]
        length = int(positions.max()) + 1  # keys past every row's position are never attended: skip them
        return F.scaled_dot_product_attention(q.transpose(1, 2), cache.k[:, :, :length].to(q.dtype),
                                              cache.v[:, :, :length].to(q.dtype), attn_mask=mask[:, None, :, :length])
