"""Pretraining batches: one generated function per row, BOS + bytes + EOS, right-padded, PAD never a target.

Row r of step t (0-based) is document t * batch_size + r, so the data order is a pure function of the seed
and the step: resuming at step t needs no data-loader state. No packing, as in the reference. The documents
come from a task suite's stream (glm53/data/suites.py; the reference suite's by default).

A suite with `bucket_steps` (the broad suite: 8; its documents run from about 60 to 322 tokens) batches by length
instead: the documents of steps [w * 8, w * 8 + 8) are sorted by length (an ordered run's by its group first:
run_order.py) and cut into 8 batches, which those steps
take in an order shuffled by (seed, w), and each batch is cut to its longest row. The same documents are seen,
in another order, at about 60% of the cost of padding every row to sequence_length (no row attends to another,
and PAD is never a target, so a row's loss does not depend on its padding). Still a pure function of the step.

With a corpus of one's own (corpus.py, `--corpus`), `corpus_mix` of the rows come from it: of the run's first
g rows, floor(g * mix) are corpus rows, so step t takes corpus rows floor(t * B * mix) .. floor((t + 1) * B * mix)
- 1 of the corpus order, then generated documents from where the earlier steps' generated rows left off (the
stream in plain order, every row padded to sequence_length), still a pure function of the step. On a suite that
batches by length, `buckets` (--corpus-in-buckets, the default since issue 58) sorts a window's corpus rows with its
generated documents instead: the rows of steps [w * 8, w * 8 + 8), the same corpus rows and documents the plain
order gives those 8 steps, are sorted by their tokens and cut into 8 batches as above, so the long corpus rows share
batches and the short ones are not padded to them (at a mix of 0.25 and rows of 512 on the broad stream, about a
third of the plain order's cost). A step's share of corpus rows then varies; a window's is the plain order's.
Both kinds of row hold the model's tokenizer's ids: the corpus is tokenized with it when it is read.

`docstring_share` (broad suite) renders that share of the generated documents in docstring style, each chosen by a
hash of (seed, index) (broad/docstring.py), so the data order stays a pure function of the step; 0 is the stream.
`stream_primitives` (broad suite) draws the generated documents from a wider registry (broad/stream_primitives.py);
data/training_stream.py composes the two.

With `loss_on="completion"` the targets of each generated document's prompt (its comment lines and `def` line, or
its `def` line and docstring) are set to IGNORE_INDEX, so the loss is the body's alone: the model reads the prompt
and learns to answer it, as the tasks ask, without spending its updates on predicting descriptions
(`completion_labels`; corpus rows are left whole: with a corpus the loss is on the generated rows' bodies and on
every corpus token, and a run of the corpus alone is refused the setting). The inputs, and so the data order, are
the same either way.

The validation rows of the generated stream are documents VALIDATION_FIRST_INDEX (2^40) + i of the same seed's
stream. Training reads documents [0, steps * batch_size) only (bucketing: to the end of the last window of 8
steps), and train/validation.py refuses a run long enough to reach 2^40, so the two sets of indices cannot
overlap; a document is a pure function of (seed, index), so validation draws from no RNG that training uses.
"""

from __future__ import annotations

import math
import random
import re

import torch

from .suites import DEFAULT_SUITE
from .training_stream import training_stream
from .tokenizer import ByteTokenizer

IGNORE_INDEX = -100
DOCSTRING_OPENING = re.compile(r'    r?"""')  # a function's docstring, on the line after its def line
VALIDATION_FIRST_INDEX = 1 << 40


def encode_documents(texts: list[str], sequence_length: int, tokenizer=None):
    """texts -> (inputs [B, sequence_length], labels [B, sequence_length]) with PAD labels set to -100 (the byte
    tokenizer unless `tokenizer` is given)."""
    tokenizer = tokenizer or ByteTokenizer()
    rows = torch.full((len(texts), sequence_length + 1), tokenizer.pad_id, dtype=torch.long)
    for r, text in enumerate(texts):
        ids = tokenizer.encode(text, bos=True, eos=True)
        if len(ids) > sequence_length + 1:
            raise ValueError(f"document {r} is {len(ids)} tokens with BOS/EOS, longer than sequence_length + 1 = "
                             f"{sequence_length + 1}; raise --sequence-length")
        rows[r, : len(ids)] = torch.tensor(ids)
    inputs = rows[:, :-1].clone()
    labels = rows[:, 1:].clone()
    labels[labels == tokenizer.pad_id] = IGNORE_INDEX
    return inputs, labels


def prompt_text(text: str) -> str:
    """A task-shaped document's prompt: everything before the newline that ends its first `def` line (that newline
    is the body's first byte, as in a task's canonical completion), or where a docstring opens the function (the
    broad suite's docstring style, broad/docstring.py), before the newline that ends the docstring's last line."""
    start = text.find("def ") if text.startswith("def ") else text.find("\ndef ")
    if start < 0:
        raise ValueError(f"document {text[:60]!r}... has no def line, so it has no completion to take the loss on; "
                         "use --loss-on all")
    end = text.find("\n", start + 1)
    opening = DOCSTRING_OPENING.match(text, end + 1) if end >= 0 else None
    closing = text.find('"""', opening.end()) if opening else -1
    if closing >= 0:
        end = text.find("\n", closing + 3)
    return text if end < 0 else text[:end]


def prompt_bytes(text: str) -> int:
    """Bytes of the document's prompt (prompt_text)."""
    return len(prompt_text(text).encode("utf-8", errors="surrogatepass"))


def completion_labels(labels: torch.Tensor, texts: list[str], tokenizer=None) -> torch.Tensor:
    """`labels` (rows as encode_documents makes them) with each row's prompt targets set to IGNORE_INDEX: label
    j is token j of the text (input j is BOS or token j - 1), so the prompt's tokens' labels go. With the byte
    tokenizer that is prompt_bytes(text) labels; a byte-pair tokenizer cuts no token across the end of the `def`
    line (bpe_tokenizer.py), so the prompt's own encoding counts them."""
    labels = labels.clone()
    for row, text in enumerate(texts):
        cut = prompt_bytes(text) if tokenizer is None else len(tokenizer.encode(prompt_text(text)))
        labels[row, :cut] = IGNORE_INDEX
    return labels


def pretraining_batch(step: int, batch_size: int, sequence_length: int, seed: int = 42, suite: str = DEFAULT_SUITE,
                      corpus=None, corpus_mix: float = 1.0, loss_on: str = "all", ordered=None, tokenizer=None,
                      docstring_share: float = 0.0, corpus_in_buckets: bool = True, stream_primitives: str = "",
                      stream_primitives_share: float = 1.0):
    """The batch for 0-based optimizer step `step`, from `suite`'s stream, or with a `corpus` (corpus.Corpus)
    `corpus_mix` of its rows from the corpus (the module docstring); `loss_on` "completion" keeps only the
    generated documents' body targets; `ordered` (run_order.OrderedStream): the run's documents in another order
    or from fewer distinct ones, read in place of the stream; `tokenizer`: the model's, which tokenizes the
    generated rows (bytes by default; with a corpus, the one it was read with); `docstring_share`: the share of the
    broad stream's documents in docstring style (broad/docstring.py; an `ordered` stream was made with its own);
    `corpus_in_buckets`: a corpus's rows sorted by length with the generated ones (the module docstring);
    `stream_primitives`: the broad stream's primitive file (broad/stream_primitives.py; "" the built-in grammar), and
    `stream_primitives_share` the share of the documents drawn with it."""
    stream = ordered or training_stream(suite, docstring_share, stream_primitives, stream_primitives_share)
    if corpus is not None:
        return mixed_batch(stream, step, batch_size, sequence_length, seed, corpus, corpus_mix, tokenizer, loss_on,
                           corpus_in_buckets)
    if not stream.bucket_steps:
        texts = [stream.pretraining_text(step * batch_size + r, seed) for r in range(batch_size)]
        inputs, labels = encode_documents(texts, sequence_length, tokenizer)
    else:
        texts = bucketed_texts(stream, step, batch_size, seed)
        inputs, labels = encode_documents(texts, sequence_length, tokenizer)
        width = int((labels != IGNORE_INDEX).sum(dim=1).max())  # the longest row's tokens + EOS
        inputs, labels = inputs[:, :width].contiguous(), labels[:, :width].contiguous()
    return inputs, (completion_labels(labels, texts, tokenizer) if loss_on == "completion" else labels)


def compiled_width(width: int, limit: int) -> int:
    """The width a compiled step pads a batch of `width` columns to: a multiple of 16 up to 128 columns, of 64 above
    (so rows of up to 1,024 meet 22 widths, not 64), at most `limit`."""
    step = 16 if width <= 128 else 64
    return min(limit, -(-width // step) * step)


def compiled_widths(limit: int) -> int:
    """How many widths compiled_width gives for batches of 1 .. `limit` columns: the graphs a compiled run may
    need, one a width."""
    return len({compiled_width(w, limit) for w in range(1, limit + 1)})


def widened(inputs, labels, pad_id: int, limit: int):
    """A batch's columns padded to compiled_width: PAD in the inputs, IGNORE_INDEX in the labels. A compiled step
    meets one shape per width and compiles again for each new one, so a length-bucketed run (a width almost every
    step) is cut to a few widths this way. Causal attention means no earlier position reads the new ones and they
    are never targets, so the language (and MTP) loss is the same but for float rounding. The routed experts'
    statistics are not: the padding is routed and counted in the balance loss, the sigmoid-bias router's load and
    the indexer's loss, as the padding of a batch's shorter rows already is in an eager run; a compiled run of a
    routed model therefore differs from the eager one by more than rounding (docs/speed.md)."""
    width = inputs.shape[1]
    target = compiled_width(width, limit)
    if target <= width:
        return inputs, labels
    grow = (0, target - width)
    return (torch.nn.functional.pad(inputs, grow, value=pad_id),
            torch.nn.functional.pad(labels, grow, value=IGNORE_INDEX))


def bucketed_texts(stream, step: int, batch_size: int, seed: int) -> list[str]:
    """Step `step`'s documents under length bucketing (see the module docstring), in stream order."""
    window, slot = divmod(step, stream.bucket_steps)
    first = window * stream.bucket_steps * batch_size
    texts = [stream.pretraining_text(first + i, seed) for i in range(stream.bucket_steps * batch_size)]
    group = getattr(stream, "group", lambda index: 0)  # an ordered run's groups stay apart (run_order.py)
    order = sorted(range(len(texts)), key=lambda i: (group(first + i), len(texts[i]), i))
    batches = [order[k * batch_size:(k + 1) * batch_size] for k in range(stream.bucket_steps)]
    random.Random(f"length-buckets:{seed}:{window}").shuffle(batches)
    return [texts[i] for i in sorted(batches[slot])]


def mixed_batch(stream, step: int, batch_size: int, sequence_length: int, seed: int, corpus, mix: float,
                tokenizer=None, loss_on: str = "all", buckets: bool = True):
    """Step `step`'s corpus rows first, then its generated documents, under `tokenizer` (bytes by default), the
    generated rows' prompts no target under `loss_on` "completion"; with `buckets` on a suite that batches by
    length, the rows of its window sorted by length (the module docstring)."""
    names = [getattr(t, "name", "byte") for t in (corpus.tokenizer, tokenizer)]  # ByteTokenizer and None: bytes
    if names[0] != names[1]:  # the rows of one batch must be ids of one vocabulary
        raise ValueError(f"the corpus was tokenized with {names[0]}, the generated rows are to be {names[1]}; read "
                         "the corpus with the model's tokenizer (load_corpus(..., tokenizer_for(config.model)))")
    if buckets and stream.bucket_steps:
        window, slot = divmod(step, stream.bucket_steps)
        inputs, labels = plain_mixed_rows(stream, window * stream.bucket_steps * batch_size,
                                          stream.bucket_steps * batch_size, sequence_length, seed, corpus, mix,
                                          tokenizer, loss_on)
        lengths = last_target_ends(labels).tolist()  # the columns a row needs: to its last target (EOS, or a corpus
        # row's last token), which every loss_on keeps
        order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
        batches = [order[k * batch_size:(k + 1) * batch_size] for k in range(stream.bucket_steps)]
        random.Random(f"mixed-length-buckets:{seed}:{window}").shuffle(batches)
        rows = sorted(batches[slot])  # corpus rows first, as in the plain order
        width = max(lengths[i] for i in rows)
        return inputs[rows, :width].contiguous(), labels[rows, :width].contiguous()
    return plain_mixed_rows(stream, step * batch_size, batch_size, sequence_length, seed, corpus, mix, tokenizer,
                            loss_on)


def plain_mixed_rows(stream, first: int, count: int, sequence_length: int, seed: int, corpus, mix: float,
                     tokenizer=None, loss_on: str = "all"):
    """The run's rows first .. first + count - 1 in the plain order: their corpus rows, then their generated
    documents, each padded to sequence_length."""
    corpus_first, corpus_end = math.floor(first * mix), math.floor((first + count) * mix)
    inputs, labels = corpus.training_batch(corpus_first, corpus_end - corpus_first, seed)
    generated_first = first - corpus_first
    texts = [stream.pretraining_text(generated_first + i, seed) for i in range(count - len(inputs))]
    if not texts:
        return inputs, labels
    more_inputs, more_labels = encode_documents(texts, sequence_length, tokenizer)
    if loss_on == "completion":
        more_labels = completion_labels(more_labels, texts, tokenizer)
    return torch.cat([inputs, more_inputs]), torch.cat([labels, more_labels])


def last_target_ends(labels: torch.Tensor) -> torch.Tensor:
    """Per row, one past the column of its last target (0 for a row without one)."""
    columns = torch.arange(1, labels.shape[1] + 1).expand_as(labels)
    return (columns * (labels != IGNORE_INDEX)).max(dim=1).values


def validation_batch(rows: int, sequence_length: int, seed: int = 42, suite: str = DEFAULT_SUITE, corpus=None,
                     loss_on: str = "all", tokenizer=None, docstring_share: float = 0.0, stream_primitives: str = "",
                     stream_primitives_share: float = 1.0):
    """The held-out rows the validation loss averages over: at most `rows` rows of the corpus's held-out documents,
    or without a corpus the generated documents VALIDATION_FIRST_INDEX .. + rows - 1 (the module docstring), with
    the targets training takes its loss on (`loss_on`)."""
    if corpus is not None:
        return corpus.validation_batch(rows)
    stream = training_stream(suite, docstring_share, stream_primitives, stream_primitives_share)
    texts = [stream.pretraining_text(VALIDATION_FIRST_INDEX + i, seed) for i in range(rows)]
    inputs, labels = encode_documents(texts, sequence_length, tokenizer)
    return inputs, (completion_labels(labels, texts, tokenizer) if loss_on == "completion" else labels)
