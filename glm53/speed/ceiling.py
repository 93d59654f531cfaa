"""The matmul ceiling and a training step's FLOPs: what `glm53 bench` and `glm53 bench --profile` measure a step
against (a square matmul's best rate in the step's precision, measured on this machine's threads beside the step)."""

from __future__ import annotations

import time

import torch

from ..model.config import ModelConfig
from ..model.sparse_attention import sparse_attention_mask

PRECISION_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def matmul_gflops(dtype: torch.dtype, size: int = 2048, repeats: int = 5) -> float:
    """Best-of GFLOP/s of a square matmul in `dtype` on this machine's threads."""
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2 * size**3 / best / 1e9


def matmul_ceiling(size: int = 2048, repeats: int = 5) -> dict:
    """Best-of GFLOP/s of a square matmul in fp32 and bf16 on this machine's threads."""
    return {name: matmul_gflops(dtype, size, repeats) for name, dtype in PRECISION_DTYPES.items()}


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def flops_per_token(cfg: ModelConfig, sequence_length: int) -> dict:
    """Training FLOPs per token: 6 x active matmul parameters + 3 x attention's forward FLOPs."""
    D, H, d, h = cfg.dim, cfg.heads, cfg.head_dim, cfg.expert_hidden
    expert = D * 2 * h + h * D
    per_layer = 3 * D * D + D * D + D * cfg.experts + (cfg.top_k + cfg.shared_experts) * expert
    matmul_params = cfg.layers * per_layer + cfg.vocab_size * D
    sparse_layers = sum(cfg.is_sparse_layer(i) for i in range(cfg.layers))
    keys = sparse_attention_mask(sequence_length, cfg.sparse_window, cfg.sparse_stride).sum().item() / sequence_length
    attention = (cfg.layers - sparse_layers) * 4 * H * d * d + sparse_layers * 4 * keys * D
    return {"active_matmul_parameters": matmul_params, "attention_forward_flops": attention,
            "train_flops_per_token": 6 * matmul_params + 3 * attention, "mean_sparse_keys": keys}
