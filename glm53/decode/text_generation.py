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
from ..runtime.memory import decoding_memory_problem
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


# the keywords a transformers user passes to generate(), as they map onto Sampling (see `transformers_sampling`)
TRANSFORMERS_KEYWORDS = ("temperature", "top_k", "top_p", "do_sample")
# what generate_text takes by keyword, besides its positional parameters
KEYWORDS = ("samples", "seed", "generator", "cache", "tokenizer", *TRANSFORMERS_KEYWORDS)
# do_sample=True without a temperature: transformers' default temperature, which such a caller expects
TRANSFORMERS_TEMPERATURE = 1.0


def transformers_sampling(sampling: Sampling | None, temperature: float | None, top_k: int | None,
                          top_p: float | None, do_sample: bool | None) -> Sampling | None:
    """`sampling` from the keywords a transformers user types: do_sample=False (or temperature=0) is greedy,
    do_sample=True samples (at temperature 1.0 unless one is given), a temperature above 0 alone samples at it;
    top_k=0 and top_p=1.0 keep every token, as in transformers. None when none is given. A contradiction
    (do_sample=False with a temperature above 0, do_sample=True at temperature 0, these with `sampling`) is a
    one-line ValueError."""
    given = {k: v for k, v in (("temperature", temperature), ("top_k", top_k), ("top_p", top_p),
                               ("do_sample", do_sample)) if v is not None}
    if not given:
        return None
    if sampling is not None:
        raise ValueError(f"give either sampling= or {', '.join(f'{k}=' for k in given)} (transformers' names for "
                         "the same settings), not both")
    if do_sample is not None and not isinstance(do_sample, bool):
        raise ValueError(f"do_sample must be True or False, got {do_sample!r}")
    if do_sample is False and temperature is not None and temperature > 0:
        raise ValueError(f"do_sample=False decodes greedily, but temperature={temperature} asks for sampling: drop "
                         "one of them (temperature=0 is greedy too)")
    if do_sample and temperature is not None and temperature <= 0:
        raise ValueError(f"do_sample=True samples, but temperature={temperature} is greedy: give a temperature > 0, "
                         "or do_sample=False")
    if do_sample is False:
        temperature = 0.0
    elif temperature is None:
        temperature = TRANSFORMERS_TEMPERATURE if do_sample else 0.0
    return Sampling(temperature=temperature, top_k=None if top_k == 0 else top_k, top_p=top_p)  # checked there


def generate_text(model: GLM53, prompts: str | list[str], sampling: Sampling | None = None,
                  max_new_tokens: int | None = None, stop: str | StopRule = "function", stream: bool = False, *,
                  samples: int = 1, seed: int = 0, generator: torch.Generator | None = None, cache: bool = True,
                  tokenizer: Tokenizer | None = None, temperature: float | None = None, top_k: int | None = None,
                  top_p: float | None = None, do_sample: bool | None = None) -> list[Generation] | TextStream:
    """Complete `prompts` (one string or a list): a list of Generation, `samples` per prompt in prompt order, or
    with `stream=True` a TextStream. `sampling` (default greedy, 48 new tokens) and `max_new_tokens` (replaces
    its cap) say how tokens are drawn, or transformers' `temperature`, `top_k`, `top_p` and `do_sample` in its
    place (`transformers_sampling`); `seed` seeds a generator on the model's device unless `generator` is given.
    Every problem is a ValueError of one line, raised before anything is decoded."""
    prompts = [prompts] if isinstance(prompts, str) else list(prompts)
    if not prompts or not all(isinstance(p, str) for p in prompts):
        raise ValueError(f"prompts must be a string or a non-empty list of strings, got {prompts!r:.80}")
    sampling = transformers_sampling(sampling, temperature, top_k, top_p, do_sample) or sampling or Sampling()
    if max_new_tokens is not None:
        sampling = replace(sampling, max_new_tokens=max_new_tokens)  # checked as the flag is
    rule = _stop_rule(stop)
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    if stream and (samples > 1 or not cache):
        raise ValueError("stream=True decodes one sample per prompt with the cache: drop samples and cache=False")
    tokenizer = tokenizer or tokenizer_for(model.config)
    longest = check_lengths(model, [tokenizer.encode(p, bos=True) for p in prompts], sampling.max_new_tokens)
    problem = decoding_memory_problem(model.config, len(prompts), longest, "samples", samples)  # all rows at once
    if problem and not stream:
        raise ValueError(problem)
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


def model_generate(model: GLM53, prompts: str | list[str], sampling: Sampling | None = None,
                   max_new_tokens: int | None = None, stop: str | StopRule = "function", stream: bool = False,
                   **options) -> list[Generation] | TextStream:
    """`GLM53.generate`'s body: generate_text, with a keyword it does not take said in the method's terms rather
    than as a TypeError from inside the library. The package face (glm53/__init__.py) provides it to the model as
    "text generation" (runtime/providers.py), so the model reaches it without importing this floor."""
    unknown = sorted(set(options) - set(KEYWORDS))
    if unknown:
        raise TypeError(f"GLM53.generate() got an unexpected keyword argument {', '.join(map(repr, unknown))}; "
                        f"it takes prompts, sampling, max_new_tokens, stop, stream and by keyword "
                        f"{', '.join(KEYWORDS)}")
    return generate_text(model, prompts, sampling, max_new_tokens, stop, stream, **options)


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
