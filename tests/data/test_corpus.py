"""`--corpus`: reading, skipping, tokenizing, cutting into rows, holding out by document, the order of rows, and
the one-line refusals of bad input."""

import json

import pytest
import torch

from glm53.cli import main
from glm53.data.corpus import load_corpus, read_documents
from glm53.data.pretrain_batches import IGNORE_INDEX, encode_documents, pretraining_batch, validation_batch
from glm53.data.suites import get_suite
from glm53.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, ByteTokenizer
from glm53.train.pretrain_config import PretrainConfig


def write_files(root, files: dict):
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return root


def targets_by_row(labels):
    return [[int(t) for t in row if t != IGNORE_INDEX] for row in labels]


def test_a_long_document_is_split_into_rows_that_predict_each_byte_once(tmp_path):
    text = "".join(f"line {i}: é\n" for i in range(40))  # 480+ bytes, some of them multi-byte
    root = write_files(tmp_path / "c", {"long.py": text, "short.txt": "x = 1\n"})
    corpus = load_corpus(str(root), 0.05, 16)
    rows = corpus.train if "long.py" not in corpus.heldout else corpus.validation
    inputs, labels = rows.batch(range(len(rows)), 16)
    assert inputs.shape == labels.shape == (len(rows), 16)
    ids = ByteTokenizer().encode(text, bos=True, eos=True)
    assert len(rows) == -(-(len(ids) - 1) // 16)  # ceil: every id after BOS is a target once
    assert sum(targets_by_row(labels), []) == ids[1:]
    assert inputs[0, 0] == BOS_ID and (inputs[1:, 0] != BOS_ID).all()  # a continuation row starts mid-document
    for r in range(len(rows) - 1):  # a row's last target is the next row's first input
        assert labels[r, -1] == inputs[r + 1, 0]
    last = labels[-1][labels[-1] != IGNORE_INDEX]
    # as in encode_documents: EOS is the last target, and also an input whose label is PAD (ignored)
    assert last[-1] == EOS_ID and inputs[-1][len(last)] == EOS_ID and (inputs[-1][len(last) + 1:] == PAD_ID).all()


def test_rows_follow_the_generated_streams_label_conventions(tmp_path):
    """A short document's row equals encode_documents' row for the same text: BOS + bytes + EOS, right-padded,
    PAD never a target, nothing of another document in the row."""
    texts = {"a.py": "def f(x):\n    return x\n", "b.py": "def g(y):\n    return -y\n", "c.txt": "hello\n"}
    corpus = load_corpus(str(write_files(tmp_path / "c", texts)), 0.05, 64)
    assert len(corpus.train) + len(corpus.validation) == 3  # one row each: no packing of documents together
    got = torch.cat([corpus.train.batch(range(len(corpus.train)), 64)[0],
                     corpus.validation.batch(range(len(corpus.validation)), 64)[0]])
    want, want_labels = encode_documents(list(texts.values()), 64)
    assert sorted(map(tuple, got.tolist())) == sorted(map(tuple, want.tolist()))
    _, labels = corpus.train.batch(range(len(corpus.train)), 64)
    assert not (labels == PAD_ID).any() and not (labels == BOS_ID).any()
    assert all((row == BOS_ID).sum() == 1 for row in got)


def test_held_out_by_document_and_stable_when_files_are_added(tmp_path):
    files = {f"pkg/m{i:03d}.py": f"x = {i}\n" * (1 + i % 5) for i in range(300)}
    small = load_corpus(str(write_files(tmp_path / "small", dict(list(files.items())[:150]))), 0.2, 32)
    big = load_corpus(str(write_files(tmp_path / "big", files)), 0.2, 32)
    assert small.heldout == {n for n in big.heldout if n in dict(list(files.items())[:150])}
    assert 0.1 < len(big.heldout) / 300 < 0.3  # about the share: a hash per document, not a count
    assert big.summary["validation_documents"] == len(big.heldout)
    # each document's first row (the one with BOS) names it here: the held-out ones are in no training row
    held = {tuple(r) for r in big.validation.batch(range(len(big.validation)), 32)[0].tolist() if r[0] == BOS_ID}
    train = {tuple(r) for r in big.train.batch(range(len(big.train)), 32)[0].tolist() if r[0] == BOS_ID}
    assert len(held) == len(big.heldout) and len(train) == 300 - len(held) and not held & train
    assert load_corpus(str(tmp_path / "big"), 0.2, 32).heldout == big.heldout  # the same every run, any seed


def test_a_small_corpus_still_holds_one_document_out(tmp_path):
    corpus = load_corpus(str(write_files(tmp_path / "c", {"a.py": "a = 1\n", "b.py": "b = 2\n"})), 0.01, 16)
    assert len(corpus.heldout) == 1 and len(corpus.train) == 1


def test_binary_non_utf8_and_empty_files_are_skipped_and_counted(tmp_path):
    root = write_files(tmp_path / "c", {"ok.py": "print(1)\n", "sub/ok.txt": "text\n", "bin.py": b"ab\x00cd",
                                        "latin.txt": "café\n".encode("latin-1"), "empty.py": b"",
                                        "notes.md": "ignored: not .py/.txt\n", "x.pyc": b"\x00\x01"})
    documents, skipped, kind = read_documents(str(root))
    assert kind == "folder" and [d.name for d in documents] == ["ok.py", "sub/ok.txt"]
    assert skipped == {"binary": 1, "not_utf8": 1, "empty": 1}
    summary = load_corpus(str(root), 0.05, 16).summary
    assert summary["skipped"] == 3 and summary["documents"] == 2 and summary["bytes"] == len("print(1)\ntext\n")


def test_json_lines_rows_are_documents_and_identical_rows_land_together(tmp_path):
    rows = [{"text": f"def f{i}(x):\n    return x + {i}\n"} for i in range(60)] + [{"text": "same\n"}] * 5
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n" + json.dumps({"text": ""}) + "\n")
    corpus = load_corpus(str(path), 0.3, 32)
    assert corpus.summary["format"] == "jsonl" and corpus.summary["documents"] == 65
    assert corpus.summary["skipped_by_reason"]["empty"] == 1
    same = {f"line {n}" for n in range(61, 66)}
    assert same <= corpus.heldout or not same & corpus.heldout


def test_the_sha256_covers_paths_and_contents(tmp_path):
    a = load_corpus(str(write_files(tmp_path / "a", {"x.py": "1\n", "y.py": "2\n"})), 0.05, 16).summary["sha256"]
    renamed = load_corpus(str(write_files(tmp_path / "b", {"x.py": "1\n", "z.py": "2\n"})), 0.05, 16).summary["sha256"]
    edited = load_corpus(str(write_files(tmp_path / "c", {"x.py": "1\n", "y.py": "3\n"})), 0.05, 16).summary["sha256"]
    again = load_corpus(str(write_files(tmp_path / "d", {"x.py": "1\n", "y.py": "2\n"})), 0.05, 16).summary["sha256"]
    assert a == again and len({a, renamed, edited}) == 3


def corpus_of(tmp_path, n=40):
    return load_corpus(str(write_files(tmp_path / "c", {f"m{i:02d}.py": f"v{i} = {i}\n" * (3 + i % 7)
                                                        for i in range(n)})), 0.1, 24)


def test_the_order_is_a_pure_function_of_seed_and_step_and_covers_an_epoch(tmp_path):
    corpus = corpus_of(tmp_path)
    n = len(corpus.train)
    one = [pretraining_batch(s, 4, 24, seed=7, corpus=corpus)[0] for s in range(3)]
    again = [pretraining_batch(s, 4, 24, seed=7, corpus=corpus)[0] for s in reversed(range(3))][::-1]
    assert all(torch.equal(a, b) for a, b in zip(one, again))  # no iterator: any step, in any order
    assert not torch.equal(one[0], pretraining_batch(0, 4, 24, seed=8, corpus=corpus)[0])
    epoch, _ = corpus.training_batch(0, n, seed=7)
    everything, _ = corpus.train.batch(range(n), 24)
    assert sorted(map(tuple, epoch.tolist())) == sorted(map(tuple, everything.tolist()))


def test_corpus_mix_takes_its_share_and_continues_the_generated_stream(tmp_path):
    corpus = load_corpus(str(corpus_of(tmp_path).summary["path"]), 0.1, 128)  # rows as long as the stream needs
    stream = get_suite("reference")
    inputs, labels = pretraining_batch(1, 4, 128, seed=3, corpus=corpus, corpus_mix=0.5)
    corpus_rows, _ = corpus.training_batch(2, 2, seed=3)  # rows 4..7 of the run: corpus rows 2, 3
    assert torch.equal(inputs[:2], corpus_rows)
    generated, _ = encode_documents([stream.pretraining_text(i, 3) for i in (2, 3)], 128)
    assert torch.equal(inputs[2:], generated)  # generated documents 2, 3: step 0 read 0 and 1
    none, _ = pretraining_batch(1, 4, 128, seed=3, corpus=corpus, corpus_mix=0.0)
    assert torch.equal(none, pretraining_batch(1, 4, 128, seed=3)[0])


def test_generated_validation_rows_lie_beyond_the_training_stream():
    inputs, labels = validation_batch(4, 128, seed=42)
    train = pretraining_batch(0, 4, 128, seed=42)[0]
    assert inputs.shape == (4, 128) and not torch.equal(inputs, train)
    assert torch.equal(inputs, validation_batch(4, 128, seed=42)[0])


@pytest.mark.parametrize("setup, flags, message", [
    (None, ["--corpus", "{root}/nope"], "--corpus {root}/nope does not exist"),
    ({}, ["--corpus", "{root}/c"], "holds no usable document"),
    ({"b.py": b"\x00\x00"}, ["--corpus", "{root}/c"], "holds no usable document (1 skipped: binary 1"),
    ("{\"text\": \"ok\"}\nnot json\n", ["--corpus", "{root}/c.jsonl"], "line 2 is not JSON"),
    ("{\"text\": \"ok\"}\n\n{\"body\": \"x\"}\n", ["--corpus", "{root}/c.jsonl"], "line 3 has no \"text\" string"),
    ({"a.py": "a\n"}, ["--corpus", "{root}/c", "--corpus-validation-share", "1"],
     "--corpus-validation-share must be < 1"),
    ({"a.py": "a\n"}, ["--corpus", "{root}/c", "--corpus-validation-share", "0"],
     "--corpus-validation-share must be > 0"),
    ({"a.py": "a\n"}, ["--corpus", "{root}/c", "--corpus-mix", "1.5"], "--corpus-mix must be <= 1"),
    ({"a.py": "a\n"}, ["--corpus-mix", "0.5"], "--corpus-mix needs --corpus"),
])
def test_bad_corpus_input_is_one_line_and_writes_nothing(tmp_path, capsys, setup, flags, message):
    if isinstance(setup, dict):
        write_files(tmp_path / "c", setup)
        (tmp_path / "c").mkdir(exist_ok=True)
    elif isinstance(setup, str):
        (tmp_path / "c.jsonl").write_text(setup)
    out = tmp_path / "out"
    argv = ["pretrain", "--out", str(out), "--steps", "1", "--dim", "32", "--layers", "2", "--heads", "4",
            "--expert-hidden", "48", "--experts", "4"] + [f.format(root=tmp_path) for f in flags]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message.format(root=tmp_path) in err and len(err.splitlines()) == 1, err
    assert not out.exists()


def test_config_resolves_the_mix_only_with_a_corpus(tmp_path):
    (tmp_path / "c").mkdir()
    assert PretrainConfig(out="x").corpus_mix is None
    assert PretrainConfig(out="x", corpus=str(tmp_path / "c")).corpus_mix == 1.0
    assert PretrainConfig(out="x", corpus=str(tmp_path / "c"), corpus_mix=0.25).corpus_mix == 0.25
