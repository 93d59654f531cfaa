"""The one model config. Defaults reproduce the reference 25,730,592-parameter model exactly."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from ..settings import setting

# Every component with two mathematically equal forms names them the same way: "plain" (the readable
# reference) and "fast" (the default). Checkpoints written before this naming still load.
IMPLS = ("plain", "fast")
LEGACY_IMPL_NAMES = {"cumulative": "plain", "chunked": "fast", "gathered": "plain", "masked": "fast",
                     "looped": "plain", "grouped": "fast"}
IMPL_FIELDS = ("linear_attention_impl", "sparse_attention_impl", "moe_impl")
KERNEL_FIELDS = ("linear_attention_chunk", "expert_row_padding", "sparse_attention_core")
CORE_DTYPES = ("fp32", "bf16")


@dataclass
class ModelConfig:
    """Architecture plus the choice of kernel for each attention type.

    The `*_impl` fields pick between mathematically equal forms (a fast one and a plain reference); they
    never change the weights, so a checkpoint loads under either.
    """

    vocab_size: int = setting(260, "output vocabulary (the 260 byte-level ids)")
    dim: int = setting(192, "model width")
    layers: int = setting(12, "number of blocks")
    heads: int = setting(6, "attention heads (head_dim = dim / heads)")
    expert_hidden: int = setting(384, "hidden width of each SwiGLU expert")
    experts: int = setting(8, "routed experts per MoE layer")
    top_k: int = setting(2, "routed experts each token uses")
    shared_experts: int = setting(1, "always-on experts per MoE layer")
    streams: int = setting(4, "residual streams (hyper-connections)")
    sparse_window: int = setting(32, "sparse attention: local keys each query sees")
    sparse_stride: int = setting(32, "sparse attention: every stride-th key is an anchor")
    max_sequence_length: int = setting(192, "context length")
    sparse_every: int = setting(4, "layer i is sparse when (i + 1) % sparse_every == 0: L L L S")
    rope_base: float = setting(10000.0, "RoPE frequency base")
    norm_eps: float = setting(1e-6, "RMSNorm epsilon")
    init_std: float = setting(0.02, "std of the Normal init of every matrix")
    # The reference writes the block's output *including its input* back onto every stream, so the
    # residual is counted twice; False writes only the block's update. See hyper_connections.py.
    hc_double_residual: bool = setting(False, "write input + update back to the streams, as the reference did")
    linear_attention_impl: str = setting("fast", "linear attention form", choices=IMPLS)
    linear_attention_chunk: int = setting(32, "tokens per chunk in the fast linear attention")
    sparse_attention_impl: str = setting("fast", "sparse attention form", choices=IMPLS)
    moe_impl: str = setting("fast", "mixture-of-experts form", choices=IMPLS)
    # Kernel settings: how the fast forms run, never what they compute beyond rounding. `glm53 calibrate` times
    # them on the machine at hand, and `--kernels auto` uses its choice (see calibrate.py).
    expert_row_padding: int = setting(64, "under bf16 autocast, pad each expert's rows to a multiple of this, so "
                                          "matrix shapes repeat from step to step (0: no padding)")
    sparse_attention_core: str = setting("fp32", "dtype of the sparse attention core under bf16 autocast",
                                         choices=CORE_DTYPES)

    def __post_init__(self) -> None:
        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise ValueError(f"ModelConfig: {msg}")

        for f in fields(self):
            if f.type in ("int",) and getattr(self, f.name) is not None:
                need(isinstance(getattr(self, f.name), int), f"{f.name} must be an int, got {getattr(self, f.name)!r}")
        need(self.dim > 0 and self.layers > 0 and self.heads > 0, "dim, layers and heads must be positive")
        need(self.dim % self.heads == 0, f"dim ({self.dim}) must be divisible by heads ({self.heads})")
        need(self.head_dim % 2 == 0, f"head_dim = dim/heads = {self.head_dim} must be even for RoPE")
        need(self.experts >= 1, "experts must be at least 1")
        need(1 <= self.top_k <= self.experts, f"top_k ({self.top_k}) must lie in [1, experts={self.experts}]")
        need(self.shared_experts >= 0, "shared_experts must be >= 0")
        need(self.streams >= 1, "streams must be at least 1")
        need(self.sparse_window >= 1 and self.sparse_stride >= 1, "sparse_window and sparse_stride must be >= 1")
        need(self.sparse_every >= 1, "sparse_every must be >= 1")
        need(self.vocab_size >= 260, "vocab_size must be at least 260 (the byte vocabulary)")
        need(self.max_sequence_length >= 2, "max_sequence_length must be at least 2")
        for name in IMPL_FIELDS:
            need(getattr(self, name) in IMPLS, f"{name} must be one of {IMPLS}, got {getattr(self, name)!r}")
        need(self.linear_attention_chunk >= 1, "linear_attention_chunk must be >= 1")
        need(self.expert_row_padding >= 0, "expert_row_padding must be >= 0")
        need(self.sparse_attention_core in CORE_DTYPES, f"sparse_attention_core must be one of {CORE_DTYPES}")

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    def is_sparse_layer(self, i: int) -> bool:
        return (i + 1) % self.sparse_every == 0

    @property
    def layer_pattern(self) -> str:
        """One letter a layer: L for linear attention, S for sparse attention ("LLLSLLLSLLLS")."""
        return "".join("S" if self.is_sparse_layer(i) else "L" for i in range(self.layers))

    def to_dict(self) -> dict:
        return asdict(self)

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
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"ModelConfig: unknown fields {unknown}; known fields are {sorted(known)}")
        d = {k: LEGACY_IMPL_NAMES.get(v, v) if k in IMPL_FIELDS else v for k, v in d.items()}
        return cls(**d)


# Named architectures. "miniature" is the 248,412-parameter model of the reference's pretraining-data studies
# (reference-system.md §2.4): 3 layers, so the rhythm gives [L, L, L] and no sparse layer at all; top-1 of 4
# experts, 2 streams.
MODEL_PRESETS: dict[str, dict] = {
    "reference": {},
    "miniature": dict(dim=48, layers=3, heads=3, expert_hidden=96, experts=4, top_k=1, streams=2, sparse_window=24,
                      sparse_stride=24, max_sequence_length=128),
}
