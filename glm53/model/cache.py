"""Decoding state: a recurrent state for each linear-attention layer ((S, z) for elu; (S,) and the short
convolution's last inputs for KDA), a KV cache for each sparse layer (plus the indexer's keys when it selects).

Rows may sit at different positions (prompts of different lengths decoded together), so the cache keeps one
position per row. Every tensor has the batch as its first dimension, which makes joining many prompts' states
(`concat`), copying a prompt's state to the G samples of its group and dropping finished rows (both `select`)
plain indexing operations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class LayerCache:
    """elu linear layers: state = (S [B, H, d, d], z [B, H, d]); KDA layers: state = (S [B, H, d, d],) and
    conv [B, kernel - 1, 3 * dim]; sparse layers: k, v [B, H, max_length, d], and index_k
    [B, max_length, indexer_dim] when the indexer selects keys (these three fp32 at least)."""

    state: tuple[torch.Tensor, ...] | None = None
    k: torch.Tensor | None = None
    v: torch.Tensor | None = None
    conv: torch.Tensor | None = None
    index_k: torch.Tensor | None = None

    def map(self, fn) -> "LayerCache":
        return LayerCache(**{name: _apply(fn, value) for name, value in vars(self).items()})

    @staticmethod
    def concat(parts: list["LayerCache"]) -> "LayerCache":
        def join(values):
            if values[0] is None:
                return None
            if isinstance(values[0], tuple):
                return tuple(torch.cat([v[j] for v in values]) for j in range(len(values[0])))
            return torch.cat(values)

        return LayerCache(**{name: join([vars(p)[name] for p in parts]) for name in vars(parts[0])})


def _apply(fn, value):
    if value is None:
        return None
    return tuple(fn(t) for t in value) if isinstance(value, tuple) else fn(value)


@dataclass
class InferenceCache:
    max_length: int
    positions: torch.Tensor  # [B] long: tokens consumed so far by each row
    layers: list[LayerCache] = field(default_factory=list)

    @classmethod
    def empty(cls, config, batch: int, max_length: int, device, dtype=torch.float32,
              layers: str | None = None) -> "InferenceCache":
        """Zero state for `batch` rows of a model with ModelConfig `config`, up to `max_length` positions; `layers`
        ("LLS...": L linear, S sparse) defaults to the config's layer pattern."""
        if max_length > config.max_sequence_length:
            raise ValueError(f"cache max_length {max_length} exceeds max_sequence_length {config.max_sequence_length}")
        H, d = config.heads, config.head_dim
        state_dtype = torch.promote_types(dtype, torch.float32)
        pattern, layers = layers or config.layer_pattern, []
        for kind in pattern:
            if kind == "S":
                # keys and values in fp32 whatever the weights' dtype: attention reads them in fp32 (the projection
                # returns q, k, v in fp32), and a bf16 cache was converted back over its whole length at every step
                # of every layer (a quarter of bf16 decoding's time)
                layer = LayerCache(k=torch.zeros(batch, H, max_length, d, device=device, dtype=state_dtype),
                                   v=torch.zeros(batch, H, max_length, d, device=device, dtype=state_dtype))
                if config.sparse_selection == "indexer":  # read in fp32 too (the indexer's scores)
                    layer.index_k = torch.zeros(batch, max_length, config.indexer_dim, device=device,
                                                dtype=state_dtype)
            elif config.linear_attention == "kda":
                layer = LayerCache(state=(torch.zeros(batch, H, d, d, device=device, dtype=state_dtype),),
                                   conv=torch.zeros(batch, config.kda_conv_kernel - 1, 3 * config.dim, device=device,
                                                    dtype=dtype))
            else:
                # recurrent sums stay in fp32 whatever the weights' dtype: they accumulate over the whole sequence
                layer = LayerCache(state=(torch.zeros(batch, H, d, d, device=device, dtype=state_dtype),
                                          torch.zeros(batch, H, d, device=device, dtype=state_dtype)))
            layers.append(layer)
        return cls(max_length, torch.zeros(batch, dtype=torch.long, device=device), layers)

    @property
    def batch(self) -> int:
        return self.positions.shape[0]

    def snapshot(self) -> "InferenceCache":
        """What a rollback needs: copies of the positions, recurrent states and convolution tails. Key/value
        entries are shared, not copied: those written past a row's restored position are never read (attention
        stops at each row's position) and are overwritten by the next tokens."""
        copy = lambda t: t.clone()  # noqa: E731
        return InferenceCache(self.max_length, self.positions.clone(), [
            LayerCache(state=_apply(copy, layer.state), k=layer.k, v=layer.v, conv=_apply(copy, layer.conv),
                       index_k=layer.index_k) for layer in self.layers])

    def _map(self, fn) -> "InferenceCache":
        return InferenceCache(self.max_length, fn(self.positions), [layer.map(fn) for layer in self.layers])

    def select(self, rows: torch.Tensor) -> "InferenceCache":
        return self._map(lambda t: t.index_select(0, rows))

    @staticmethod
    def concat(caches: list["InferenceCache"]) -> "InferenceCache":
        first = caches[0]
        if any(c.max_length != first.max_length for c in caches):
            raise ValueError("caches to concatenate must share max_length")
        layers = [LayerCache.concat([c.layers[i] for c in caches]) for i in range(len(first.layers))]
        return InferenceCache(first.max_length, torch.cat([c.positions for c in caches]), layers)
