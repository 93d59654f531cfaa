"""The architecture, one concept a file. Read in this order:

    config.py             ModelConfig: every size and switch, defaults = the reference 25.7M model
    rope.py               rotary position embedding
    norm.py               RMSNorm: plain (torch's rms_norm), fast (backward written out)
    attention.py          what the softmax and elu attentions share: qkv projection with RoPE, output projection
    linear_attention.py   elu+1 linear attention: plain (cumulative), recurrent, fast (chunked)
    kimi_delta_attention.py  the released model's linear attention (KDA): plain (recurrent), fast (chunked), step
    sparse_attention.py   sliding window + strided anchors: plain (gathered), fast (masked SDPA)
    indexer_attention.py  the released model's sparse attention: a lightning indexer picks each query's keys;
                          plain (gathered), fast (masked SDPA)
    moe.py                router (softmax + balance loss, or the released sigmoid + bias balancing), SwiGLU
                          experts: plain (looped), fast (grouped)
    hyper_connections.py  4 residual streams (stream-major) with learned read/write weights: plain (multiply and
                          sum), fast (matrix-vector read, rank-1 write)
    manifold_hyper_connections.py  the released model's streams (mHC): input-dependent, Sinkhorn-projected mixing
    multi_token_prediction.py      the released model's MTP block: predicts the token after next (a draft model)
    cache.py              decoding state: recurrent state per linear layer, KV cache per sparse layer
    model.py              GLM53: the blocks assembled, parameter counts, save/load
    saved.py              a saved folder's metadata.json (its weights' and config's sha256) and the check of it

Axis names in einops patterns and shape comments: b batch, t time (tokens), h heads, d head dimension
(e the value dimension where it differs), n chunks, c tokens in a chunk, s residual streams, w keys a query
sees in the plain sparse form, e experts in the MoE, D model width; j indexer heads, s keys where a query
meets every key, p keys in a pooled block.
"""

from .config import ModelConfig

__all__ = ["GLM53", "ModelAux", "ModelConfig"]


def __getattr__(name: str):  # GLM53 and ModelAux lazily: config.py is light, model.py loads torch
    if name in ("GLM53", "ModelAux"):
        from . import model

        return getattr(model, name)
    raise AttributeError(f"module 'glm53.model' has no attribute {name!r}")
