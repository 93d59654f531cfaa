"""`--corpus` under the run's tokenizer (glm53/data/corpus.py): a byte run's rows exactly as before (computed here
from first principles), a byte-pair run's rows BOS + tokenizer.encode(text) + EOS under the same conventions, a
single file's stream predicting every byte once under any tokenizer, tokens counted, and the generated rows of a
mixed batch in the same vocabulary."""

import json

import pytest
import torch

from glm53.data.bpe_tokenizer import load_bpe
from glm53.data.corpus import Document, document_ids, load_corpus, read_documents, token_bytes
from glm53.data.pretrain_batches import IGNORE_INDEX, encode_documents, pretraining_batch
from glm53.data.suites import get_suite
from glm53.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, ByteTokenizer

from .test_corpus import write_files

CODE = load_bpe("code-bpe-2048")
TOKENIZERS = [None, load_bpe("broad-bpe-1024"), CODE]  # None: bytes
TEXTS = {f"pkg/m{i:02d}.py": f'def f{i}(x):\n    """Add {i}: é€."""\n    return x + {i}\n' * (1 + i % 9)
         for i in range(40)}
STREAM = "".join(f"def f{i}(x):\n    return x + {i}  # é\n" for i in range(30))


def first_principles_rows(texts: list[str], sequence_length: int, encode) -> list[list[int]]:
    """The rows of documents `texts` as the corpus has always cut them: BOS + ids + EOS, pieces of L + 1 ids from
    every L-th id, the last piece shorter."""
    rows = []
    for text in texts:
        ids = encode(text)
        rows += [ids[s:s + sequence_length + 1] for s in range(0, len(ids) - 1, sequence_length)]
    return rows


def row_ids(rows, sequence_length: int) -> list[list[int]]:
    return [rows.tokens[s:s + n].tolist() for s, n in zip(rows.starts, rows.lengths)]


def targets(rows, sequence_length: int) -> list[int]:
    _, labels = rows.batch(range(len(rows)), sequence_length)
    return labels[labels != IGNORE_INDEX].tolist()


def test_the_byte_fast_path_gives_encodes_ids():
    for data in ["x = 1\n", "é€😀\n\t", "a" * 300, "\x7f\n"]:
        for bos in (True, False):
            for eos in (True, False):
                doc = Document("d", "d", data.encode(), bos, eos)
                want = ByteTokenizer().encode(data, bos=bos, eos=eos)
                assert document_ids(doc).tolist() == document_ids(doc, ByteTokenizer()).tolist() == want


def test_a_byte_runs_rows_are_as_they_were(tmp_path):
    root = write_files(tmp_path / "c", TEXTS)
    corpus = load_corpus(str(root), 0.2, 24)
    assert corpus.summary["tokenizer"] == "byte" and corpus.tokenizer is None
    byte = ByteTokenizer()
    for rows, names in ((corpus.train, sorted(set(TEXTS) - corpus.heldout)),
                        (corpus.validation, sorted(corpus.heldout))):
        want = first_principles_rows([TEXTS[n] for n in names], 24, lambda t: byte.encode(t, bos=True, eos=True))
        assert row_ids(rows, 24) == want
    assert corpus.summary["tokens"] == sum(len(t.encode()) + 2 for t in TEXTS.values())


def test_a_byte_runs_single_file_stream_is_as_it_was(tmp_path):
    (tmp_path / "input.txt").write_text(STREAM)
    corpus = load_corpus(str(tmp_path / "input.txt"), 0.1, 32)
    data = STREAM.encode()
    cut = len(data) - (corpus.summary["validation_bytes"] - 1)
    head = [BOS_ID] + [b + 4 for b in data[:cut]]
    tail = [b + 4 for b in data[cut - 1:]] + [EOS_ID]
    assert corpus.train.tokens.tolist() == head and corpus.validation.tokens.tolist() == tail


@pytest.mark.parametrize("tokenizer", TOKENIZERS[1:], ids=lambda t: t.name)
def test_a_bpe_runs_rows_are_bos_encode_eos_under_the_same_conventions(tmp_path, tokenizer):
    root = write_files(tmp_path / "c", TEXTS)
    corpus = load_corpus(str(root), 0.2, 24, tokenizer)
    assert corpus.heldout == load_corpus(str(root), 0.2, 24).heldout  # held out by document, not by its ids
    for rows, names in ((corpus.train, sorted(set(TEXTS) - corpus.heldout)),
                        (corpus.validation, sorted(corpus.heldout))):
        want = first_principles_rows([TEXTS[n] for n in names], 24, lambda t: tokenizer.encode(t, bos=True, eos=True))
        assert row_ids(rows, 24) == want
        assert targets(rows, 24) == [i for n in names for i in tokenizer.encode(TEXTS[n], eos=True)]  # each once
    c = corpus.summary
    assert c["tokenizer"] == tokenizer.name and c["bytes"] == sum(len(t.encode()) for t in TEXTS.values())
    assert c["tokens"] == sum(len(tokenizer.encode(t)) + 2 for t in TEXTS.values()) < c["bytes"]
    assert c["validation_tokens"] == sum(len(tokenizer.encode(TEXTS[n])) + 2 for n in corpus.heldout)
    assert f"{c['tokens']:,} {tokenizer.name} tokens" in corpus.describe(1.0)
    for prompt in corpus.sample_prompts(4, 40):
        assert any(prompt in TEXTS[n] for n in corpus.heldout) and len(prompt.encode()) <= 40


@pytest.mark.parametrize("tokenizer", TOKENIZERS, ids=lambda t: getattr(t, "name", "byte"))
@pytest.mark.parametrize("text", [STREAM, "é" * 20 + "return x + 1 " * 12])  # many lines; one line, cut inside it
def test_a_single_file_predicts_every_byte_once_under_any_tokenizer(tmp_path, tokenizer, text):
    (tmp_path / "input.txt").write_text(text)
    corpus = load_corpus(str(tmp_path / "input.txt"), 0.1, 16, tokenizer)
    train, held = corpus.train.tokens.tolist(), corpus.validation.tokens.tolist()
    assert train[0] == BOS_ID and held[-1] == EOS_ID and held[0] == train[-1]  # the stream runs on, one id read
    predicted = token_bytes(targets(corpus.train, 16) + targets(corpus.validation, 16), tokenizer)
    assert predicted == text.encode()
    assert corpus.summary["tokens"] == len(train) + len(held) - 1 == len(train) + corpus.summary["validation_tokens"]


def test_a_mixed_batch_is_one_vocabulary(tmp_path):
    rows = [{"text": t} for t in TEXTS.values()]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    corpus = load_corpus(str(tmp_path / "c.jsonl"), 0.1, 96, CODE)
    inputs, labels = pretraining_batch(2, 4, 96, seed=5, suite="broad", corpus=corpus, corpus_mix=0.5, tokenizer=CODE,
                                       corpus_in_buckets=False)  # the plain order (the buckets: test_corpus_buckets.py)
    corpus_rows, _ = corpus.training_batch(4, 2, seed=5)
    assert torch.equal(inputs[:2], corpus_rows)
    stream = get_suite("broad")
    generated, _ = encode_documents([stream.pretraining_text(i, 5) for i in (4, 5)], 96, CODE)
    assert torch.equal(inputs[2:], generated) and int(inputs.max()) >= 260  # byte-pair ids, not bytes
    assert not (labels == PAD_ID).any()
    with pytest.raises(ValueError, match="read the corpus with the model's tokenizer"):
        pretraining_batch(2, 4, 96, seed=5, suite="broad", corpus=corpus, corpus_mix=0.5)  # bytes asked for
    with pytest.raises(ValueError, match="corpus was tokenized with byte"):
        pretraining_batch(2, 4, 96, suite="broad", corpus=load_corpus(str(tmp_path / "c.jsonl"), 0.1, 96),
                          corpus_mix=0.5, tokenizer=CODE)


def test_documents_are_read_the_same_whatever_the_tokenizer(tmp_path):
    root = write_files(tmp_path / "c", TEXTS)
    documents, _, _ = read_documents(str(root))
    assert [d.data.decode() for d in documents] == [TEXTS[n] for n in sorted(TEXTS)]
    sha = {load_corpus(str(root), 0.2, 24, t).summary["sha256"] for t in TOKENIZERS}
    assert len(sha) == 1  # the sha256 names the files: a run resumes with the same files, its tokenizer checked apart


@pytest.mark.slow
def test_a_code_bpe_run_reads_its_corpus_with_its_tokenizer(tmp_path):
    from glm53 import ModelConfig
    from glm53.train.pretrain import pretrain

    from ..tiny import TINY
    from ..train.test_pretrain import losses, tiny_run

    root = write_files(tmp_path / "c", TEXTS)
    model = ModelConfig(**{**TINY, "layers": 2, "max_sequence_length": 384, "tokenizer": "code-bpe-2048",
                           "vocab_size": 2048})
    cfg = tiny_run(tmp_path / "run", steps=2, checkpoints=(2,), suite="broad", sequence_length=324, model=model,
                   batch_size=2, corpus=str(root), corpus_mix=0.5, validation_rows=4)
    receipt = pretrain(cfg, dev_tasks=[], log=lambda *_: None)
    assert receipt["corpus"] == load_corpus(str(root), 0.05, 324, CODE).summary
    assert receipt["corpus"]["tokenizer"] == "code-bpe-2048"
    assert losses(tmp_path / "run")[0] == pytest.approx(torch.log(torch.tensor(2048.0)).item(), rel=0.1)
