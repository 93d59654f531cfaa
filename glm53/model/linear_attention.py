"""Causal normalized linear attention with the feature map phi(z) = elu(z) + 1.

    out_t = phi(q_t)^T S_t / max(phi(q_t) . z_t, eps),   S_t = sum_{s<=t} phi(k_s) v_s^T,   z_t = sum_{s<=t} phi(k_s)

Three forms of the same function, fla-style, tested against each other:
- `linear_attention_plain` (cumulative): the reference; materializes S_t for every t ([B, T, H, d, d]).
- `linear_attention_recurrent`: one step at a time with an O(d^2) state; the ground truth for decoding.
- `linear_attention_fast` (chunked): exact quadratic attention inside chunks of C tokens plus a
  running state across chunks, never materializing a per-token d x d tensor; a sequence that fits one chunk
  is quadratic attention alone (the parallel form), which on a CPU with bf16 matrix units can beat chunks of 32,
  its products being fewer and larger (`glm53 calibrate` times chunk sizes).

Simplifications vs GLM-5.3-Flash: the released model's linear layers use a gated delta rule (a decaying,
error-correcting state update with short convolutions and output gating): `linear_attention="kda"` switches to
it (kimi_delta_attention.py). This is the older "linear
transformer" of Katharopoulos et al. 2020: no decay, no gate, no delta correction, no 1/sqrt(d) scale. As in
the reference, RoPE is applied to q and k *before* the feature map.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange

from .config import ModelConfig
from .attention import AttentionProjections

DENOMINATOR_EPS = 1e-6


def feature_map(x: torch.Tensor) -> torch.Tensor:
    return F.elu(x) + 1.0


def linear_attention_plain(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                eps: float = DENOMINATOR_EPS) -> torch.Tensor:
    """Plain reference. q, k (already feature-mapped) and v are [B, T, H, d]; returns [B, T, H, d]."""
    states = torch.einsum("bthd,bthe->bthde", k, v).cumsum(dim=1)
    normalizers = k.cumsum(dim=1)
    numerator = torch.einsum("bthd,bthde->bthe", q, states)
    denominator = torch.einsum("bthd,bthd->bth", q, normalizers).clamp_min(eps)
    return numerator / denominator[..., None]


def linear_attention_recurrent(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                               state: tuple[torch.Tensor, torch.Tensor] | None = None,
                               eps: float = DENOMINATOR_EPS):
    """Token-by-token form. Inputs [B, T, H, d]; state = (S [B, H, d, d], z [B, H, d]) or None for zeros.
    Returns (out [B, T, H, d], new state)."""
    B, T, H, d = q.shape
    if state is None:
        S = q.new_zeros(B, H, d, v.shape[-1])
        z = q.new_zeros(B, H, d)
    else:
        S, z = state
    outputs = []
    for t in range(T):
        S = S + k[:, t, :, :, None] * v[:, t, :, None, :]
        z = z + k[:, t]
        numerator = torch.einsum("bhd,bhde->bhe", q[:, t], S)
        denominator = torch.einsum("bhd,bhd->bh", q[:, t], z).clamp_min(eps)
        outputs.append(numerator / denominator[..., None])
    return torch.stack(outputs, dim=1), (S, z)


def linear_attention_step(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                          state: tuple[torch.Tensor, torch.Tensor], eps: float = DENOMINATOR_EPS) -> torch.Tensor:
    """One decoding step, updating `state` in place (decoding owns its cache). q, k, v are [B, 1, H, d];
    equal to `linear_attention_recurrent` for T = 1, with no per-step allocation of a new state."""
    S, z = state
    B, _, H, d = q.shape
    q, k, v = q.reshape(B * H, 1, d), k.reshape(B * H, d, 1), v.reshape(B * H, 1, -1)
    # the outer product as an element-wise multiply and add (the same roundings as baddbmm_, which on CPU runs
    # one tiny GEMM per row and head at these shapes)
    S.view(B * H, d, -1).add_(k * v)
    z.add_(k.view(B, H, d))
    numerator = torch.bmm(q, S.view(B * H, d, -1))  # [B*H, 1, d]
    denominator = torch.bmm(q, z.view(B * H, d, 1)).clamp_min(eps)  # [B*H, 1, 1]
    return (numerator / denominator).view(B, H, 1, -1).transpose(1, 2)


class ExclusivePrefixSum(torch.autograd.Function):
    """Over the first axis, out[n] = x[0] + ... + x[n - 1] (out[0] = 0), as N - 1 in-place row additions each way.
    (cumsum minus x took five passes with cumsum's flipping backward; a product with a strictly lower-triangular
    matrix of ones is one GEMM with K = N, whose kernels run such thin shapes several times slower than the adds.)"""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        out[0].zero_()
        for n in range(1, x.shape[0]):
            torch.add(out[n - 1], x[n - 1], out=out[n])
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        grad_x = torch.empty_like(grad)
        grad_x[-1].zero_()
        for n in range(grad.shape[0] - 2, -1, -1):
            torch.add(grad_x[n + 1], grad[n + 1], out=grad_x[n])
        return grad_x


class NormalizeSums(torch.autograd.Function):
    """sums [..., d + 1] (numerator | denominator) -> numerator / max(denominator, eps), with the backward written
    out: one division and one dot product per row into a gradient of the sums' shape, where autograd's split,
    clamp and division backwards took six passes and a concatenation."""

    @staticmethod
    def forward(ctx, sums: torch.Tensor, eps: float) -> torch.Tensor:
        denominator = sums[..., -1:].clamp_min(eps)
        out = sums[..., :-1] / denominator
        ctx.save_for_backward(out, denominator, sums[..., -1:] > eps)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        out, denominator, unclamped = ctx.saved_tensors
        if torch.compiler.is_compiling():  # out= into a strided view breaks the graph; the same values, concatenated
            grad_numerator = grad / denominator
            grad_denominator = torch.linalg.vecdot(grad_numerator, out).unsqueeze(-1).neg_() * unclamped
            return torch.cat((grad_numerator, grad_denominator), dim=-1), None
        grad_sums = grad.new_empty(*grad.shape[:-1], grad.shape[-1] + 1)
        torch.div(grad, denominator, out=grad_sums[..., :-1])
        # d out / d denominator = -out / denominator, where the clamp let the denominator through
        grad_denominator = torch.linalg.vecdot(grad_sums[..., :-1], out).unsqueeze(-1)
        torch.mul(grad_denominator.neg_(), unclamped, out=grad_sums[..., -1:])
        return grad_sums, None


class ChunkRows(torch.autograd.Function):
    """[B, T, H, d] -> contiguous chunk-major rows [N, B, H, C, d] (plus a column of ones with `ones_column`) in
    `dtype`, zero past T; the backward copies the gradient back into a contiguous [B, T, H, d], so that the
    element-wise backwards before it (the feature map's, RoPE's) run on contiguous memory."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, chunks: int, chunk: int, dtype: torch.dtype, ones_column: bool) -> torch.Tensor:
        B, T, H, d = x.shape
        rows = x.new_empty(chunks, B, H, chunk, d + ones_column, dtype=dtype)
        if ones_column:
            rows[..., d].fill_(1.0)
        full, tail = divmod(T, chunk)
        if tail:
            rows[full, :, :, tail:].zero_()
        _copy_positions(rows, x, to_chunks=True)
        ctx.shape, ctx.dtype = x.shape, x.dtype
        return rows

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        grad_x = grad.new_empty(ctx.shape, dtype=ctx.dtype)
        _copy_positions(grad, grad_x, to_chunks=False)
        return grad_x, None, None, None, None


def _copy_positions(chunk_major: torch.Tensor, by_position: torch.Tensor, to_chunks: bool) -> None:
    """Copy between [B, T, H, e] and the first e columns of its chunk-major layout [N, B, H, C, e'], over the T
    positions: the full chunks in one copy, a partial last chunk in another."""
    B, T, H, e = by_position.shape
    full, tail = divmod(T, chunk_major.shape[3])
    by_chunk = chunk_major.permute(1, 0, 3, 2, 4)[..., :e]  # [B, N, C, H, e], a view
    pairs = [(by_chunk[:, :full], by_position[:, :T - tail].unflatten(1, (full, -1)))] if full else []
    if tail:
        pairs.append((by_chunk[:, full, :tail], by_position[:, T - tail:]))
    for rows, positions in pairs:
        rows.copy_(positions) if to_chunks else positions.copy_(rows)


class CausalChunkSums(torch.autograd.Function):
    """Inside each chunk, sums_i = sum_{j <= i} (q_i . k_j) [v_j | 1]: the causal quadratic attention of the chunk,
    not yet divided (numerator | denominator). q, k [M, C, d] and v1 [M, C, d + 1] contiguous, in the products'
    dtype; returns [M, C, d + 1] in that dtype. The causal mask is tril_ in place, forward and backward (the
    composed form's masked_fill took a boolean mask and a pass of its own each way), and the backward computes
    the scores again rather than keeping them: C x C per chunk is the layer's largest tensor."""

    @staticmethod
    def forward(ctx, q: torch.Tensor, k: torch.Tensor, v1: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(q, k, v1)
        return torch.bmm(torch.bmm(q, k.transpose(1, 2)).tril_(), v1)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        q, k, v1 = ctx.saved_tensors
        grad = grad.to(q.dtype)
        scores = torch.bmm(q, k.transpose(1, 2)).tril_()
        grad_v1 = torch.bmm(scores.transpose(1, 2), grad)
        grad_scores = torch.bmm(grad, v1.transpose(1, 2)).tril_()
        return torch.bmm(grad_scores, k), torch.bmm(grad_scores.transpose(1, 2), q), grad_v1


def linear_attention_fast(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunk: int = 32,
                          state: tuple[torch.Tensor, torch.Tensor] | None = None,
                          eps: float = DENOMINATOR_EPS, return_state: bool = False,
                          matmul_dtype: torch.dtype | None = None):
    """Chunked form, equal to the two above. Inputs [B, T, H, d]; any T: ceil(T / chunk) chunks of equal size
    (at most `chunk` tokens; the tail zero-padded), and a sequence that fits one chunk is one chunk of exactly T
    tokens with no inter-chunk products at all (the parallel form).

    v gets an extra column of ones, so each matmul that sums values also sums the normalizer: the state is
    [S | z] (d x (d + 1)) and the denominator is the last column of the numerator's matmul.
    `matmul_dtype` (bf16 with `linear_attention_core="bf16"`): the chunk-sized matrix products take their operands
    in it (each product still sums in fp32 inside the kernel and is rounded once); the prefix over chunks, the
    sums and the division stay in fp32 (or fp64 inputs' fp64), also when the inputs come in bf16."""
    B, T, H, d = q.shape
    chunks = -(-T // chunk)
    size = -(-T // chunks)
    low = matmul_dtype or q.dtype
    high = torch.promote_types(q.dtype, torch.float32)  # the prefix sums and the division
    # Zero k and v on padded positions so they add nothing to the state; they come after every real position,
    # so causality already keeps them out of real outputs.
    qc, kc = (ChunkRows.apply(t, chunks, size, low, False) for t in (q, k))
    vc = ChunkRows.apply(v, chunks, size, low, True)  # [N, B, H, C, d + 1]
    sums = CausalChunkSums.apply(*(t.flatten(0, 2) for t in (qc, kc, vc))).view(vc.shape).to(high)
    carried = None if state is None else torch.cat((state[0], state[1][..., None]), dim=-1).to(high)
    chunk_states = None
    if chunks > 1 or return_state:
        chunk_states = (kc.transpose(-1, -2) @ vc).to(high)  # [N, B, H, d, d + 1]: one state per chunk
    # exclusive prefix over chunks: chunk n sees the sum of chunks 0..n-1 (plus any carried-in state)
    prefix = carried
    if chunks > 1:
        prefix = ExclusivePrefixSum.apply(chunk_states)
        if carried is not None:
            prefix = prefix + carried
    if prefix is not None:
        sums = sums + (qc @ prefix.to(low))  # the bf16 product joins the fp32 sums without a cast of its own
    out = rearrange(NormalizeSums.apply(sums, eps), "n b h c d -> b (n c) h d")[:, :T]
    if not return_state:
        return out
    final = chunk_states.sum(dim=0)
    if carried is not None:
        final = final + carried
    return out, (final[..., :-1], final[..., -1])


class LinearAttention(AttentionProjections):
    """qkv projection -> RoPE on q, k -> phi -> causal linear attention -> output projection (no biases)."""

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        self.impl = config.linear_attention_impl
        self.chunk = config.linear_attention_chunk
        self.core_dtype = config.linear_attention_core

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache=None,
                positions=None) -> torch.Tensor:
        """With a LayerCache, continue from its (S, z) state and leave the new state in it."""
        B, T, _ = x.shape
        low = torch.bfloat16 if self.core_dtype == "bf16" and torch.is_autocast_enabled(x.device.type) else None
        # With the bf16 core, q and k leave RoPE in bf16 and the feature map runs on them there: half the memory
        # traffic, and no cast before the chunk products, which round them to bf16 anyway. elu(x) + 1 in bf16 is off
        # by up to 2^-9 absolutely where it is small (x << 0: elu near -1, then + 1), not relatively as a rounded fp32
        # value; beside the O(1) terms of each sum that is bf16's rounding again.
        q, k, v = self.project(x, cos, sin, dtype=low if cache is None and self.impl == "fast" else None)
        q, k = feature_map(q), feature_map(k)
        with torch.autocast(x.device.type, enabled=False):
            y = self._core(q, k, v, cache, low)
        return self.out(y.reshape(B, T, -1).to(x.dtype))

    def _core(self, q, k, v, cache, matmul_dtype):
        if cache is not None:
            if q.shape[1] == 1:
                y = linear_attention_step(q, k, v, cache.state)
            else:
                y, cache.state = linear_attention_fast(q, k, v, chunk=self.chunk, state=cache.state,
                                                       return_state=True, matmul_dtype=matmul_dtype)
            return y
        if self.impl == "fast":
            return linear_attention_fast(q, k, v, chunk=self.chunk, matmul_dtype=matmul_dtype)
        return linear_attention_plain(q, k, v)
