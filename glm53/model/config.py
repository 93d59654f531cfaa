"""The one model config. Defaults reproduce the reference 25,730,592-parameter model exactly."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields, replace

from ..runtime.setting_history import read_as_today
from ..runtime.settings import Checks, setting

# Every component with two mathematically equal forms names them the same way: "plain" (the readable
# reference) and "fast" (the default). Checkpoints written before this naming still load.
IMPLS = ("plain", "fast")
LEGACY_IMPL_NAMES = {"cumulative": "plain", "chunked": "fast", "gathered": "plain", "masked": "fast",
                     "looped": "plain", "grouped": "fast"}
IMPL_FIELDS = ("linear_attention_impl", "sparse_attention_impl", "moe_impl", "residual_impl")
KERNEL_FIELDS = ("linear_attention_chunk", "expert_row_padding", "sparse_attention_core", "linear_attention_core")
CORE_DTYPES = ("fp32", "bf16")
# Architecture switches: the reference's simplified form first (the default), the released GLM-5.3-Flash's after.
LINEAR_ATTENTIONS = ("elu", "kda")
SPARSE_SELECTIONS = ("fixed", "indexer")
POSITIONS = ("rope", "none")
RESIDUALS = ("hc", "mhc")
ROUTERS = ("softmax-balance", "sigmoid-bias")
# Tokenizers (data/bpe_tokenizer.py): the reference's 260-symbol bytes, or a byte-pair vocabulary trained on the broad
# stream (broad-*) or on it and the standard library's functions (code-*), whose name ends in its size (the model's
# vocab_size must equal it).
TOKENIZERS = ("byte", "broad-bpe-1024", "broad-bpe-2048", "code-bpe-2048")


def tokenizer_vocab_size(name: str) -> int | None:
    """The vocabulary a byte-pair tokenizer's name states (None for the byte tokenizer, which fits any size >= 260:
    the vision models add 3 image ids)."""
    return None if name == "byte" else int(name.rsplit("-", 1)[1])
# the reference's forms of every switch (what `glm53 info` compares a preset against)
SWITCH_DEFAULTS = {"linear_attention": "elu", "sparse_selection": "fixed", "position": "rope", "residual": "hc",
                   "router": "softmax-balance", "tie_embeddings": True, "mtp_depth": 0}
# exp(-decay summed over a chunk) must stay finite in fp32 (about exp(88)); the fast KDA form keeps a margin.
KDA_MAX_CHUNK_DECAY = 80.0
# RoPE tables (model/rope.py), per position and table entry at their peak while built: the float64 angle and its
# float64 cos or sin, then the fp32 cos and sin kept
ROPE_BYTES_PER_ENTRY = 8 + 8 + 4 + 4


def physical_memory_bytes() -> int | None:
    """This machine's memory, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


@dataclass
class ModelConfig:
    """Architecture plus the choice of kernel for each attention type.

    The `*_impl` fields pick between mathematically equal forms (a fast one and a plain reference); they
    never change the weights, so a checkpoint loads under either.
    """

    vocab_size: int = setting(260, "output vocabulary (the 260 byte-level ids; a byte-pair tokenizer's own size)",
                              at_least=260)
    tokenizer: str = setting("byte", "how text becomes ids: byte (4 specials + the 256 byte values, the reference) or "
                                     "a byte-pair vocabulary trained on the broad stream (broad-*) or on it and "
                                     "real Python (code-*); set --vocab-size to its size", choices=TOKENIZERS)
    dim: int = setting(192, "model width", at_least=1)
    layers: int = setting(12, "number of blocks", at_least=1)
    heads: int = setting(6, "attention heads (head_dim = dim / heads)", at_least=1)
    expert_hidden: int = setting(384, "hidden width of each SwiGLU expert", at_least=1)
    experts: int = setting(8, "routed experts per MoE layer", at_least=1)
    top_k: int = setting(2, "routed experts each token uses", at_least=1)
    shared_experts: int = setting(1, "always-on experts per MoE layer", at_least=0)
    streams: int = setting(4, "residual streams (hyper-connections)", at_least=1)
    sparse_window: int = setting(32, "sparse attention: local keys each query sees", at_least=1)
    sparse_stride: int = setting(32, "sparse attention: every stride-th key is an anchor", at_least=1)
    max_sequence_length: int = setting(192, "context length", at_least=2)
    sparse_every: int = setting(4, "layer i is sparse when (i + 1) % sparse_every == 0: L L L S", at_least=1)
    rope_base: float = setting(10000.0, "RoPE frequency base", above=0)
    norm_eps: float = setting(1e-6, "RMSNorm epsilon", above=0)
    init_std: float = setting(0.02, "std of the Normal init of every matrix", above=0)
    # The reference writes the block's output *including its input* back onto every stream, so the
    # residual is counted twice; False writes only the block's update. See hyper_connections.py.
    hc_double_residual: bool = setting(False, "write input + update back to the streams, as the reference did")
    # The released model's attention (see released-model.md in the shared reference); defaults keep the reference.
    linear_attention: str = setting("elu", "linear layers: elu (elu+1 linear attention, the reference) or kda "
                                           "(Kimi delta attention: per-channel decay and a delta-rule state)",
                                    choices=LINEAR_ATTENTIONS)
    kda_decay_lower_bound: float = setting(-5.0, "KDA: the most negative log-decay a token may apply per channel",
                                           below=0)
    kda_conv_kernel: int = setting(4, "KDA: width of the short causal depthwise convolution on q, k and v", at_least=1)
    kda_decay_rank: int = setting(32, "KDA: rank of the low-rank projection that produces the decay", at_least=1)
    kda_chunk: int = setting(16, "KDA: tokens per chunk in the fast (chunked) form; chunk x |lower bound| must "
                                 f"stay <= {KDA_MAX_CHUNK_DECAY:g} so exp() of a chunk's decay fits fp32", at_least=1)
    sparse_selection: str = setting("fixed", "sparse layers: fixed (local window + strided anchors, the reference) "
                                             "or indexer (a learned lightning indexer picks each query's keys)",
                                    choices=SPARSE_SELECTIONS)
    indexer_top_k: int = setting(32, "indexer: keys each query keeps, besides itself (all when fewer exist)",
                                 at_least=1)
    indexer_heads: int = setting(4, "indexer: number of small indexer heads", at_least=1)
    indexer_dim: int = setting(32, "indexer: width of each indexer head", at_least=1)
    index_pool: int = setting(1, "indexer: score blocks of this many keys by their mean indexer key (the "
                                 "released KPool); 1 scores every key", at_least=1)
    position: str = setting("rope", "rope (rotary, the reference) or none (no positional encoding, as the "
                                    "released text model)", choices=POSITIONS)
    # The released model's streams, router and head
    residual: str = setting("hc", "residual streams: hc (static read/write weights, the reference) or mhc "
                                  "(input-dependent, with a Sinkhorn-projected doubly stochastic stream mixing)",
                            choices=RESIDUALS)
    sinkhorn_iterations: int = setting(20, "mhc: alternating row/column normalisations of the stream mixing",
                                       at_least=1)
    router: str = setting("softmax-balance", "softmax-balance (softmax top-k plus a balance loss, the reference) or "
                                             "sigmoid-bias (sigmoid scores; a per-expert bias, nudged after each "
                                             "step toward even load, picks the experts)", choices=ROUTERS)
    router_bias_rate: float = setting(1e-3, "sigmoid-bias: how far each expert's bias moves per optimizer step",
                                      at_least=0)
    router_scale: float = setting(1.0, "sigmoid-bias: the renormalised routing weights are multiplied by this", above=0)
    tie_embeddings: bool = setting(True, "share the input embedding with the output head (False: a separate head)")
    # The public speedruns' lever that the screens kept (docs/speedrun.md; the ones they dropped are retired:
    # runtime/setting_history.py); the default keeps the reference's form
    qk_norm: bool = setting(False, "RMS-normalise each head's q and k, with a learned gain, before RoPE (softmax and "
                                   "elu attention; KDA normalises its own)")
    mtp_depth: int = setting(0, "multi-token prediction blocks (0 or 1): from the final hidden state at t and the "
                                "embedding of token t+1, predict token t+2; a draft model for speculative decoding",
                         at_least=0, at_most=1)
    linear_attention_impl: str = setting("fast", "linear attention form", choices=IMPLS)
    linear_attention_chunk: int = setting(32, "tokens per chunk in the fast linear attention", at_least=1)
    sparse_attention_impl: str = setting("fast", "sparse attention form", choices=IMPLS)
    moe_impl: str = setting("fast", "mixture-of-experts form", choices=IMPLS)
    residual_impl: str = setting("fast", "hyper-connection form (residual = hc)", choices=IMPLS)
    # Kernel settings: how the fast forms run, never what they compute beyond rounding. `glm53 calibrate` times
    # them on the machine at hand, and `--kernels auto` uses its choice (see calibrate.py).
    expert_row_padding: int = setting(64, "under bf16 autocast, pad each expert's rows to a multiple of this, so "
                                          "matrix shapes repeat from step to step (0: no padding)", at_least=0)
    sparse_attention_core: str = setting("fp32", "dtype of the sparse attention core under bf16 autocast",
                                         choices=CORE_DTYPES)
    linear_attention_core: str = setting("fp32", "dtype of the fast linear attention's chunk matrix products under "
                                                 "bf16 autocast (prefix sums and division stay fp32)",
                                         choices=CORE_DTYPES)

    def __post_init__(self) -> None:
        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise ValueError(f"ModelConfig: {msg}")

        for f in fields(self):
            if f.type in ("int",) and getattr(self, f.name) is not None:
                need(isinstance(getattr(self, f.name), int), f"{f.name} must be an int, got {getattr(self, f.name)!r}")
        check = Checks("ModelConfig")  # choices, finite numbers and the bounds each field declares
        check.declared(self)
        check.done()
        need(self.dim % self.heads == 0, f"dim ({self.dim}) must be divisible by heads ({self.heads})")
        need(self.position == "none" or self.head_dim % 2 == 0,
             f"head_dim = dim/heads = {self.head_dim} must be even for RoPE (or position = none)")
        size = tokenizer_vocab_size(self.tokenizer)
        need(size is None or self.vocab_size == size,
             f"tokenizer {self.tokenizer} has {size} ids, so vocab_size must be {size} (got {self.vocab_size}); "
             f"set --vocab-size {size}")
        need(1 <= self.top_k <= self.experts, f"top_k ({self.top_k}) must lie in [1, experts={self.experts}]")
        tables = self.position_tables_problem()  # before GLM53 allocates them
        need(tables is None, tables or "")
        need(self.kda_chunk * -self.kda_decay_lower_bound <= KDA_MAX_CHUNK_DECAY,
             f"kda_chunk ({self.kda_chunk}) x |kda_decay_lower_bound| ({-self.kda_decay_lower_bound:g}) must lie in "
             f"[1, {KDA_MAX_CHUNK_DECAY:g}] so the chunk's decay stays finite in fp32; lower kda_chunk")
        need(not (self.residual == "mhc" and self.hc_double_residual),
             "hc_double_residual applies to residual = hc only; mhc writes H_post times the update")
        need(isinstance(self.tie_embeddings, bool),
             f"tie_embeddings must be true or false, got {self.tie_embeddings!r}")
        need(self.mtp_depth == 0 or self.max_sequence_length >= 3,
             f"mtp_depth = 1 predicts two tokens ahead: max_sequence_length ({self.max_sequence_length}) must be >= 3")
        need(self.position == "none" or self.sparse_selection != "indexer" or self.indexer_dim % 2 == 0,
             f"indexer_dim ({self.indexer_dim}) must be even for RoPE on the indexer's keys (or position = none)")

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    def position_table_bytes(self) -> int:
        """Bytes the RoPE tables of every position take at their peak, as the model is built (the model's and the
        indexer's: head_dim / 2 and indexer_dim / 2 entries a position); 0 without RoPE."""
        if self.position == "none":
            return 0
        entries = self.head_dim // 2 + (self.indexer_dim // 2 if self.sparse_selection == "indexer" else 0)
        return self.max_sequence_length * entries * ROPE_BYTES_PER_ENTRY

    def position_tables_problem(self) -> str | None:
        """Why the model's position tables cannot be built on this machine (more bytes than it has memory), said
        before a byte is allocated, or None."""
        need, memory = self.position_table_bytes(), physical_memory_bytes()
        if memory is None or need <= memory:
            return None
        return (f"--max-sequence-length {self.max_sequence_length:,} needs about {need / 2**30:,.1f} GiB for the "
                f"RoPE position tables alone, more than this machine's {memory / 2**30:,.1f} GiB of memory; give "
                "the longest prompt + completion the model will see (192 by default)")

    def is_sparse_layer(self, i: int) -> bool:
        return (i + 1) % self.sparse_every == 0

    @property
    def layer_pattern(self) -> str:
        """One letter a layer: L for linear attention, S for sparse attention ("LLLSLLLSLLLS")."""
        return "".join("S" if self.is_sparse_layer(i) else "L" for i in range(self.layers))

    def to_dict(self) -> dict:
        return asdict(self)

    def architecture_differences(self, other: "ModelConfig") -> list[str]:
        """Fields that change what the model computes (every field but the plain/fast forms and kernel settings),
        as "name: mine != other's" lines; empty when a checkpoint of one config may be loaded as the other."""
        free = set(IMPL_FIELDS) | set(KERNEL_FIELDS) | {"kda_chunk"}
        return [f"{f.name}: {getattr(self, f.name)!r} != {getattr(other, f.name)!r}" for f in fields(self)
                if f.name not in free and getattr(self, f.name) != getattr(other, f.name)]

    def plain(self) -> "ModelConfig":
        """The same model with every plain reference form selected (for tests and benchmarks)."""
        return replace(self, **{name: "plain" for name in IMPL_FIELDS})

    @classmethod
    def named(cls, name: str, **overrides) -> "ModelConfig":
        """A named architecture (see MODEL_PRESETS) with optional field overrides."""
        if name not in MODEL_PRESETS:
            raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODEL_PRESETS)}")
        return cls(**{**MODEL_PRESETS[name], **overrides})

    @classmethod
    def from_dict(cls, d: dict) -> "ModelConfig":
        """A recorded config (a checkpoint's config.json, a run's model): the plain/fast forms' older names read as
        today's, a retired field at the value today's model runs dropped (another value refused: setting_history)."""
        d = read_as_today(d, "ModelConfig")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"ModelConfig: unknown fields {unknown}; known fields are {sorted(known)}")
        d = {k: LEGACY_IMPL_NAMES.get(v, v) if k in IMPL_FIELDS else v for k, v in d.items()}
        return cls(**d)


# Named architectures. "released" switches on every part of the released GLM-5.3-Flash that this code has:
# Kimi delta attention, indexer-selected sparse attention, no positional encoding, mHC streams, sigmoid routing
# with bias balancing, untied embeddings and a multi-token-prediction block, at the reference's sizes.
# "miniature" is the 248,412-parameter model of the reference's pretraining-data studies
# (reference-system.md §2.4): 3 layers, so the rhythm gives [L, L, L] and no sparse layer at all; top-1 of 4
# experts, 2 streams.
MODEL_PRESETS: dict[str, dict] = {
    "reference": {},
    "released": dict(linear_attention="kda", sparse_selection="indexer", position="none", residual="mhc",
                     router="sigmoid-bias", tie_embeddings=False, mtp_depth=1),
    "miniature": dict(dim=48, layers=3, heads=3, expert_hidden=96, experts=4, top_k=1, streams=2, sparse_window=24,
                      sparse_stride=24, max_sequence_length=128),
    # "broad": the broad suite's model (3,380,400 parameters). Six layers that all attend with softmax over the whole
    # 384-token context (every layer sparse, window = context), 4 experts of 256: smaller and denser than the
    # reference so that a 2-core CPU sees about 7 times the documents in the same time. On the broad stream it learns
    # to read a description far sooner than the reference (docs/broad-run.md, "The recipe").
    "broad": dict(dim=128, layers=6, heads=4, expert_hidden=256, experts=4, sparse_every=1, sparse_window=384,
                  max_sequence_length=384),
}
