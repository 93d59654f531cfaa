"""Manifold-constrained hyper-connections (mHC, `residual="mhc"`): the released GLM-5.3-Flash's residual streams.

With S streams held as [B, T, S, D], per token, from x = RMSNorm(the S streams flattened to S*D):

    H_pre  = sigmoid(a_pre * x W_pre + b_pre) + eps        [S]      how the layer reads the streams
    H_post = 2 sigmoid(a_post * x W_post + b_post)         [S]      how it writes its update back
    H_res  = SinkhornKnopp(exp(a_res * x W_res + b_res))   [S, S]   how the streams mix, doubly stochastic
    update = layer(sum_s H_pre[s] stream_s)
    stream_i <- sum_j H_res[i, j] stream_j + H_post[i] update

Why the projection: a product of doubly stochastic matrices is doubly stochastic, so however deep the stack the
streams' mixing neither amplifies nor vanishes (its composite gain stays 1); unconstrained mixing matrices can
grow with depth. `composite_gain` measures it.

Initialisation (our choice): the gates a_* start at 0.01 so the input-dependent part starts small; b_pre reads
the streams' mean (H_pre = 1/S), b_post writes the whole update (H_post = 1), and b_res starts near the identity
(0 on the diagonal, -4 elsewhere), so at the start mHC behaves like hyper-connections without stream mixing.

Simplifications vs GLM-5.3-Flash: no fused kernel and no recomputation trick; Sinkhorn runs in log space for
`sinkhorn_iterations` rounds (rows, then columns) in fp32.
"""

from __future__ import annotations

import math

import torch
from einops import rearrange
from torch import nn

from .norm import RMSNorm

PRE_EPS = 1e-6
OFF_DIAGONAL_INIT = -4.0
GATE_INIT = 0.01


def sinkhorn_knopp(logits: torch.Tensor, iterations: int) -> torch.Tensor:
    """exp(logits) [..., S, S] projected toward the doubly stochastic matrices: alternately normalise rows and
    columns, `iterations` times each, in log space. Columns sum to 1 exactly (they go last), rows within a
    tolerance that shrinks with the iterations."""
    log_m = logits.to(torch.promote_types(logits.dtype, torch.float32))
    for _ in range(iterations):
        log_m = log_m - log_m.logsumexp(dim=-1, keepdim=True)
        log_m = log_m - log_m.logsumexp(dim=-2, keepdim=True)
    return log_m.exp()


class ManifoldHyperConnection(nn.Module):
    def __init__(self, streams: int, dim: int, layer: nn.Module, iterations: int = 20, eps: float = 1e-6):
        super().__init__()
        S = streams
        self.streams, self.iterations, self.layer = S, iterations, layer
        self.norm = RMSNorm(S * dim, eps)
        self.project = nn.Linear(S * dim, 2 * S + S * S, bias=False)
        self.gates = nn.Parameter(torch.full((3,), GATE_INIT))  # a_pre, a_post, a_res
        self.pre_bias = nn.Parameter(torch.full((S,), math.log(1 / (S - 1)) if S > 1 else 10.0))  # sigmoid = 1/S
        self.post_bias = nn.Parameter(torch.zeros(S))
        self.res_bias = nn.Parameter(torch.full((S, S), OFF_DIAGONAL_INIT).fill_diagonal_(0.0))

    def open_streams(self, x: torch.Tensor) -> torch.Tensor:
        """The embeddings [B, T, D] copied into S streams [B, T, S, D] (token-major: each token's streams are
        normalised and projected together; a view, no copy is made)."""
        B, T, D = x.shape
        return x[:, :, None, :].expand(B, T, self.streams, D)

    def close_streams(self, streams: torch.Tensor) -> torch.Tensor:
        """The streams' mean [B, T, D]: the model's final hidden state."""
        return streams.mean(dim=2)

    def weights(self, streams: torch.Tensor):
        """streams [B, T, S, D] -> (H_pre [B, T, S], H_post [B, T, S], H_res [B, T, S, S]), in fp32 at least."""
        pre, post, res_logits = self.read_write_and_mixing_logits(streams)
        return pre, post, sinkhorn_knopp(res_logits, self.iterations)

    def read_write_and_mixing_logits(self, streams: torch.Tensor):
        """(H_pre, H_post, the mixing's logits [B, T, S, S] before Sinkhorn)."""
        S, dtype = self.streams, torch.promote_types(streams.dtype, torch.float32)
        dynamic = self.project(self.norm(rearrange(streams, "b t s d -> b t (s d)"))).to(dtype)
        a_pre, a_post, a_res = self.gates.to(dtype)
        pre = torch.sigmoid(a_pre * dynamic[..., :S] + self.pre_bias.to(dtype)) + PRE_EPS
        post = 2 * torch.sigmoid(a_post * dynamic[..., S:2 * S] + self.post_bias.to(dtype))
        res_logits = a_res * rearrange(dynamic[..., 2 * S:], "b t (i j) -> b t i j", i=S) + self.res_bias.to(dtype)
        return pre, post, res_logits

    def forward(self, streams: torch.Tensor, *args, **kwargs):
        """streams [B, T, S, D] -> (new streams, the layer's auxiliary outputs)."""
        pre, post, res = (w.to(streams.dtype) for w in self.weights(streams))
        mixed = torch.einsum("btsd,bts->btd", streams, pre)
        update, *aux = self.layer(mixed, *args, **kwargs)
        mixed_streams = torch.einsum("btij,btjd->btid", res, streams)
        return mixed_streams + post[..., None] * update[:, :, None, :], *aux


@torch.no_grad()
def composite_gain(model, input_ids: torch.Tensor) -> dict:
    """How much the residual streams' mixing can amplify over the whole stack: the product of every layer's S x S
    mixing matrix, per token, and its largest singular value (mean and max over tokens). Beside it, the same product
    of the unprojected matrices exp(logits) the Sinkhorn step starts from (`unconstrained_*`): what the mixing would
    do without the projection. Today's hyper-connections add the update to unmixed streams: their mixing is the
    identity at every layer, gain exactly 1."""
    mixings, raw = [], []

    def capture(module, args):
        logits = module.read_write_and_mixing_logits(args[0])[2]
        mixings.append(sinkhorn_knopp(logits, module.iterations))
        raw.append(logits.exp())

    hooks = [m.register_forward_pre_hook(capture) for m in model.modules() if isinstance(m, ManifoldHyperConnection)]
    try:
        model(input_ids)
    finally:
        for h in hooks:
            h.remove()
    if not mixings:
        return {"layers": 0, "mean": 1.0, "max": 1.0, "unconstrained_mean": 1.0, "unconstrained_max": 1.0}
    result = {"layers": len(mixings)}
    for prefix, matrices in (("", mixings), ("unconstrained_", raw)):
        product = matrices[0]
        for m in matrices[1:]:
            product = m @ product
        gains = torch.linalg.matrix_norm(product, ord=2)
        result.update({f"{prefix}mean": float(gains.mean()), f"{prefix}max": float(gains.max())})
    return result
