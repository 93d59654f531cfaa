"""A miniature vision tower feeding the language model, and a direct-patch baseline.

Faithful miniature (the shape of GLM-5.3-Flash's image path at teaching scale):
    32x32 RGB -> 4x4 patches (8x8 grid = 64 tokens) + learned positions
    -> 2 bidirectional transformer blocks (RMSNorm, attention with per-head q/k RMSNorm, SwiGLU)
    -> post-vision RMSNorm -> learned 2x2 spatial merge (64 -> 16 tokens) -> gated projector to the LM width.
Baseline: one strided convolution straight to 16 tokens of LM width plus learned positions.

Both feed the same sequence: BOS <image_start> <image> x 16 <image_end> prompt bytes; the 16 placeholder
embeddings are replaced by the visual features and the rest is the ordinary language-model forward.

Simplifications vs GLM-5.3-Flash: tiny widths and depth, fixed 32x32 input (no dynamic resolution, no 2D/3D
RoPE in the vision encoder, no video), learned absolute positions, and the projector is one gated MLP.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from ..data.tokenizer import BOS_ID, IMAGE_END_ID, IMAGE_PLACEHOLDER_ID, IMAGE_START_ID
from ..model.model import GLM53
from ..model.norm import RMSNorm

VISUAL_TOKENS = 16


@dataclass
class VisionConfig:
    image_size: int = 32
    patch: int = 4
    channels: int = 3
    hidden: int = 32
    depth: int = 2
    heads: int = 4
    intermediate: int = 64
    merge: int = 2
    projector_hidden: int = 128
    # Std of the learned position table at init (both towers). The miniature keeps 0.02; the full-model pilot
    # needs 0.1 (see vision_train.PILOT_VISION): at 0.02 the patch features (RMS ~0.2) drown the positions and
    # the frozen 192-wide model cannot tell where a stroke is (mirrored digits such as 2 and 5 look alike).
    # In the miniature 0.1 did not help the comparison: seeds 1-6 and 42 gave faithful 200 172 197 200 200 200
    # 200 vs baseline 195 200 200 200 191 200 198 (pooled McNemar favours the baseline, p = 0.04).
    position_std: float = 0.02
    eps: float = 1e-5

    @property
    def grid(self) -> int:
        return self.image_size // self.patch

    def __post_init__(self) -> None:
        if self.hidden % self.heads:
            raise ValueError(f"VisionConfig: hidden ({self.hidden}) must be divisible by heads ({self.heads})")
        if (self.grid // self.merge) ** 2 != VISUAL_TOKENS:
            raise ValueError(f"VisionConfig: the merged grid must give {VISUAL_TOKENS} tokens")


class VisionAttention(nn.Module):
    """Bidirectional multi-head attention with RMSNorm on each head's queries and keys."""

    def __init__(self, cfg: VisionConfig):
        super().__init__()
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.hidden, 3 * cfg.hidden)
        self.q_norm = RMSNorm(cfg.hidden // cfg.heads, cfg.eps)
        self.k_norm = RMSNorm(cfg.hidden // cfg.heads, cfg.eps)
        self.proj = nn.Linear(cfg.hidden, cfg.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = rearrange(self.qkv(x), "b n (three h d) -> three b h n d", three=3, h=self.heads)
        y = F.scaled_dot_product_attention(self.q_norm(q), self.k_norm(k), v)
        return self.proj(rearrange(y, "b h n d -> b n (h d)"))


class VisionBlock(nn.Module):
    def __init__(self, cfg: VisionConfig):
        super().__init__()
        self.norm1 = RMSNorm(cfg.hidden, cfg.eps)
        self.attention = VisionAttention(cfg)
        self.norm2 = RMSNorm(cfg.hidden, cfg.eps)
        self.gate = nn.Linear(cfg.hidden, cfg.intermediate)
        self.up = nn.Linear(cfg.hidden, cfg.intermediate)
        self.down = nn.Linear(cfg.intermediate, cfg.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class GatedProjector(nn.Module):
    """Vision width -> LM width: linear, LayerNorm, GELU, then a SwiGLU-style gated MLP."""

    def __init__(self, in_dim: int, out_dim: int, hidden: int):
        super().__init__()
        self.inp = nn.Linear(in_dim, out_dim, bias=False)
        self.norm = nn.LayerNorm(out_dim)
        self.gate = nn.Linear(out_dim, hidden, bias=False)
        self.up = nn.Linear(out_dim, hidden, bias=False)
        self.down = nn.Linear(hidden, out_dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.norm(self.inp(x)))
        return self.down(F.silu(self.gate(h)) * self.up(h))


class FaithfulVisionTower(nn.Module):
    def __init__(self, cfg: VisionConfig, lm_dim: int):
        super().__init__()
        self.cfg = cfg
        self.patch_embedding = nn.Conv2d(cfg.channels, cfg.hidden, cfg.patch, stride=cfg.patch)
        self.positions = nn.Parameter(torch.randn(1, cfg.grid * cfg.grid, cfg.hidden) * cfg.position_std)
        self.blocks = nn.ModuleList(VisionBlock(cfg) for _ in range(cfg.depth))
        self.post_norm = RMSNorm(cfg.hidden, cfg.eps)
        self.merger = nn.Linear(cfg.hidden * cfg.merge * cfg.merge, lm_dim)
        self.projector = GatedProjector(lm_dim, lm_dim, cfg.projector_hidden)
        # Each block's attention branch starts at zero (its MLP branch small), so the tower begins close to
        # patches -> merge -> projector and attention grows in. Held-out digits after 120 steps at lr 2e-3:
        # PyTorch's default init gave 143/200 (seed 42); this init 180-200/200 over seeds 1-6 and 42 (mean 196).
        with torch.no_grad():
            for block in self.blocks:
                block.attention.proj.weight.zero_()
                block.attention.proj.bias.zero_()
                nn.init.normal_(block.down.weight, 0.0, 0.05)
                block.down.bias.zero_()

    def stages(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every intermediate, for tests and for looking inside."""
        patches = rearrange(self.patch_embedding(images), "b c h w -> b (h w) c") + self.positions
        x = patches
        for block in self.blocks:
            x = block(x)
        x = self.post_norm(x)
        g, m = self.cfg.grid, self.cfg.merge
        grouped = rearrange(x, "b (h m1 w m2) c -> b (h w) (c m1 m2)", h=g // m, m1=m, w=g // m, m2=m)
        merged = self.merger(grouped)
        return {"patches": patches, "encoded": x, "merged": merged, "projected": self.projector(merged)}

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.stages(images)["projected"]


class DirectPatchTower(nn.Module):
    """Baseline: one strided convolution to a 4x4 grid of LM-width tokens, plus learned positions."""

    def __init__(self, cfg: VisionConfig, lm_dim: int):
        super().__init__()
        stride = cfg.image_size // int(VISUAL_TOKENS ** 0.5)
        self.conv = nn.Conv2d(cfg.channels, lm_dim, stride, stride=stride)
        self.positions = nn.Parameter(torch.randn(1, VISUAL_TOKENS, lm_dim) * cfg.position_std)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return rearrange(self.conv(images), "b c h w -> b (h w) c") + self.positions


def image_prompt_ids(prompt_ids: list[int]) -> list[int]:
    """BOS <image_start> <image> x 16 <image_end> + prompt (the prompt's own BOS, if any, is dropped)."""
    body = prompt_ids[1:] if prompt_ids[:1] == [BOS_ID] else prompt_ids
    return [BOS_ID, IMAGE_START_ID] + [IMAGE_PLACEHOLDER_ID] * VISUAL_TOKENS + [IMAGE_END_ID] + body


class VisionLanguageModel(nn.Module):
    """A GLM53 (vocab >= 263) with a vision tower whose 16 outputs replace the placeholder embeddings."""

    def __init__(self, language_model: GLM53, tower: nn.Module):
        super().__init__()
        if language_model.config.vocab_size <= IMAGE_END_ID:
            raise ValueError("the language model needs vocab_size >= 263 to embed the image marker ids")
        self.language_model = language_model
        self.tower = tower

    def embed(self, images: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
        placeholders = input_ids == IMAGE_PLACEHOLDER_ID
        if not torch.all(placeholders.sum(dim=1) == VISUAL_TOKENS):
            raise ValueError(f"every row needs exactly {VISUAL_TOKENS} image placeholders (id {IMAGE_PLACEHOLDER_ID})")
        embeds = self.language_model.embedding(input_ids)
        visual = self.tower(images).to(embeds.dtype)
        return embeds.masked_scatter(placeholders[..., None], visual)

    def forward(self, images: torch.Tensor, input_ids: torch.Tensor, return_aux: bool = False):
        return self.language_model(inputs_embeds=self.embed(images, input_ids), return_aux=return_aux)
