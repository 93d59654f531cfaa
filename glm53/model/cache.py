"""Decoding state: a recurrent (S, z) state for each linear-attention layer, a KV cache for each sparse layer.

Rows may sit at different positions (prompts of different lengths decoded together), so the cache keeps one
position per row. Every tensor has the batch as its first dimension, which makes copying a prompt's state to
the G samples of its group (`repeat_rows`), joining many prompts' groups (`concat`) and dropping finished
rows (`select`) three plain indexing operations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class LayerCache:
    """linear layers: state = (S [B, H, d, d], z [B, H, d]); sparse layers: k, v [B, H, max_length, d]."""

    state: tuple[torch.Tensor, torch.Tensor] | None = None
    k: torch.Tensor | None = None
    v: torch.Tensor | None = None

    def map(self, fn) -> "LayerCache":
        return LayerCache(state=None if self.state is None else tuple(fn(t) for t in self.state),
                          k=None if self.k is None else fn(self.k), v=None if self.v is None else fn(self.v))


@dataclass
class InferenceCache:
    max_length: int
    positions: torch.Tensor  # [B] long: tokens consumed so far by each row
    layers: list[LayerCache] = field(default_factory=list)

    @classmethod
    def empty(cls, config, batch: int, max_length: int, device, dtype=torch.float32) -> "InferenceCache":
        """Zero state for `batch` rows of a model with ModelConfig `config`, up to `max_length` positions."""
        if max_length > config.max_sequence_length:
            raise ValueError(f"cache max_length {max_length} exceeds max_sequence_length {config.max_sequence_length}")
        H, d = config.heads, config.head_dim
        state_dtype = torch.promote_types(dtype, torch.float32)
        layers = []
        for i in range(config.layers):
            if config.is_sparse_layer(i):
                layers.append(LayerCache(k=torch.zeros(batch, H, max_length, d, device=device, dtype=dtype),
                                         v=torch.zeros(batch, H, max_length, d, device=device, dtype=dtype)))
            else:
                # recurrent sums stay in fp32 whatever the weights' dtype: they accumulate over the whole sequence
                layers.append(LayerCache(state=(torch.zeros(batch, H, d, d, device=device, dtype=state_dtype),
                                                torch.zeros(batch, H, d, device=device, dtype=state_dtype))))
        return cls(max_length, torch.zeros(batch, dtype=torch.long, device=device), layers)

    @property
    def batch(self) -> int:
        return self.positions.shape[0]

    def _map(self, fn) -> "InferenceCache":
        return InferenceCache(self.max_length, fn(self.positions), [layer.map(fn) for layer in self.layers])

    def select(self, rows: torch.Tensor) -> "InferenceCache":
        return self._map(lambda t: t.index_select(0, rows))

    def repeat_rows(self, repeats: int) -> "InferenceCache":
        """Each row becomes `repeats` consecutive rows (a prompt's state copied to its group)."""
        return self._map(lambda t: t.repeat_interleave(repeats, dim=0))

    @staticmethod
    def concat(caches: list["InferenceCache"]) -> "InferenceCache":
        first = caches[0]
        if any(c.max_length != first.max_length for c in caches):
            raise ValueError("caches to concatenate must share max_length")
        layers = []
        for i in range(len(first.layers)):
            parts = [c.layers[i] for c in caches]
            layers.append(LayerCache(
                state=None if parts[0].state is None else tuple(torch.cat([p.state[j] for p in parts]) for j in range(2)),
                k=None if parts[0].k is None else torch.cat([p.k for p in parts]),
                v=None if parts[0].v is None else torch.cat([p.v for p in parts])))
        return InferenceCache(first.max_length, torch.cat([c.positions for c in caches]), layers)
