"""Text in, text and token ids out: `GLM53.generate` and `glm53 generate --prompt` are this one function, so the
two cannot drift.

    model.generate("def f(x):")                         -> [Generation(prompt, completion, token_ids, hit_token_cap)]
    model.generate(["def f(x):", "def g(y):"], sampling=Sampling(temperature=0.35), seed=1, samples=4)
    stream = model.generate("def f(x):", stream=True)   -> TextStream: iterate for the pieces of text as they are made,
                                                           then stream.generations holds the records

Without `stream`, the cached engine (engine.py) decodes every prompt and sample as one batch (`cache=False`: the
plain reference generator, generate.py). With `stream`, each prompt is decoded in turn by the streaming loop of
`glm53 generate --interactive` (interactive.py), which makes the engine's tokens for one prompt and one sample.
Stop rules, by the command's names: "function" (after the body's first complete statement, the reference suite's
rule; the default), "end" (where the function ends, cut there: the broad suite's rule), "eos" (only EOS and the
token cap), or a rule of one's own, (prompt, completion so far) -> stop now?

Simplifications: streaming takes one sample per prompt and decodes in fp32 with the cache. With several prompts at a
temperature above 0, streaming draws each prompt's tokens in turn from the one generator while the batch draws them
all at once, so their samples differ (from the same distribution); with one prompt, or greedy, they are equal.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

import torch

from ..data.bpe_tokenizer import Tokenizer, tokenizer_for
from ..model.model import GLM53
from .engine import generate_groups
from .generate import STOP_RULES, StopRule, check_lengths, cut_to_function, generate_uncached
from .interactive import completion_pieces
from .sampling import STOP_NAMES, Sampling


@dataclass(frozen=True)
class Generation:
    """One completion: the prompt, the text the model added, its token ids (EOS kept when it ended there, as the
    engine keeps it) and whether it ran to the token cap."""

    prompt: str
    completion: str
    token_ids: list[int]
    hit_token_cap: bool

    @property
    def text(self) -> str:
        """The prompt and its completion, as `glm53 generate` prints them."""
        return self.prompt + self.completion

    def to_json(self) -> dict:
        """As `glm53 generate --json` prints it."""
        return {"prompt": self.prompt, "completion": self.completion, "token_ids": self.token_ids,
                "hit_token_cap": self.hit_token_cap}


class TextStream:
    """The pieces of the completions' text, prompt after prompt, as they are decoded (iterate it once). When it is
    exhausted, `generations` holds one Generation per prompt, as `generate(..., stream=False)` returns them."""

    def __init__(self, pieces: Iterator[str], generations: list[Generation]):
        self._pieces, self.generations = pieces, generations

    def __iter__(self) -> Iterator[str]:
        return self._pieces


def generate_text(model: GLM53, prompts: str | list[str], sampling: Sampling | None = None,
                  max_new_tokens: int | None = None, stop: str | StopRule = "function", stream: bool = False, *,
                  samples: int = 1, seed: int = 0, generator: torch.Generator | None = None, cache: bool = True,
                  tokenizer: Tokenizer | None = None) -> list[Generation] | TextStream:
    """Complete `prompts` (one string or a list): a list of Generation, `samples` per prompt in prompt order, or
    with `stream=True` a TextStream. `sampling` (default greedy, 48 new tokens) and `max_new_tokens` (replaces
    its cap) say how tokens are drawn; `seed` seeds a generator on the model's device unless `generator` is given.
    Every problem is a ValueError of one line, raised before anything is decoded."""
    prompts = [prompts] if isinstance(prompts, str) else list(prompts)
    if not prompts or not all(isinstance(p, str) for p in prompts):
        raise ValueError(f"prompts must be a string or a non-empty list of strings, got {prompts!r:.80}")
    sampling = sampling or Sampling()
    if max_new_tokens is not None:
        sampling = replace(sampling, max_new_tokens=max_new_tokens)  # checked as the flag is
    rule = _stop_rule(stop)
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    if stream and (samples > 1 or not cache):
        raise ValueError("stream=True decodes one sample per prompt with the cache: drop samples and cache=False")
    tokenizer = tokenizer or tokenizer_for(model.config)
    check_lengths(model, [tokenizer.encode(p, bos=True) for p in prompts], sampling.max_new_tokens)
    generator = generator or torch.Generator(device=model.device).manual_seed(seed)
    if stream:
        generations: list[Generation] = []
        return TextStream(_pieces(model, prompts, sampling, generator, stop, rule, tokenizer, generations),
                          generations)
    decode = generate_groups if cache else generate_uncached
    groups = decode(model, prompts, samples, sampling, generator=generator, stop=rule, tokenizer=tokenizer)
    cut = stop == "end"
    return [Generation(prompt=prompt, **(cut_to_function(record, tokenizer) if cut else record))
            for prompt, group in zip(prompts, groups) for record in group]


def _stop_rule(stop: str | StopRule) -> StopRule | None:
    if callable(stop):
        return stop
    if stop not in STOP_NAMES:
        raise ValueError(f"stop must be one of {', '.join(STOP_NAMES)} or a function (prompt, completion) -> bool, "
                         f"got {stop!r}")
    name = STOP_NAMES[stop]
    return STOP_RULES[name] if name else None


def _pieces(model: GLM53, prompts: list[str], sampling: Sampling, generator: torch.Generator,
            stop: str | StopRule, rule: StopRule | None, tokenizer: Tokenizer,
            generations: list[Generation]) -> Iterator[str]:
    for prompt in prompts:
        record = yield from completion_pieces(model, prompt, sampling, generator,
                                              STOP_NAMES[stop] if isinstance(stop, str) else rule, tokenizer)
        generations.append(Generation(prompt=prompt, **record))
