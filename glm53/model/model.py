"""GLM53: the 25.7M hybrid language model (linear/sparse attention, MoE, hyper-connections, tied head).

    ids -> embedding -> copied into S streams -> 12 x HyperConnection(HybridBlock) -> mean of streams
        -> RMSNorm -> logits = hidden @ embedding^T

Layer i uses sparse attention when (i + 1) % 4 == 0, linear attention otherwise (L L L S x 3). Switches pick
the released model's forms instead (ModelConfig: linear_attention, sparse_selection, position, residual,
router, tie_embeddings, mtp_depth; the `released` preset sets them all). The speedrun's lever qk_norm
(docs/speedrun.md) is off in both.

Simplifications vs GLM-5.3-Flash, beyond those in each component's file: byte vocabulary, 12 layers of width
192, no dense first layers, a tied input/output embedding by default (untied with `tie_embeddings=False`, as
released), no multi-token-prediction block by default (`mtp_depth=1` adds one), and Normal(0, 0.02) init
everywhere (no depth scaling). With tied weights and a small init the model's first guess is the current input
token, which shows in every "before training" sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from huggingface_hub import PyTorchModelHubMixin
from torch import nn

from ..runtime.files import AtomicDirectory, atomic_write_json
from ..runtime.providers import provider
from .cache import InferenceCache
from .config import ModelConfig
from .hyper_connections import HyperConnection
from .indexer_attention import IndexerSparseAttention
from .manifold_hyper_connections import ManifoldHyperConnection
from .multi_token_prediction import MultiTokenPrediction
from .kimi_delta_attention import KimiDeltaAttention
from .linear_attention import LinearAttention
from .moe import MixtureOfExperts
from .norm import RMSNorm
from .rope import RotaryEmbedding
from .saved import METADATA_NAME, saved_hashes, unchecked_problem, verify_saved
from .sparse_attention import SparseAttention


def attention_for(config: ModelConfig, sparse: bool) -> nn.Module:
    if sparse:
        return IndexerSparseAttention(config) if config.sparse_selection == "indexer" else SparseAttention(config)
    return KimiDeltaAttention(config) if config.linear_attention == "kda" else LinearAttention(config)


def residual_for(config: ModelConfig, block: nn.Module) -> nn.Module:
    if config.residual == "mhc":
        return ManifoldHyperConnection(config.streams, config.dim, block, config.sinkhorn_iterations, config.norm_eps)
    return HyperConnection(config.streams, block, config.hc_double_residual, config.residual_impl)


class HybridBlock(nn.Module):
    """Pre-norm block: a = attn(norm(x)); m = moe(norm(x + a)). Returns the residual update a + m, the router's
    balance loss and expert usage, and the indexer's KL term (None for layers without an indexer)."""

    def __init__(self, config: ModelConfig, sparse: bool):
        super().__init__()
        self.sparse = sparse
        self.attention_norm = RMSNorm(config.dim, config.norm_eps)
        self.attention = attention_for(config, sparse)
        self.moe_norm = RMSNorm(config.dim, config.norm_eps)
        self.moe = MixtureOfExperts(config)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache=None, positions=None):
        a = self.attention(self.attention_norm(x), cos, sin, cache, positions)
        indexer_loss = (self.attention.take_indexer_loss() if isinstance(self.attention, IndexerSparseAttention)
                        else None)
        m, balance_loss, usage = self.moe(self.moe_norm(x + a))
        return a + m, balance_loss, usage, indexer_loss


@dataclass
class ModelAux:
    """Auxiliary outputs of a forward pass (returned with `return_aux=True`).

    balance_loss: mean over layers of the per-layer router balance loss (differentiable, 1.0 = uniform).
    expert_usage: [layers, experts], the fraction of routing assignments each expert received (no gradient).
    indexer_loss: mean over indexer layers of their KL term (0 without an indexer or without gradients); it
        trains only the indexers, whose input is detached.
    mtp_logits: [B, T-1, vocab], position t predicting token t+2 (None without an MTP block, or from embeddings
        or with a cache).
    """

    balance_loss: torch.Tensor
    expert_usage: torch.Tensor
    indexer_loss: torch.Tensor
    mtp_logits: torch.Tensor | None = None


class GLM53(nn.Module, PyTorchModelHubMixin, library_name="glm53"):
    """The language model. `model(input_ids)` -> logits [B, T, vocab];
    `model(input_ids, return_aux=True)` -> (logits, ModelAux).

    Save/load: `model.save_pretrained(dir)` writes model.safetensors + config.json + metadata.json (their sha256),
    and `GLM53.from_pretrained(dir)` rebuilds it offline, checked against those hashes as every glm53 command
    checks a checkpoint (`trust_unverified=True` skips the check). The tied head is the embedding itself, so there
    is only one tensor to store; `tie_embeddings=False` adds a separate `head`.
    """

    def save_pretrained(self, save_directory, *, push_to_hub: bool = False, repo_id: str | None = None,
                        **kwargs):
        """The hub mixin's save (model.safetensors, config.json, a model card), then metadata.json with the
        weights' and the config's sha256: what `from_pretrained` and the commands check. Pushing saves again into
        the mixin's own temporary folder, through this method, so the pushed folder has its metadata too.
        The folder is written whole or not at all (built under a temporary name, then renamed into place), and a
        folder that already holds anything is refused before anything is written: a saved model is never
        overwritten (its files would no longer match the hashes another save recorded)."""
        from pathlib import Path

        folder = Path(save_directory)
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            raise FileExistsError(f"{folder} already exists{' and is not empty' if folder.is_dir() else ' as a file'}; "
                                  "save_pretrained never overwrites a saved model: save into a new folder, or move "
                                  "the old one away first")
        if folder.is_dir():  # an empty folder: the atomic write below puts the saved one in its place
            folder.rmdir()
        push = {k: kwargs.pop(k) for k in list(kwargs) if k not in ("config", "model_card_kwargs")}
        with AtomicDirectory(folder) as tmp:
            super().save_pretrained(tmp, **kwargs)
            atomic_write_json(tmp / METADATA_NAME, {**saved_hashes(tmp), "parameter_counts": self.parameter_counts()})
        if push_to_hub:
            return self.push_to_hub(repo_id=repo_id or Path(save_directory).name, **kwargs, **push)
        return None

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *, trust_unverified: bool = False,
                        map_location: str = "cpu", strict: bool = True, **hub_kwargs) -> "GLM53":
        """Load a saved model (a folder, or a Hub repository id: downloaded first, `hub_kwargs` such as revision
        go to `huggingface_hub.snapshot_download`). Its weights' and config's sha256 are checked against its
        metadata.json first, as the commands check a checkpoint, so an edited config.json is refused rather than
        loaded as another model; `trust_unverified=True` loads it unchecked (a folder without metadata.json, or one
        edited on purpose). Then the hub mixin loads it, strictly unless `strict=False`."""
        import sys
        from pathlib import Path

        folder = Path(pretrained_model_name_or_path)
        if not folder.is_dir():
            from huggingface_hub import snapshot_download

            folder = Path(snapshot_download(str(pretrained_model_name_or_path), **hub_kwargs))
        if not trust_unverified:
            problem = unchecked_problem(folder, "trust_unverified=True")
            if problem:
                raise ValueError(problem)
            verify_saved(folder)
        model = super().from_pretrained(folder, map_location=map_location, strict=strict)
        model.verified = not trust_unverified
        if trust_unverified:
            print(f"glm53: {folder}: its weights and config were loaded unchecked, as trust_unverified=True asked",
                  file=sys.stderr)
        return model

    def __init__(self, config: ModelConfig | dict | None = None):
        super().__init__()
        if config is None:
            config = ModelConfig()
        elif isinstance(config, dict):
            config = ModelConfig.from_dict(config)
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.dim)
        self.rope = RotaryEmbedding(config.head_dim, config.max_sequence_length, config.rope_base)
        self.layers = nn.ModuleList(residual_for(config, HybridBlock(config, config.is_sparse_layer(i)))
                                    for i in range(config.layers))
        self.final_norm = RMSNorm(config.dim, config.norm_eps)
        self.head = None if config.tie_embeddings else nn.Linear(config.dim, config.vocab_size, bias=False)
        self.mtp = MultiTokenPrediction(config, HybridBlock(config, sparse=False)) if config.mtp_depth else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        std = self.config.init_std
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, 0.0, std)
            elif isinstance(module, MixtureOfExperts):
                module.reset_routed_experts(std)

    @property
    def device(self) -> torch.device:
        return self.embedding.weight.device

    @property
    def head_weight(self) -> torch.Tensor:
        return self.embedding.weight if self.head is None else self.head.weight

    def forward(self, input_ids: torch.Tensor | None = None, *, inputs_embeds: torch.Tensor | None = None,
                return_aux: bool = False, cache: InferenceCache | None = None, return_hidden: bool = False):
        """With `cache`, the tokens continue each row from its cached position and the cache is advanced
        (prefill a prompt, then feed one token at a time); without, positions start at 0. `return_hidden`
        (without return_aux) returns (logits, hidden [B, T, D]: the streams' mean before the final norm)."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids or inputs_embeds")
        if input_ids is not None:
            if input_ids.dim() != 2:
                raise ValueError(f"input_ids must be [batch, time], got shape {tuple(input_ids.shape)}")
            # the value check reads the ids (a graph break under torch.compile, where the embedding's own bounds
            # check still refuses an id out of range), so it runs eagerly only
            if (not torch.compiler.is_compiling() and input_ids.numel()
                    and (input_ids.min() < 0 or input_ids.max() >= self.config.vocab_size)):
                raise ValueError(f"input_ids must lie in [0, {self.config.vocab_size}); got values in "
                                 f"[{int(input_ids.min())}, {int(input_ids.max())}]")
            inputs_embeds = self.embedding(input_ids)
        B, T, _ = inputs_embeds.shape
        positions = None
        if cache is None:
            if T > self.config.max_sequence_length:
                raise ValueError(f"sequence length {T} exceeds max_sequence_length {self.config.max_sequence_length}")
            cos, sin = self.rope(T)
        else:
            if cache.batch != B:
                raise ValueError(f"cache holds {cache.batch} rows but the input has {B}")
            positions = cache.positions[:, None] + torch.arange(T, device=cache.positions.device)
            if int(positions.max()) >= cache.max_length:
                raise ValueError(f"position {int(positions.max())} is beyond the cache's max_length {cache.max_length}")
            cos, sin = self.rope.at(positions)
        streams = self.layers[0].open_streams(inputs_embeds)  # each residual form holds its streams its own way
        balance_losses, usages, indexer_losses = [], [], []
        for i, layer in enumerate(self.layers):
            layer_cache = cache.layers[i] if cache is not None else None
            streams, balance_loss, usage, indexer_loss = layer(streams, cos, sin, layer_cache, positions)
            balance_losses.append(balance_loss)
            usages.append(usage)
            if indexer_loss is not None:
                indexer_losses.append(indexer_loss)
        hidden = self.layers[0].close_streams(streams)
        logits = F.linear(self.final_norm(hidden), self.head_weight)
        if cache is not None:
            cache.positions = cache.positions + T
        if not return_aux:
            return (logits, hidden) if return_hidden else logits
        indexer_loss = torch.stack(indexer_losses).mean() if indexer_losses else logits.new_zeros(())
        mtp_logits = None
        if self.mtp is not None and input_ids is not None and cache is None and T >= 2:
            mtp_logits = self.mtp(hidden[:, :-1], inputs_embeds[:, 1:], self.head_weight, cos[: T - 1], sin[: T - 1])
        return logits, ModelAux(torch.stack(balance_losses).mean(), torch.stack(usages), indexer_loss, mtp_logits)

    def new_mtp_cache(self, batch: int, max_length: int | None = None) -> InferenceCache:
        """An empty decoding cache for the MTP block (one linear-attention layer)."""
        return InferenceCache.empty(self.config, batch, max_length or self.config.max_sequence_length, self.device,
                                    self.embedding.weight.dtype, layers="L")

    def mtp_step(self, hidden: torch.Tensor, next_ids: torch.Tensor, mtp_cache: InferenceCache) -> torch.Tensor:
        """Feed the MTP block the pairs (h_t, token t+1) for the next positions of its cache: hidden [B, n, D],
        next_ids [B, n]. Returns its logits for token t+2 at each, [B, n, vocab], and advances the cache."""
        n = next_ids.shape[1]
        positions = mtp_cache.positions[:, None] + torch.arange(n, device=next_ids.device)
        cos, sin = self.rope.at(positions)
        logits = self.mtp(hidden, self.embedding(next_ids), self.head_weight, cos, sin, mtp_cache.layers[0], positions)
        mtp_cache.positions = mtp_cache.positions + n
        return logits

    def update_router_biases(self, load_sum=None) -> None:
        """After an optimizer step: nudge every sigmoid-bias router's selection bias toward even load (a no-op for
        softmax-balance routers); `load_sum` sums the load over data-parallel ranks first."""
        for module in self.modules():
            if isinstance(module, MixtureOfExperts):
                module.update_selection_bias(load_sum)

    def set_load_sum(self, load_sum) -> None:
        """Data parallelism: the routers' training forwards count expert load over every rank (None: this process)."""
        for module in self.modules():
            if isinstance(module, MixtureOfExperts):
                module.load_sum = load_sum

    def set_indexer_dense(self, dense: bool) -> None:
        """Dense warm-up of the indexer layers: their attention sees every earlier key (no-op without indexers)."""
        for module in self.modules():
            if isinstance(module, IndexerSparseAttention):
                module.set_dense(dense)

    def new_cache(self, batch: int, max_length: int | None = None) -> InferenceCache:
        """An empty decoding cache for `batch` rows (in the dtype of the model's weights, fp32 at least for the
        recurrent states and the keys and values, which attention reads in fp32)."""
        return InferenceCache.empty(self.config, batch, max_length or self.config.max_sequence_length, self.device,
                                    self.embedding.weight.dtype)

    def generate(self, prompts, sampling=None, max_new_tokens: int | None = None, stop="function",
                 stream: bool = False, **options):
        """Complete text: `model.generate("def f(x):")[0].completion`. Returns a list of Generation (prompt,
        completion, token_ids, hit_token_cap), or with `stream=True` an iterator of text pieces whose
        `.generations` holds them once it is exhausted. `sampling`: a glm53.decode.sampling.Sampling (default
        greedy, 48 new tokens); `stop`: "function" (the first complete statement), "end" (the function's end),
        "eos", or a function (prompt, completion) -> bool; `options`: samples, seed, generator, cache, tokenizer,
        and transformers' temperature, top_k, top_p and do_sample in place of `sampling` (do_sample=False or
        temperature=0: greedy; do_sample=True: sampled, at temperature 1.0 unless one is given).

        It runs generate_text, the function `glm53 generate --prompt` calls (decode/text_generation.py). Decoding
        builds on the model, a floor above this one, so the model does not import it: it asks
        runtime/providers.py for the "text generation" role, which the package face (glm53/__init__.py, run before
        any submodule) provides. The model's module loads without the decoders; they load on the first call."""
        return provider("text generation")(self, prompts, sampling, max_new_tokens, stop, stream, **options)

    def parameter_counts(self) -> dict[str, int]:
        """total: unique parameters (the tied head counted once); active: parameters one token uses,
        total - routed + routed * top_k // experts."""
        total = sum(p.numel() for p in self.parameters())
        routed = sum(m.expert_up.numel() + m.expert_down.numel() for m in self.modules()
                     if isinstance(m, MixtureOfExperts))
        active = total - routed + routed * self.config.top_k // self.config.experts
        return {"total": total, "active": active}
