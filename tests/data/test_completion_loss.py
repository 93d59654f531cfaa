"""--loss-on completion: the targets kept are exactly each document's body and EOS, checked against a plain
reference that tokenizes the task's prompt and body apart; the inputs do not change; validation takes the same
targets; a corpus is refused; a short pretraining with it runs and records it."""

import json

import pytest
import torch

from glm53.data.pretrain_batches import (IGNORE_INDEX, bucketed_texts, completion_labels, pretraining_batch,
                                         prompt_bytes, validation_batch)
from glm53.data.suites import get_suite
from glm53.data.tokenizer import ByteTokenizer
from glm53.train.pretrain_config import PretrainConfig


def plain_body_targets(task) -> list[int]:
    """The reference: the body's bytes and EOS, tokenized from the task's own fields (a stream document is its
    prompt and canonical completion)."""
    ids = ByteTokenizer().encode(task.prompt + task.canonical_completion, bos=False, eos=True)
    return ids[len(task.prompt.encode()):]


@pytest.mark.parametrize("suite", ["broad", "reference"])
def test_kept_targets_are_the_body_and_eos(suite):
    stream = get_suite(suite)
    for step in (0, 3):
        inputs_all, labels_all = pretraining_batch(step, 8, 324, seed=7, suite=suite)
        inputs, labels = pretraining_batch(step, 8, 324, seed=7, suite=suite, loss_on="completion")
        assert torch.equal(inputs, inputs_all)
        texts = (bucketed_texts(stream, step, 8, 7) if stream.bucket_steps else
                 [stream.pretraining_text(step * 8 + r, 7) for r in range(8)])
        tasks = {stream.pretraining_text(i, 7): stream.pretraining_task(i, 7) for i in range(8 * 8 * (step + 1))}
        for row, text in enumerate(texts):
            kept = labels[row][labels[row] != IGNORE_INDEX].tolist()
            assert kept == plain_body_targets(tasks[text])
            tokenizer = ByteTokenizer()
            assert tokenizer.decode(kept[:-1]) == tasks[text].canonical_completion and kept[-1] == tokenizer.eos_id
            # the dropped targets are the prompt's, and the rest equal the whole-document labels
            assert (labels[row, :prompt_bytes(text)] == IGNORE_INDEX).all()
            assert torch.equal(labels[row, prompt_bytes(text):], labels_all[row, prompt_bytes(text):])


def test_validation_takes_the_training_targets():
    inputs_all, labels_all = validation_batch(4, 324, seed=3, suite="broad")
    inputs, labels = validation_batch(4, 324, seed=3, suite="broad", loss_on="completion")
    assert torch.equal(inputs, inputs_all)
    assert 0 < int((labels != IGNORE_INDEX).sum()) < int((labels_all != IGNORE_INDEX).sum())


def test_a_document_without_a_def_line_is_named():
    with pytest.raises(ValueError, match="no def line"):
        completion_labels(torch.zeros(1, 8, dtype=torch.long), ["just prose\n"])


def test_corpus_and_completion_are_refused(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match="--loss-on completion needs task-shaped documents"):
        PretrainConfig(out=str(tmp_path / "run"), corpus=str(tmp_path), loss_on="completion")
    with pytest.raises(ValueError, match="--loss-on"):
        PretrainConfig(out=str(tmp_path / "run"), loss_on="prompt")


@pytest.mark.slow
def test_a_short_pretraining_with_completion_loss(tmp_path):
    from glm53.cli import main

    out = tmp_path / "run"
    assert main(["pretrain", "--out", str(out), "--steps", "2", "--checkpoints", "2", "--batch-size", "2",
                 "--dim", "32", "--layers", "2", "--heads", "4", "--expert-hidden", "48", "--experts", "4",
                 "--sparse-window", "8", "--sparse-stride", "8", "--max-sequence-length", "128",
                 "--sequence-length", "128", "--loss-on", "completion", "--validation-rows", "4", "--device", "cpu",
                 "--no-progress", "--dev-max-new-tokens", "4"]) == 0
    receipt = json.loads((out / "training-receipt.json").read_text())
    assert receipt["run"]["loss_on"] == "completion"
    assert "bodies' targets" in receipt["validation"]["source"]
