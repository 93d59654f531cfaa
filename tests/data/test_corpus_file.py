"""A single .py/.txt file as a corpus (one document stream, its tail held out), a symlinked corpus folder read as
its target, and a corpus run's checkpoints completing held-out corpus text instead of the dev prompts."""

import json
import os

import pytest

from glm53.cli import main
from glm53.data.corpus import load_corpus, read_documents
from glm53.data.pretrain_batches import IGNORE_INDEX
from glm53.data.tokenizer import BOS_ID, BYTE_OFFSET, EOS_ID

TEXT = "".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(60))


def test_a_single_file_is_one_stream_whose_tail_is_held_out(tmp_path):
    (tmp_path / "input.txt").write_text(TEXT)
    corpus = load_corpus(str(tmp_path / "input.txt"), 0.1, 64)
    c = corpus.summary
    assert c["format"] == "file" and c["documents"] == 2 and c["validation_documents"] == 1
    train, held = corpus.train, corpus.validation
    assert int(train.tokens[0]) == BOS_ID and int(train.tokens[-1]) != EOS_ID  # the stream runs on
    assert int(held.tokens[0]) != BOS_ID and int(held.tokens[-1]) == EOS_ID
    targets = []
    for rows in (train, held):
        _, labels = rows.batch(range(len(rows)), 64)
        targets += [t - BYTE_OFFSET for t in labels[labels != IGNORE_INDEX].tolist() if t >= BYTE_OFFSET]
    assert bytes(targets) == TEXT.encode()  # every byte predicted once (the first after BOS)
    cut = len(TEXT.encode()) - (int(c["validation_bytes"]) - 1)
    assert TEXT.encode()[cut - 1:cut] == b"\n"  # the held-out part starts at a line
    assert corpus.sample_prompts(4, 16) and all(p.startswith("line ") for p in corpus.sample_prompts(4, 16)[:1])


def test_a_symlinked_folder_is_read_as_its_target(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "real" / "b.txt").write_text("hello\n")
    os.symlink(tmp_path / "real", tmp_path / "link")
    real, link = read_documents(str(tmp_path / "real")), read_documents(str(tmp_path / "link"))
    assert [d.data for d in link[0]] == [d.data for d in real[0]] and len(link[0]) == 2


def test_another_file_kind_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "notes.md").write_text("# notes\n")
    assert main(["pretrain", "--out", str(tmp_path / "out"), "--steps", "1", "--corpus",
                 str(tmp_path / "notes.md")]) == 2
    err = capsys.readouterr().err.strip()
    assert "nor a .py/.txt file" in err and len(err.splitlines()) == 1 and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_corpus_run_samples_held_out_text_beside_its_validation_loss(tmp_path, capsys):
    (tmp_path / "input.txt").write_text(TEXT)
    out = tmp_path / "run"
    assert main(["pretrain", "--out", str(out), "--corpus", str(tmp_path / "input.txt"), "--steps", "2",
                 "--checkpoints", "2", "--batch-size", "2", "--sequence-length", "64", "--dim", "32", "--layers",
                 "2", "--heads", "4", "--expert-hidden", "48", "--experts", "4", "--max-sequence-length", "128",
                 "--dev-max-new-tokens", "8", "--no-progress", "--device", "cpu", "--threads", "1"]) == 0
    printed = capsys.readouterr().out
    assert "held-out 'line " in printed and "dev greedy" not in printed
    last = json.loads((out / "training-receipt.json").read_text())["checkpoints"][-1]
    assert last["dev_completions"] == [] and "val_loss" in last
    assert last["corpus_samples"] and all(s["prompt"] in TEXT for s in last["corpus_samples"])
