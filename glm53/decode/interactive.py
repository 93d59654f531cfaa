"""`glm53 generate --interactive`: read prompts from stdin and stream each completion as its tokens are made.

A prompt is one or more lines ended by an empty line (or by the end of input), joined by newlines without a final
one, as a task's prompt ends at its `def f(x):` line; Ctrl-D (the end of input) quits. A prompt that fails (longer
than the context) is said on stderr and the session goes on, but the process then exits 1, so a script that pipes
prompts in can tell. Each completion is printed
piece by piece as it is decoded, flushed, and followed by a newline.

The decoder is the cached engine's loop (engine.py) for one row, with a callback per token: the prompt is
prefilled once, then one token a step, the same sampler, banned ids, stop rules and token cap (cut to what the
context leaves after a long prompt), so with temperature 0 it makes the engine's tokens. Simplifications: one
sample per prompt, fp32 only. A piece is printed only once it can no longer change: a trailing U+FFFD (a character
whose UTF-8 bytes are still arriving) waits for the next token, and under the `function` stop rule, whose cut drops
the blank lines before the function's end, so do trailing newlines.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import TextIO

import torch

from ..data.bpe_tokenizer import Tokenizer, tokenizer_for
from ..model.model import GLM53
from .generate import STOP_RULES, StopRule, banned_ids, cut_to_function, result_record, row_caps, sample_next
from .sampling import Sampling

GUIDE = "type a prompt; an empty line ends it and starts the completion; Ctrl-D quits"


def printable(text: str) -> str:
    """`text` as a terminal can print it: a lone surrogate (the byte tokenizer decodes the bytes of one exactly,
    and a model may draw them) has no UTF-8 form, so printing it would fail after the work is done; it is shown as
    U+FFFD, as other bytes that are not UTF-8 are (--json keeps it exactly)."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def read_prompts(stream: TextIO) -> Iterator[str]:
    """Prompts from `stream`, each yielded as soon as its empty line arrives (lines are read one at a time, so an
    interactive user is answered at once); empty lines between prompts are skipped."""
    lines: list[str] = []
    for line in iter(stream.readline, ""):
        line = line.rstrip("\r\n")
        if line:
            lines.append(line)
        elif lines:
            yield "\n".join(lines)
            lines = []
    if lines:
        yield "\n".join(lines)


def stream_completion(model: GLM53, prompt: str, sampling: Sampling, generator: torch.Generator | None,
                      stop: str | StopRule | None, on_text: Callable[[str], None],
                      tokenizer: Tokenizer | None = None,
                      on_token: Callable[[int, torch.Tensor], None] | None = None) -> dict:
    """One completion of `prompt`, `on_text(piece)` called with each new piece of its text as tokens arrive; the
    pieces join to the returned record's completion ({"completion", "token_ids", "hit_token_cap"}, as the engine's).
    `stop`: a name in STOP_RULES ("statement" or "function"), a rule of one's own (prompt, completion) -> bool, or
    None for EOS and the token cap only.
    `on_token(id, logits)`, when given, sees each drawn token with the scores it was drawn from ([vocab], banned ids
    at -inf) before the stop rule does (glm53 serve's per-byte view); an exception it raises ends the completion."""
    pieces = completion_pieces(model, prompt, sampling, generator, stop, tokenizer, on_token)
    while True:
        try:
            on_text(next(pieces))
        except StopIteration as end:
            return end.value


def completion_pieces(model: GLM53, prompt: str, sampling: Sampling, generator: torch.Generator | None,
                      stop: str | StopRule | None, tokenizer: Tokenizer | None = None,
                      on_token: Callable[[int, torch.Tensor], None] | None = None) -> Generator[str, None, dict]:
    """`stream_completion` as a generator: it yields the pieces of text and returns the record (StopIteration's
    value). The model decodes only while the generator is advanced, under no_grad."""
    tokenizer = tokenizer or tokenizer_for(model.config)
    rule = STOP_RULES[stop] if isinstance(stop, str) else stop
    ids = tokenizer.encode(prompt, bos=True)
    cap = row_caps(model, [ids], sampling.max_new_tokens, fit_context=True)[0]
    banned = torch.tensor(banned_ids(model, tokenizer, sampling.ignore_eos), device=model.device)
    was_training = model.training
    model.eval()
    tokens: list[int] = []
    shown, stopped = "", False
    try:
        with torch.no_grad():
            cache = model.new_cache(1, len(ids) + cap)
            logits = model(torch.tensor([ids], device=model.device), cache=cache)[:, -1]
        while len(tokens) < cap:
            logits = logits.float()
            logits[:, banned] = float("-inf")
            token = sample_next(logits, sampling, generator)
            tokens.append(int(token[0]))
            if on_token is not None:
                on_token(tokens[-1], logits[0])
            completion = tokenizer.decode(tokens)
            if tokens[-1] == tokenizer.eos_id or (rule is not None and rule(prompt, completion)):
                stopped = True
                break
            ready = completion.rstrip("\ufffd")
            if stop == "function":
                ready = ready.rstrip("\n")
            if len(ready) > len(shown) and ready.startswith(shown):
                yield ready[len(shown):]  # the caller's time, outside no_grad and eval's scope is its own
                shown = ready
            if len(tokens) < cap:
                with torch.no_grad():
                    logits = model(token[:, None], cache=cache)[:, -1]
    finally:
        model.train(was_training)
    record = result_record(tokenizer, tokens, stopped, cap)
    if stop == "function":
        record = cut_to_function(record, tokenizer)
    if record["completion"].startswith(shown) and len(record["completion"]) > len(shown):
        yield record["completion"][len(shown):]
    return record


def run_repl(model: GLM53, sampling: Sampling, generator: torch.Generator, stop: str | None, stdin: TextIO,
             stdout: TextIO, stderr: TextIO, edit: Callable[[str], str] = str) -> tuple[int, int]:
    """Answer each prompt of `stdin` on `stdout` (the guide and any problem with a prompt, one line each, on
    `stderr`, which leaves stdout the completions alone); a prompt that fails is said and the next one is read.
    Returns (prompts completed, prompts that failed); when any failed, a last line on `stderr` counts them, and
    the command exits 1. `edit` turns a typed prompt into the model's (--escapes)."""
    print(f"glm53 generate: {GUIDE}", file=stderr, flush=True)

    def show(piece: str) -> None:
        stdout.write(printable(piece))
        stdout.flush()

    done = failed = 0
    for prompt in read_prompts(stdin):
        try:
            stream_completion(model, edit(prompt), sampling, generator, stop, show)
        except ValueError as err:  # a prompt longer than the context: say so and read the next one
            print(f"glm53 generate: error: {err}", file=stderr, flush=True)
            failed += 1
            continue
        show("\n")
        done += 1
    if failed:
        print(f"glm53 generate: {failed} of {done + failed} prompts failed (said above); exit status 1",
              file=stderr, flush=True)
    return done, failed
