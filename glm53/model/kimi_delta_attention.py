"""Kimi delta attention (KDA): the released GLM-5.3-Flash's linear attention (`linear_attention="kda"`).

Per head a state S (d_k x d_v). For each token t, with a per-channel log-decay g_t (every entry in
(lower_bound, 0)) and a write strength beta_t in (0, 1):

    S <- diag(exp(g_t)) S                   forget, one rate per key channel
    u_t = beta_t (v_t - S^T k_t)            the delta rule: write only what S does not already predict for k_t
    S <- S + k_t u_t^T
    o_t = S^T q_t

Three forms of the same function, fla-style, tested against each other:
- `kda_plain`: the recurrent loop above, one token at a time (the reference).
- `kda_step`: one decoding token, updating a cached state in place.
- `kda_fast`: chunks of C tokens. Within a chunk, with G_t the cumulative log-decay since the chunk's start
  and S_0 the state entering it, every u_t depends on S_0 and on the u_i before it through a unit lower
  triangular system: (I + A) u = diag(beta) (v - (k * exp(G)) S_0), A[t, i] = beta_t sum_c k_t,c k_i,c
  exp(G_t,c - G_i,c) for i < t. It is solved once per chunk for all chunks together, by multiplying with
  (I + A)^-1 built from a few matmuls (`unit_lower_inverse`; the "UT transform": fla-org/flash-linear-attention
  `fla/ops/kda/naive.py` has the same idea), leaving only a short loop over
  chunks to carry S. exp(G_t - G_i) is split as exp(G_t) exp(-G_i), which is why chunk x |lower_bound| is capped
  (exp(80) still fits fp32; see ModelConfig.kda_chunk).

The layer around the core, as in the released model: q, k, v projections pass a short causal depthwise
convolution (kernel 4) and SiLU; q and k are L2-normalised per head (q also scaled by 1/sqrt(d_k));
beta = sigmoid(W_beta x); g = lower_bound * sigmoid(exp(A_log) * (W_up W_down x + dt_bias)); the output is
RMSNorm(o) * sigmoid(W_gate x), then the output projection. The convolution too has a plain form (`F.conv1d`)
and a fast one (shifted multiply-adds with a hand-written backward, `CausalConvFast`), tested equal.

Simplifications vs GLM-5.3-Flash: d_k = d_v = head_dim with as many key heads as value heads; no RoPE in these
layers (as released: the convolution and the decay carry order); our initialisation of the decay (A_log = 0,
dt_bias chosen so that at x = 0 each channel keeps between 90% and 99.9% of its state per token, spread
log-uniformly), not the released model's.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from .config import ModelConfig
from .norm import RMSNorm


def kda_plain(q, k, v, g, beta, state: torch.Tensor | None = None):
    """The recurrent reference. q, k, g [B, T, H, dk]; v [B, T, H, dv]; beta [B, T, H];
    state S [B, H, dk, dv] or None for zeros. Returns (o [B, T, H, dv], final S)."""
    B, T, H, dk = k.shape
    S = k.new_zeros(B, H, dk, v.shape[-1]) if state is None else state
    outputs = []
    for t in range(T):
        S = S * g[:, t].exp()[..., None]
        u = beta[:, t, :, None] * (v[:, t] - torch.einsum("bhk,bhkv->bhv", k[:, t], S))
        S = S + k[:, t, :, :, None] * u[:, :, None, :]
        outputs.append(torch.einsum("bhk,bhkv->bhv", q[:, t], S))
    return torch.stack(outputs, dim=1), S


def kda_step(q, k, v, g, beta, state: torch.Tensor) -> torch.Tensor:
    """One decoding token, updating `state` [B, H, dk, dv] in place; q, k, g, v [B, 1, H, d], beta [B, 1, H].
    Equal to `kda_plain` for T = 1. Returns o [B, 1, H, dv]."""
    B, _, H, dk = k.shape
    S = state.view(B * H, dk, -1)
    k_row = k.reshape(B * H, 1, dk)
    S.mul_(g.reshape(B * H, dk, 1).exp())
    u = beta.reshape(B * H, 1, 1) * (v.reshape(B * H, 1, -1) - torch.bmm(k_row, S))
    S.add_(k_row.transpose(1, 2) * u)
    return torch.bmm(q.reshape(B * H, 1, dk), S).view(B, H, 1, -1).transpose(1, 2)


def unit_lower_inverse(A: torch.Tensor) -> torch.Tensor:
    """(I + A)^-1 for strictly lower triangular A [..., C, C], as (I - A)(I + A^2)(I + A^4)...: A is nilpotent
    (A^C = 0), so the product ends after log2(C) factors. A few batched matmuls, which CPUs run far faster than a
    batched triangular solve of many tiny systems (and their backward is matmuls too)."""
    eye = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device)
    inverse, power = eye - A, A
    for _ in range(max(0, math.ceil(math.log2(A.shape[-1])) - 1)):
        power = power @ power
        inverse = inverse + inverse @ power
    return inverse


def kda_fast(q, k, v, g, beta, chunk: int = 16, state: torch.Tensor | None = None):
    """Chunked form, equal to `kda_plain`. Same shapes and return; any T (the tail chunk is padded with
    tokens that neither decay nor write: g = 0, k = 0, beta = 0)."""
    B, T, H, dk = k.shape
    pad = (-T) % chunk
    if pad:
        q, k, v, g = (F.pad(t, (0, 0, 0, 0, 0, pad)) for t in (q, k, v, g))
        beta = F.pad(beta, (0, 0, 0, pad))
    q, k, v, g = (rearrange(t, "b (n c) h d -> b h n c d", c=chunk) for t in (q, k, v, g))
    beta = rearrange(beta, "b (n c) h -> b h n c", c=chunk)[..., None]

    G = g.cumsum(dim=-2)  # log-decay from the chunk's start through token t, per channel
    # the chunk's whole decay [B, H, N, dk] as a sum, not G's last row: selecting a row makes backward fill a
    # full-size zero gradient
    decay_in, chunk_decay = G.exp(), g.sum(dim=-2).exp()
    k_later, k_earlier, q_later = k * decay_in, k * (-G).exp(), q * decay_in
    strictly_lower = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril(-1)
    A = (beta * (k_later @ k_earlier.transpose(-1, -2))).masked_fill(~strictly_lower, 0.0)
    # u = u_v - w S_0: both parts solved for every chunk at once, before the sequential loop (two products, not
    # one on the concatenation: slicing its result would make backward fill and copy full-size gradients)
    inverse = unit_lower_inverse(A)
    u_v, w = inverse @ (beta * v), inverse @ (beta * k_later)
    scores = (q_later @ k_earlier.transpose(-1, -2)).tril()  # [B, H, N, C, C], i <= t
    k_to_end = k_earlier * chunk_decay[..., None, :]  # each token's key decayed to the chunk's end

    S = q.new_zeros(B, H, dk, v.shape[-1]) if state is None else state
    outputs = []
    # unbind once: indexing chunk n of each tensor would make backward build a full-size zero gradient per chunk
    for u_v_n, w_n, q_n, scores_n, decay_n, k_n in zip(*(t.unbind(2) for t in (u_v, w, q_later, scores,
                                                                                chunk_decay[..., None], k_to_end))):
        u = u_v_n - w_n @ S
        outputs.append(q_n @ S + scores_n @ u)
        S = decay_n * S + k_n.transpose(-1, -2) @ u
    out = rearrange(torch.stack(outputs, dim=2), "b h n c d -> b (n c) h d")
    return (out[:, :T] if pad else out), S


def causal_conv_plain(history: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Depthwise convolution over time as `F.conv1d` computes it (the reference). history [B, T + K - 1, C] (the
    K - 1 tokens before the first output, then the T inputs); weight [C, 1, K], tap K - 1 on the current token.
    Returns [B, T, C] in history's dtype (bf16 under autocast)."""
    y = F.conv1d(history.transpose(1, 2), weight.to(history.dtype), groups=history.shape[-1])
    return y.transpose(1, 2)


class CausalConvFast(torch.autograd.Function):
    """The same convolution as K shifted multiply-adds over the [B, T, C] layout, in fp32 (fp64 stays fp64), with a
    hand-written backward. Why: a depthwise `conv1d`'s backward on the CPU is several times its forward (the weight
    gradient especially, and in bf16 most of all), and its [B, C, T] output made the SiLU after it run on a
    transposed, strided tensor."""

    @staticmethod
    def forward(ctx, history: torch.Tensor, taps: torch.Tensor) -> torch.Tensor:
        """history [B, T + K - 1, C]; taps [K, C] (contiguous rows: a strided tap is several times slower)."""
        compute = torch.promote_types(history.dtype, torch.float32)
        h, w = history.to(compute), taps.to(compute)
        K, T = w.shape[0], history.shape[1] - w.shape[0] + 1
        y = h[:, :T] * w[0]
        for j in range(1, K):
            y.addcmul_(h[:, j:j + T], w[j])
        ctx.save_for_backward(h, w)
        ctx.dtypes = history.dtype, taps.dtype
        return y

    @staticmethod
    def backward(ctx, grad_y: torch.Tensor):
        h, w = ctx.saved_tensors
        K, T, L = w.shape[0], grad_y.shape[1], h.shape[1]
        g = grad_y.to(h.dtype).contiguous()
        padded = F.pad(g, (0, 0, K - 1, K - 1))  # history position s received grad_y[s - j] through tap j
        grad_h = padded[:, K - 1:K - 1 + L] * w[0]
        for j in range(1, K):
            grad_h.addcmul_(padded[:, K - 1 - j:K - 1 - j + L], w[j])
        product = torch.empty_like(g)  # reused: a fresh large buffer per tap costs more than the multiply
        grad_w = torch.stack([torch.mul(g, h[:, j:j + T], out=product).sum((0, 1)) for j in range(K)])
        return grad_h.to(ctx.dtypes[0]), grad_w.to(ctx.dtypes[1])


def causal_conv_fast(history: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Equal to `causal_conv_plain` up to rounding; returns fp32 (or fp64), which the fp32 core wants anyway."""
    return CausalConvFast.apply(history, rearrange(weight, "c 1 k -> k c").contiguous())


class ShortConvolution(nn.Module):
    """Causal depthwise convolution over time (kernel K, no bias) followed by SiLU. With a cache, the last K - 1
    inputs of each row are kept in `cache.conv` [B, K - 1, channels] and prepended to the next call's input."""

    def __init__(self, channels: int, kernel: int, impl: str = "fast"):
        super().__init__()
        self.kernel = kernel
        self.convolve = causal_conv_fast if impl == "fast" else causal_conv_plain
        self.weight = nn.Parameter(torch.empty(channels, 1, kernel))
        nn.init.normal_(self.weight, 0.0, 1.0 / math.sqrt(kernel))

    def forward(self, x: torch.Tensor, cache=None) -> torch.Tensor:
        """x [B, T, C] -> [B, T, C]."""
        if cache is None:
            history = F.pad(x, (0, 0, self.kernel - 1, 0))
        else:
            history = torch.cat((cache.conv.to(x.dtype), x), dim=1)
            cache.conv = history[:, history.shape[1] - (self.kernel - 1):].to(cache.conv.dtype)
        return F.silu(self.convolve(history, self.weight))


def initial_dt_bias(heads: int, head_dim: int, lower_bound: float, keep=(0.9, 0.999)) -> torch.Tensor:
    """dt_bias [heads * head_dim] such that at x = 0 (and A_log = 0) channel c keeps a fraction exp(g_c) of its
    state per token, spread log-uniformly over 1 - keep (our choice: slow forgetting at the start)."""
    forget = torch.logspace(math.log10(1 - keep[0]), math.log10(1 - keep[1]), head_dim, dtype=torch.float64)
    fraction = -torch.log1p(-forget) / -lower_bound  # g / lower_bound, the sigmoid's target value
    return torch.logit(fraction).float().repeat(heads)


class KimiDeltaAttention(nn.Module):
    """The KDA layer: projections, short convolutions, decay and beta, the core (plain or fast), gated norm."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        D, H, d = config.dim, config.heads, config.head_dim
        self.heads, self.head_dim = H, d
        self.impl = config.linear_attention_impl
        self.chunk = config.kda_chunk
        self.lower_bound = config.kda_decay_lower_bound
        self.qkv = nn.Linear(D, 3 * D, bias=False)
        self.conv = ShortConvolution(3 * D, config.kda_conv_kernel, config.linear_attention_impl)
        self.beta = nn.Linear(D, H, bias=False)
        self.decay_down = nn.Linear(D, config.kda_decay_rank, bias=False)
        self.decay_up = nn.Linear(config.kda_decay_rank, D, bias=False)
        self.A_log = nn.Parameter(torch.zeros(H))
        self.dt_bias = nn.Parameter(initial_dt_bias(H, d, config.kda_decay_lower_bound))
        self.gate = nn.Linear(D, D, bias=False)
        self.output_norm = RMSNorm(d, config.norm_eps)
        self.out = nn.Linear(D, D, bias=False)

    def decay(self, x: torch.Tensor) -> torch.Tensor:
        """Per-channel log-decay g [B, T, H, d], every entry in (lower_bound, 0)."""
        dtype = torch.promote_types(x.dtype, torch.float32)
        z = rearrange(self.decay_up(self.decay_down(x)), "b t (h d) -> b t h d", h=self.heads).to(dtype)
        z = self.A_log.to(dtype).exp()[:, None] * (z + self.dt_bias.to(dtype).view(self.heads, -1))
        return self.lower_bound * torch.sigmoid(z)

    def forward(self, x: torch.Tensor, cos=None, sin=None, cache=None, positions=None) -> torch.Tensor:
        """x [B, T, D]. cos and sin are accepted and unused (no RoPE in KDA layers). With a LayerCache, continue
        from its state (S,) and convolution tail and leave the new ones in it."""
        B, T, _ = x.shape
        qkv = self.conv(self.qkv(x), cache)
        dtype = torch.promote_types(x.dtype, torch.float32)  # the core runs in fp32 (fp64 in tests) under autocast
        q, k, v = (t.to(dtype) for t in qkv.unflatten(-1, (3, self.heads, -1)).unbind(2))
        q = F.normalize(q, dim=-1) / math.sqrt(self.head_dim)
        k = F.normalize(k, dim=-1)
        beta = torch.sigmoid(self.beta(x).to(dtype))
        g = self.decay(x).to(dtype)
        with torch.autocast(x.device.type, enabled=False):
            if cache is not None and T == 1:
                o = kda_step(q, k, v, g, beta, cache.state[0])
            elif cache is not None:
                o, S = kda_fast(q, k, v, g, beta, self.chunk, state=cache.state[0])
                cache.state = (S,)
            elif self.impl == "fast":
                o, _ = kda_fast(q, k, v, g, beta, self.chunk)
            else:
                o, _ = kda_plain(q, k, v, g, beta)
        gate = torch.sigmoid(rearrange(self.gate(x), "b t (h d) -> b t h d", h=self.heads))
        o = self.output_norm(o.to(x.dtype)) * gate
        return self.out(o.reshape(B, T, -1))
