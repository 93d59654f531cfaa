"""Indexer-selected sparse attention (`sparse_selection="indexer"`): DeepSeek sparse attention's lightning indexer.

A few small indexer heads score every earlier key for each query,

    I[t, s] = sum_j w[t, j] * relu(q_idx[t, j] . k_idx[s]) / sqrt(indexer_dim),

and each query attends (softmax, all heads) to its `indexer_top_k` best earlier keys plus itself. With
`index_pool = P > 1` (the released "KPool") the indexer scores blocks of P keys by their mean indexer key and
each query keeps its top ceil(top_k / P) earlier blocks, plus every key of its own block up to itself. P = 1 is
the same rule with one key per block. Ties keep the earlier key (a stable sort), so the cached and full forms
choose alike.

Training the indexer (the DeepSeek-V3.2 recipe, simplified): its input is detached, so the language loss never
reaches it and it learns only from `indexer_loss`, the KL divergence from the main attention's head-averaged
distribution (summed per block and renormalised over the blocks the query kept) to the indexer's softmax over
those blocks. In the dense warm-up (`set_dense(True)`, driven by `glm53 pretrain --indexer-warmup-steps`) the
main attention sees every earlier key and the KL covers every earlier block.

Two forms, tested against each other (the selection is shared, only the attention core differs):
- `indexed_attention_plain`: gathers each query's selected keys and values ([B, T, W, H, d]).
- `indexed_attention_fast`: a boolean [B, T, S] mask fed to `scaled_dot_product_attention`.

Simplifications vs GLM-5.3-Flash: plain multi-head attention (no MLA, no latent cache), the indexer has no
LayerNorm on its keys and runs in fp32 (no FP8), its keys are cached beside k and v rather than compressed, and
the warm-up trains the whole model rather than the indexer alone.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from .attention import AttentionProjections
from .config import ModelConfig
from .rope import RotaryEmbedding, apply_rope


def index_scores(q_idx: torch.Tensor, weights: torch.Tensor, k_idx: torch.Tensor) -> torch.Tensor:
    """q_idx [B, T, J, d], weights [B, T, J], k_idx [B, S, d] -> I [B, T, S] (every query against every key)."""
    per_head = torch.einsum("btjd,bsd->btjs", q_idx, k_idx).relu()
    return torch.einsum("btjs,btj->bts", per_head, weights) / math.sqrt(q_idx.shape[-1])


def pool_keys(k_idx: torch.Tensor, pool: int) -> torch.Tensor:
    """Mean indexer key of each block of `pool` positions: [B, S, d] -> [B, ceil(S / pool), d]. A partial last
    block is never a candidate (see `choose_blocks`), so its zero padding never matters."""
    if pool == 1:
        return k_idx
    k_idx = F.pad(k_idx, (0, 0, 0, (-k_idx.shape[1]) % pool))
    return rearrange(k_idx, "b (n p) d -> b n p d", p=pool).mean(dim=2)


def earlier_blocks(num_blocks: int, positions: torch.Tensor, pool: int) -> torch.Tensor:
    """[B, T, N] bool: the blocks that end before each query's own block starts (the indexer's candidates)."""
    return torch.arange(num_blocks, device=positions.device) < (positions // pool)[..., None]


def choose_blocks(block_scores: torch.Tensor, positions: torch.Tensor, pool: int, top_k: int):
    """The blocks each query keeps: its top ceil(top_k / pool) blocks among those that end before its own block
    starts. block_scores [B, T, N]; positions [B, T] (each query's position). Returns (chosen [B, T, K] long,
    valid [B, T, K] bool); a query with fewer earlier blocks than K has invalid slots."""
    candidate = earlier_blocks(block_scores.shape[-1], positions, pool)
    keep = min(math.ceil(top_k / pool), block_scores.shape[-1])
    ranked = block_scores.masked_fill(~candidate, float("-inf")).sort(dim=-1, descending=True, stable=True).indices
    chosen = ranked[..., :keep]
    return chosen, candidate.gather(-1, chosen)


def own_block_keys(positions: torch.Tensor, pool: int, num_keys: int) -> torch.Tensor:
    """[B, T, S] bool: the keys of each query's own block up to the query itself (always attended)."""
    keys = torch.arange(num_keys, device=positions.device)
    return ((keys // pool) == (positions // pool)[..., None]) & (keys <= positions[..., None])


def selection_mask(chosen, valid, positions, pool: int, num_keys: int) -> torch.Tensor:
    """The selection as a [B, T, S] boolean mask (for the fast form)."""
    blocks = math.ceil(num_keys / pool)
    kept = torch.zeros(*chosen.shape[:-1], blocks, dtype=torch.bool, device=chosen.device).scatter_(-1, chosen, valid)
    key_block = torch.arange(num_keys, device=chosen.device) // pool
    return kept[..., key_block] | own_block_keys(positions, pool, num_keys)


def selection_index(chosen, valid, positions, pool: int, num_keys: int):
    """The selection as per-query key indices (for the plain form): (index [B, T, W], valid [B, T, W]),
    W = K * pool + pool; invalid slots point at key 0."""
    offsets = torch.arange(pool, device=chosen.device)
    picked = (chosen[..., None] * pool + offsets).flatten(-2)
    picked_valid = valid[..., None].expand(*valid.shape, pool).flatten(-2)
    own = (positions // pool)[..., None] * pool + offsets
    own_valid = own <= positions[..., None]
    index, ok = torch.cat((picked, own), dim=-1), torch.cat((picked_valid, own_valid), dim=-1)
    return index.masked_fill(~ok, 0).clamp(max=num_keys - 1), ok


def indexed_attention_plain(q, k, v, index, valid) -> torch.Tensor:
    """Plain form. q [B, H, T, d]; k, v [B, H, S, d]; index, valid [B, T, W]. Returns [B, H, T, d]."""
    rows = torch.arange(q.shape[0], device=q.device)[:, None, None]
    k_sel, v_sel = k.transpose(1, 2)[rows, index], v.transpose(1, 2)[rows, index]  # [B, T, W, H, d]
    scores = torch.einsum("bhtd,btwhd->bhtw", q, k_sel) / math.sqrt(q.shape[-1])
    weights = scores.masked_fill(~valid[:, None], float("-inf")).softmax(dim=-1)
    return torch.einsum("bhtw,btwhd->bhtd", weights, v_sel)


def indexed_attention_fast(q, k, v, mask) -> torch.Tensor:
    """Fast form. q [B, H, T, d]; k, v [B, H, S, d]; mask [B, T, S] bool. Returns [B, H, T, d]."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None])


def indexer_kl(q, k, attended, block_scores, kept_blocks, pool: int) -> torch.Tensor:
    """KL(main attention || indexer) over the blocks each query kept. q [B, H, T, d], k [B, H, S, d] (the main
    attention's, used without gradient); attended [B, T, S] its mask; block_scores [B, T, N] (with gradient);
    kept_blocks [B, T, N] bool. Mean over queries that kept at least one block; 0 when none did."""
    with torch.no_grad():
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        probs = scores.masked_fill(~attended[:, None], float("-inf")).softmax(dim=-1).mean(dim=1)  # [B, T, S]
        probs = F.pad(probs, (0, (-probs.shape[-1]) % pool))
        mass = rearrange(probs, "b t (n p) -> b t n p", p=pool).sum(-1).masked_fill(~kept_blocks, 0.0)
        rows = kept_blocks.any(dim=-1)
        target = mass / mass.sum(dim=-1, keepdim=True).clamp_min(1e-30)
    log_indexer = block_scores.masked_fill(~kept_blocks, float("-inf")).log_softmax(dim=-1)
    terms = torch.where(kept_blocks, target * (target.clamp_min(1e-30).log() - log_indexer), 0.0)
    return terms.sum(dim=-1)[rows].mean() if rows.any() else block_scores.sum() * 0.0


class LightningIndexer(nn.Module):
    """J small heads: q_idx (J x d), one shared key k_idx (d) and a weight per head, from the detached input."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.heads, self.dim = config.indexer_heads, config.indexer_dim
        self.q = nn.Linear(config.dim, self.heads * self.dim, bias=False)
        self.k = nn.Linear(config.dim, self.dim, bias=False)
        self.weights = nn.Linear(config.dim, self.heads, bias=False)
        self.rope = (RotaryEmbedding(self.dim, config.max_sequence_length, config.rope_base)
                     if config.position == "rope" else None)

    def forward(self, x: torch.Tensor, positions: torch.Tensor):
        """x [B, T, D], positions [B, T] -> (q_idx [B, T, J, d], weights [B, T, J], k_idx [B, T, d]), at least fp32."""
        x = x.detach()
        dtype = torch.promote_types(x.dtype, torch.float32)
        q = rearrange(self.q(x), "b t (j d) -> b t j d", j=self.heads).to(dtype)
        k = self.k(x).to(dtype)[:, :, None]
        if self.rope is not None:
            cos, sin = self.rope.at(positions)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        return q, self.weights(x).to(dtype) / math.sqrt(self.heads), k[:, :, 0]


class IndexerSparseAttention(AttentionProjections):
    """qkv projection (RoPE unless position is none) -> the indexer picks keys -> softmax attention over them."""

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        self.indexer = LightningIndexer(config)
        self.top_k, self.pool = config.indexer_top_k, config.index_pool
        self.impl = config.sparse_attention_impl
        self.dense = False
        self.indexer_loss: torch.Tensor | None = None

    def set_dense(self, dense: bool) -> None:
        """Dense warm-up: attend to every earlier key (the indexer still learns toward it)."""
        self.dense = dense

    def forward(self, x, cos, sin, cache=None, positions=None) -> torch.Tensor:
        """Without a cache, positions are 0..T-1. With a LayerCache and per-row positions [B, T], write k, v and the
        indexer keys at those positions and attend over everything cached. Leaves the KL term in
        `self.indexer_loss` when gradients are on (read it with `take_indexer_loss`)."""
        B, T, _ = x.shape
        q, k, v = self.project(x, cos, sin)
        if positions is None:
            positions = torch.arange(T, device=x.device).expand(B, T)
        q_idx, weights, k_idx = self.indexer(x, positions)
        with torch.autocast(x.device.type, enabled=False):
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, H, T, d]
            if cache is not None:
                k, v, k_idx = self._write_cache(cache, positions, k, v, k_idx)
            S = k.shape[2]
            block_scores = index_scores(q_idx, weights, pool_keys(k_idx, self.pool))
            chosen, valid = choose_blocks(block_scores, positions, self.pool, self.top_k)
            if self.dense:
                attended = torch.arange(S, device=x.device) <= positions[..., None]
            else:
                attended = selection_mask(chosen, valid, positions, self.pool, S)
            if self.impl == "plain" and not self.dense and cache is None:
                y = indexed_attention_plain(q, k, v, *selection_index(chosen, valid, positions, self.pool, S))
            else:
                y = indexed_attention_fast(q, k, v, attended)
            self.indexer_loss = None
            if torch.is_grad_enabled():
                candidate = earlier_blocks(block_scores.shape[-1], positions, self.pool)
                kept = candidate if self.dense else torch.zeros_like(candidate).scatter_(-1, chosen, valid)
                self.indexer_loss = indexer_kl(q.detach(), k.detach(), attended, block_scores, kept, self.pool)
        return self.out(rearrange(y, "b h t d -> b t (h d)").to(x.dtype))

    def take_indexer_loss(self) -> torch.Tensor | None:
        loss, self.indexer_loss = self.indexer_loss, None
        return loss

    @staticmethod
    def _write_cache(cache, positions, k, v, k_idx):
        rows = torch.arange(k.shape[0], device=k.device)[:, None]
        cache.k[rows, :, positions] = k.transpose(1, 2).to(cache.k.dtype)
        cache.v[rows, :, positions] = v.transpose(1, 2).to(cache.v.dtype)
        cache.index_k[rows, positions] = k_idx.to(cache.index_k.dtype)
        length = int(positions.max()) + 1  # keys past every row's position are never attended: skip them
        return (cache.k[:, :, :length].to(k.dtype), cache.v[:, :, :length].to(v.dtype),
                cache.index_k[:, :length].to(k_idx.dtype))
