"""glm53's model behind transformers' interfaces: GLM53Config and GLM53ForCausalLM, which an exported folder's
modeling files name (transformers_export.py) so that `AutoModelForCausalLM.from_pretrained(dir,
trust_remote_code=True)`, `model.generate` and `pipeline("text-generation")` work on it.

The class wraps glm53's own GLM53 (as `self.model.glm53`, so the weights are `model.glm53.*`), it does not copy its
code: the forward pass and the decoding state are glm53's, and a greedy `generate` gives glm53's greedy completions.
`self.model` is transformers' base model (GLM53Backbone: the final norm's output as `last_hidden_state`), and
`get_output_embeddings()` the head, which TRL's trainers use to score log-probabilities in tiles.

How glm53's decoding meets transformers' conventions:
- Cache. glm53's decoding state (model/cache.py: a recurrent state per linear layer, keys and values per sparse layer,
  one position per row) is not a transformers `Cache` of keys and values, so the model opts out of transformers'
  default cache (as its recurrent models do) and returns its own, `GLM53Cache`, as `past_key_values`; generate hands
  it back each step and `prepare_inputs_for_generation` feeds only the tokens it has not consumed.
- Padding. glm53 has no attention mask: a row starts at position 0 with its first real token. transformers pads
  prompts on the left. A forward moves each row's real tokens to the front (the pads after them, where a causal model
  never looks back at them), runs, and moves the logits back, so a padded row's logits equal its unpadded ones. With a
  cache, rows of each real length are prefilled together and joined (one position per row, as glm53's own batched
  decoding). Pads must be a run at the left, the right, or both ends of a row; a mask with a hole in the middle is
  refused.
- Loss. `labels` gives the mean next-token cross-entropy over labels that are not -100 (transformers' convention), so
  Trainer-style loops work. The router's balance loss and the other auxiliary terms of glm53's own pretraining are not
  added: fine-tuning here trains the language-modeling loss alone.
- Logits are float32 whatever the weights' dtype, as glm53 scores them before choosing a token.

Not carried: glm53's stop rules (transformers stops at EOS, `max_new_tokens` or `stop_strings`), its speculative
decoding with the MTP block (the MTP weights are kept; transformers' generate does not use them), cropping a cache
(assisted generation and prompt lookup need it; a recurrent state cannot be cropped), and the vision models.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import GenerationMixin, PreTrainedConfig, PreTrainedModel
from torch import nn
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast

from ..model.cache import InferenceCache
from ..model.config import ModelConfig
from ..model.model import GLM53
from ..model.moe import MixtureOfExperts
from ..model.rope import RotaryEmbedding


CONFIGURATION_FILE = "configuration_glm53.py"
MODELING_FILE = "modeling_glm53.py"
AUTO_MAP = {"AutoConfig": "configuration_glm53.GLM53Config",
            "AutoModelForCausalLM": "modeling_glm53.GLM53ForCausalLM"}
CODE_FILE = '''"""{what} of a glm53 model for transformers (trust_remote_code=True): glm53's own code, imported from
the installed package rather than copied (glm53's docs/interop.md says why). pip install glm53>={version}"""

from glm53.interop.transformers_model import {names}  # noqa: F401
'''
# what a packed batch (several documents a row) brings: glm53 keeps one document a row, so these are refused
PACKING_ARGUMENTS = ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k", "seq_idx")


def write_code_files(folder: Path, version: str) -> None:
    """configuration_glm53.py and modeling_glm53.py, which config.json's auto_map names: each imports from the
    installed glm53."""
    for name, what, names in ((CONFIGURATION_FILE, "The configuration", "GLM53Config"),
                              (MODELING_FILE, "The model", "GLM53Config, GLM53ForCausalLM")):
        (Path(folder) / name).write_text(CODE_FILE.format(what=what, version=version, names=names))


class GLM53Config(PreTrainedConfig):
    """transformers' config of a glm53 model: glm53's ModelConfig as a dict (`glm53`), the glm53 version that wrote
    it, and the fields transformers reads (vocab_size, hidden_size, the special ids, tie_word_embeddings)."""

    model_type = "glm53"
    glm53: dict | None = None
    glm53_version: str | None = None
    vocab_size: int = 260
    hidden_size: int = 192
    num_hidden_layers: int = 12
    max_position_embeddings: int = 192
    pad_token_id: int | None = 0
    bos_token_id: int | None = 1
    eos_token_id: int | None = 2
    tie_word_embeddings: bool = True
    use_cache: bool = True

    def model_config(self) -> ModelConfig:
        return ModelConfig.from_dict(self.glm53 or {})

    @classmethod
    def from_glm53(cls, config: ModelConfig, version: str) -> "GLM53Config":
        return cls(glm53=config.to_dict(), glm53_version=version, vocab_size=config.vocab_size,
                   hidden_size=config.dim, num_hidden_layers=config.layers,
                   max_position_embeddings=config.max_sequence_length, tie_word_embeddings=config.tie_embeddings)


class GLM53Cache:
    """glm53's decoding state for transformers' generate: the InferenceCache and how many of the (padded) input's
    columns it has consumed."""

    is_compileable = False  # transformers' generate would otherwise try to compile the step around it

    def __init__(self, inner: InferenceCache, seen: int):
        self.inner, self.seen = inner, seen

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        """Beam search: the rows the beams continue from."""
        self.inner = self.inner.select(beam_idx.to(self.inner.positions.device))

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.seen


def real_spans(attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's first real column and its count of real tokens; a row whose ones are not one run is refused."""
    mask = attention_mask.bool()
    lengths = mask.sum(dim=1)
    first = torch.where(lengths > 0, mask.float().argmax(dim=1), torch.zeros_like(lengths))
    columns = torch.arange(mask.shape[1], device=mask.device)
    run = (columns >= first[:, None]) & (columns < (first + lengths)[:, None])
    if not torch.equal(run, mask):
        raise ValueError("attention_mask has a row whose real tokens are not one run (padding in the middle); glm53 "
                         "models take padding only at the start or the end of a row")
    return first, lengths


def _shift(x: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """Row b's columns rotated left by offset[b]: x[b, (t + offset[b]) % T]."""
    T = x.shape[1]
    index = (torch.arange(T, device=x.device)[None, :] + offset[:, None]) % T
    if x.dim() == 3:
        index = index[:, :, None].expand(-1, -1, x.shape[2])
    return x.gather(1, index)


class GLM53Backbone(nn.Module):
    """transformers' base model: glm53's model up to its final norm, as `last_hidden_state` [B, T, D]. TRL's
    trainers score log-probabilities from it through the head in tiles (`add_fused_lm_head`), never building the
    logits; glm53's forward still makes them here, which at a few thousand ids costs little."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.glm53 = GLM53(config)

    def forward(self, input_ids: torch.LongTensor, attention_mask: torch.Tensor | None = None,
                **kwargs) -> BaseModelOutputWithPast:
        first, lengths = real_spans(attention_mask if attention_mask is not None else torch.ones_like(input_ids))
        width = max(int(lengths.max()), 1) if lengths.numel() else 1  # the pads after the real tokens are not run
        _, hidden = self.glm53(_shift(input_ids, first)[:, :width], return_hidden=True)
        hidden = F.pad(self.glm53.final_norm(hidden), (0, 0, 0, input_ids.shape[1] - width))
        return BaseModelOutputWithPast(last_hidden_state=_shift(hidden, -first))


class TiedHead:
    """The output embedding of a tied model: the input embedding's weight, and no bias. Not a module of its own (the
    weight is stored once, as glm53 stores it); what a reader of `get_output_embeddings()` needs."""

    bias = None

    def __init__(self, embedding: nn.Embedding):
        self.embedding = embedding

    @property
    def weight(self) -> torch.Tensor:
        return self.embedding.weight


class GLM53ForCausalLM(PreTrainedModel, GenerationMixin):
    """A glm53 model as a transformers causal language model (module docstring)."""

    config_class = GLM53Config
    base_model_prefix = "model"
    main_input_name = "input_ids"
    _is_stateful = True  # a recurrent state: no cropping, so no assisted generation
    _supports_cache_class = False
    _no_split_modules = []

    def __init__(self, config: GLM53Config):
        super().__init__(config)
        self.model = GLM53Backbone(config.model_config())
        self.post_init()

    @property
    def core(self) -> GLM53:
        """glm53's own model (its weights are `model.glm53.*` here)."""
        return self.model.glm53

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        """transformers' load, refused in one line when a weight is missing or left over: transformers would warn and
        leave a missing weight uninitialized, and the model would decode noise."""
        wanted = kwargs.pop("output_loading_info", False)
        model, info = super().from_pretrained(*args, output_loading_info=True, **kwargs)
        wrong = {kind: sorted(info.get(kind) or ()) for kind in ("missing_keys", "unexpected_keys", "mismatched_keys")}
        if any(wrong.values()):
            found = "; ".join(f"{kind.replace('_', ' ')}: {', '.join(map(str, keys[:3]))}"
                              + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
                              for kind, keys in wrong.items() if keys)
            raise ValueError(f"{args[0] if args else 'the folder'} does not hold this model's weights ({found}); "
                             "export the checkpoint again with this glm53 (glm53 export --format transformers)")
        return (model, info) if wanted else model

    def save_pretrained(self, save_directory, *args, **kwargs):
        """transformers' save (weights, config.json, generation_config.json), with the two code files that
        config.json's auto_map names written as glm53 writes them: transformers would otherwise copy this module's
        source, whose imports of the rest of glm53 do not resolve in the saved folder (so Trainer's checkpoints and
        push_to_hub work). The tokenizer is saved by its own save_pretrained (Trainer saves both)."""
        from .. import __version__

        self.config.auto_map = AUTO_MAP
        saved = (type(self)._auto_class, type(self.config)._auto_class)
        type(self)._auto_class = type(self.config)._auto_class = None  # no copy of this module's source
        try:
            result = super().save_pretrained(save_directory, *args, **kwargs)
        finally:
            type(self)._auto_class, type(self.config)._auto_class = saved
        write_code_files(Path(save_directory), self.config.glm53_version or __version__)
        return result

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        return False  # the model makes its own decoding state (GLM53Cache)

    @torch.no_grad()
    def _init_weights(self, module) -> None:
        """transformers calls this for each module whose tensors a load did not fill: the weights are glm53's to
        initialize (GLM53.reset_parameters), but the tensors no checkpoint holds are rebuilt here, since transformers
        builds the model on the meta device and leaves them empty: the RoPE tables and the routers' pending load."""
        if isinstance(module, RotaryEmbedding):
            fresh = RotaryEmbedding(2 * module.cos.shape[1], module.cos.shape[0], self.config.model_config().rope_base)
            module.cos.copy_(fresh.cos)
            module.sin.copy_(fresh.sin)
        elif isinstance(module, MixtureOfExperts) and getattr(module, "pending_load", None) is not None:
            module.pending_load.zero_()

    def get_input_embeddings(self):
        return self.core.embedding

    def set_input_embeddings(self, value) -> None:
        self.core.embedding = value

    def get_output_embeddings(self):
        return TiedHead(self.core.embedding) if self.core.head is None else self.core.head

    def forward(self, input_ids: torch.LongTensor | None = None, attention_mask: torch.Tensor | None = None,
                past_key_values: GLM53Cache | None = None, inputs_embeds: torch.Tensor | None = None,
                labels: torch.LongTensor | None = None, use_cache: bool | None = None,
                logits_to_keep: int | torch.Tensor = 0, position_ids: torch.LongTensor | None = None,
                num_items_in_batch: int | torch.Tensor | None = None, **kwargs) -> CausalLMOutputWithPast:
        if inputs_embeds is not None:
            raise ValueError("glm53's transformers model takes input_ids, not inputs_embeds")
        if input_ids is None:
            raise ValueError("pass input_ids")
        B, T = input_ids.shape
        mask = attention_mask if attention_mask is not None else torch.ones_like(input_ids)
        packed = [name for name in PACKING_ARGUMENTS if kwargs.get(name) is not None]
        if packed or (position_ids is not None and past_key_values is None
                      and not torch.equal(position_ids * mask, (mask.cumsum(-1) - 1).clamp_min(0) * mask)):
            raise ValueError(f"{', '.join(packed) or 'position_ids'} say the rows hold several documents (packing, "
                             "padding-free batches); a glm53 model reads one document a row, from position 0: turn "
                             "packing off (TRL: packing=False, padding_free=False)")
        if past_key_values is not None:
            logits = self._decode_step(input_ids, past_key_values)
            cache = past_key_values
        elif use_cache:
            logits, cache = self._prefill_prompts(input_ids, mask[:, -T:])
        else:
            hidden = self.model(input_ids, attention_mask=mask).last_hidden_state
            logits, cache = F.linear(hidden, self.core.head_weight), None
        logits = logits.float()
        loss = None
        if labels is not None:
            # summed, then divided by the labelled tokens of the whole accumulated batch when Trainer gives their
            # count (it then leaves the division by the accumulation steps to us), else by this batch's
            total = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
                                    ignore_index=-100, reduction="sum")
            count = num_items_in_batch if num_items_in_batch is not None else (labels[:, 1:] != -100).sum()
            loss = total / torch.as_tensor(count, device=total.device).clamp_min(1)
        if isinstance(logits_to_keep, int) and logits_to_keep > 0:
            logits = logits[:, -logits_to_keep:]
        elif isinstance(logits_to_keep, torch.Tensor):
            logits = logits[:, logits_to_keep]
        return CausalLMOutputWithPast(loss=loss, logits=logits, past_key_values=cache)

    def _prefill_prompts(self, input_ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, GLM53Cache]:
        """A new decoding state from left-padded prompts: rows of each real length prefilled together, then joined
        in row order; each row's logits sit at its real columns (the pads' logits are 0)."""
        first, lengths = real_spans(mask)
        B, T = input_ids.shape
        if bool((first + lengths < T).any()):
            raise ValueError("generation needs left-padded prompts (a row ends in padding); set the tokenizer's "
                             "padding_side to 'left'")
        logits = torch.zeros(B, T, self.config.vocab_size, device=input_ids.device)
        parts: list[tuple[torch.Tensor, InferenceCache]] = []
        for length in sorted(set(lengths.tolist())):
            rows = (lengths == length).nonzero().squeeze(1)
            part = self.core.new_cache(len(rows))
            if length:
                logits[rows, T - length:] = self.core(input_ids[rows, T - length:], cache=part).float()
            parts.append((rows, part))
        order = torch.cat([rows for rows, _ in parts])
        joined = InferenceCache.concat([part for _, part in parts]).select(order.argsort())
        return logits, GLM53Cache(joined, T)

    def _decode_step(self, input_ids: torch.Tensor, cache: GLM53Cache) -> torch.Tensor:
        logits = self.core(input_ids, cache=cache.inner)
        cache.seen += input_ids.shape[1]
        return logits

    def generate(self, inputs: torch.Tensor | None = None, generation_config=None, **kwargs):
        """transformers' generate, refused in one line before anything is decoded when the longest prompt plus
        max_new_tokens passes the context, as glm53's generate refuses it (decode/generate.py check_lengths)."""
        ids = inputs if inputs is not None else kwargs.get("input_ids")
        if torch.is_tensor(ids) and ids.dim() == 2 and ids.shape[1]:
            config = generation_config or self.generation_config
            mask = kwargs.get("attention_mask")
            longest = int(mask.sum(-1).max()) if torch.is_tensor(mask) else ids.shape[1]
            new = kwargs.get("max_new_tokens", config.max_new_tokens)
            if new is None:
                new = kwargs.get("max_length", config.max_length) - ids.shape[1]
            context = self.config.max_position_embeddings
            if longest + new > context:
                raise ValueError(f"a prompt of {longest} tokens + max_new_tokens {new} exceeds the model's context of "
                                 f"{context} tokens (max_sequence_length); lower max_new_tokens to at most "
                                 f"{max(context - longest, 0)} or shorten the prompt")
        return super().generate(inputs, generation_config, **kwargs)

    def prepare_inputs_for_generation(self, input_ids: torch.LongTensor, past_key_values: GLM53Cache | None = None,
                                      attention_mask: torch.Tensor | None = None, use_cache: bool = True,
                                      **kwargs) -> dict:
        """The columns the decoding state has not consumed (all of them before the first step)."""
        if past_key_values is not None:
            if past_key_values.seen >= input_ids.shape[1]:
                raise ValueError(f"past_key_values has consumed {past_key_values.seen} columns of an input of "
                                 f"{input_ids.shape[1]}: a glm53 decoding state serves one generate call; pass "
                                 "past_key_values=None (or the state a forward of fewer tokens returned)")
            input_ids = input_ids[:, past_key_values.seen:]
        return {"input_ids": input_ids, "attention_mask": attention_mask, "past_key_values": past_key_values,
                "use_cache": use_cache}
