"""A run's documents in another order or from fewer distinct ones (data/run_order.py): the same token budget, the
order each setting promises, batches that read it, and a run that resumes exactly."""

import json
import shutil
from collections import Counter

import pytest
import torch

from glm53 import ModelConfig
from glm53.data.pretrain_batches import bucketed_texts, encode_documents, pretraining_batch
from glm53.data.run_order import OrderedStream, _ordered_stream, run_documents, run_stream, stream_positions
from glm53.data.suites import get_suite
from glm53.train.pretrain import pretrain
from glm53.train.pretrain_config import PretrainConfig

from ..tiny import TINY

BROAD = get_suite("broad")


def tasks_of(ordered: OrderedStream) -> list:
    return [BROAD.pretraining_task(i, ordered.seed) for i in ordered.positions]


def test_run_documents_reach_the_end_of_the_last_bucketing_window():
    assert run_documents(10, 4) == 40
    assert run_documents(10, 4, bucket_steps=8) == 64 and run_documents(16, 4, bucket_steps=8) == 64


def test_distinct_documents_cycle_over_the_first_k_each_pass_in_its_own_order():
    positions = stream_positions(250, 100, seed=3)
    assert len(positions) == 250 and set(positions) == set(range(100))
    passes = [positions[:100], positions[100:200]]
    assert all(sorted(p) == list(range(100)) for p in passes) and passes[0] != passes[1]
    assert positions == stream_positions(250, 100, seed=3) != stream_positions(250, 100, seed=4)
    assert stream_positions(7, 0, seed=3) == list(range(7))


def test_curriculum_reads_the_same_documents_by_depth():
    plain = OrderedStream(BROAD, 5, 256, "stream")
    ordered = OrderedStream(BROAD, 5, 256, "curriculum")
    depths = [t.depth for t in tasks_of(ordered)]
    assert depths == sorted(depths) and set(depths) == {1, 2, 3}
    assert sorted(ordered.positions) == plain.positions == list(range(256))
    for depth in (1, 2, 3):  # ties keep the stream's order
        same = [i for i, t in zip(ordered.positions, tasks_of(ordered)) if t.depth == depth]
        assert same == sorted(same)


def test_blocked_reads_the_same_documents_one_root_function_at_a_time():
    ordered = OrderedStream(BROAD, 5, 256, "blocked")
    roots = [t.root for t in tasks_of(ordered)]
    changes = sum(a != b for a, b in zip(roots, roots[1:]))
    assert changes == len(set(roots)) - 1  # each root function in one contiguous block
    assert sorted(ordered.positions) == list(range(256))
    assert Counter(roots) == Counter(BROAD.pretraining_task(i, 5).root for i in range(256))


def test_a_blocked_batch_holds_one_root_function_where_its_window_allows():
    ordered = OrderedStream(BROAD, 5, run_documents(64, 16, BROAD.bucket_steps), "blocked")
    roots = [t.root for t in tasks_of(ordered)]
    for window in range(8):
        first = window * 8 * 16
        in_window = roots[first:first + 128]
        boundaries = sum(a != b for a, b in zip(in_window, in_window[1:]))
        mixed = 0
        for step in range(window * 8, window * 8 + 8):
            texts = bucketed_texts(ordered, step, 16, 5)
            batch_roots = {roots[first + i] for i in range(128) if ordered.pretraining_text(first + i, 5) in texts}
            mixed += len(batch_roots) > 1
        assert mixed <= boundaries  # only a batch cut across a group boundary mixes two groups


def test_batches_read_the_ordered_documents_with_the_same_bucketing():
    ordered = OrderedStream(BROAD, 5, run_documents(16, 4, BROAD.bucket_steps), "curriculum", distinct=20)
    texts = [ordered.pretraining_text(i, 5) for i in range(len(ordered.positions))]
    assert len(set(texts)) == 20
    for step in (0, 3, 9):
        inputs, labels = pretraining_batch(step, 4, 324, seed=5, suite="broad", ordered=ordered)

        class Plain:  # the plain reference: the list of texts, bucketed as the stream would be
            bucket_steps = BROAD.bucket_steps

            def pretraining_text(self, index, seed):
                return texts[index]

            def group(self, index):
                return ordered.group(index)

        want = bucketed_texts(Plain(), step, 4, 5)
        want_inputs, _ = encode_documents(want, 324)
        assert torch.equal(inputs, want_inputs[:, :inputs.shape[1]])
    with pytest.raises(ValueError, match="seed 5"):
        ordered.pretraining_text(0, 6)
    with pytest.raises(IndexError, match="outside the run"):
        ordered.pretraining_text(len(texts), 5)


def test_the_reference_order_is_untouched(tmp_path):
    cfg = PretrainConfig(out=str(tmp_path / "r"), steps=3)
    assert run_stream(cfg) is None  # pretraining_batch reads the stream itself, as before these settings


def test_bad_pairs_are_refused_in_one_line(tmp_path):
    with pytest.raises(ValueError, match="curriculum sorts by a task's depth"):
        PretrainConfig(out=str(tmp_path / "r"), data_order="curriculum")
    (tmp_path / "a.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match="with --corpus leave them"):
        PretrainConfig(out=str(tmp_path / "r"), corpus=str(tmp_path), distinct_documents=8)
    with pytest.raises(ValueError, match="--distinct-documents"):
        PretrainConfig(out=str(tmp_path / "r"), distinct_documents=-1)
    with pytest.raises(ValueError, match="--distinct-documents 12 must be fewer than the 12 documents"):
        PretrainConfig(out=str(tmp_path / "r"), steps=4, batch_size=3, distinct_documents=12)
    with pytest.raises(ValueError, match="--data-order"):
        PretrainConfig(out=str(tmp_path / "r"), data_order="random")


def _broad_run(out, **kw):
    args = dict(out=str(out), steps=8, checkpoints=(4, 8), batch_size=2, sequence_length=324, lr=1e-3, suite="broad",
                progress=False, device="cpu", dev_max_new_tokens=4, validation_rows=2, loss_on="completion",
                data_order="curriculum", distinct_documents=6,
                model=ModelConfig(**{**TINY, "max_sequence_length": 384}))
    return PretrainConfig(**{**args, **kw})


def losses(out):
    return [json.loads(line)["loss"] for line in (out / "train_log.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_an_ordered_run_records_its_order_and_resumes_exactly(tmp_path):
    whole, part = tmp_path / "whole", tmp_path / "part"
    pretrain(_broad_run(whole), dev_tasks=[], log=lambda *_: None)
    assert json.loads((whole / "run.json").read_text())["data_order"] == "curriculum"
    pretrain(_broad_run(part), dev_tasks=[], log=lambda *_: None)
    _ordered_stream.cache_clear()  # the resumed run makes its documents again, as a new process would
    (part / "training-receipt.json").unlink()
    shutil.rmtree(part / "checkpoint-0008")  # as if the run had stopped after checkpoint 4
    pretrain(_broad_run(part, resume=True), dev_tasks=[], log=lambda *_: None)
    assert losses(part) == losses(whole)
    (part / "training-receipt.json").unlink()
    with pytest.raises(ValueError, match="curriculum data order spans the run"):
        pretrain(_broad_run(part, steps=16, checkpoints=(4, 8, 16), resume=True), dev_tasks=[], log=lambda *_: None)


@pytest.mark.slow
def test_training_reads_the_ordered_documents(tmp_path, monkeypatch):
    """A curriculum run's first step trains on depth-1 documents, so its loss differs from a stream run's, and
    every batch it asks for comes from its ordered stream."""
    import glm53.train.pretrain as pretrain_module

    asked = []
    plain_batch = pretrain_module.pretraining_batch

    def spy(*args, **kwargs):
        asked.append(args[-1] if len(args) >= 9 else kwargs.get("ordered"))
        return plain_batch(*args, **kwargs)

    monkeypatch.setattr(pretrain_module, "pretraining_batch", spy)
    pretrain(_broad_run(tmp_path / "c", steps=2, checkpoints=(2,), distinct_documents=0), dev_tasks=[],
             log=lambda *_: None)
    assert len(asked) == 2 and all(isinstance(o, OrderedStream) and o.data_order == "curriculum" for o in asked)
    pretrain(_broad_run(tmp_path / "s", steps=2, checkpoints=(2,), distinct_documents=0, data_order="stream"),
             dev_tasks=[], log=lambda *_: None)
    assert asked[2:] == [None, None]
    assert losses(tmp_path / "c")[0] != losses(tmp_path / "s")[0]


def test_a_resumed_run_keeps_its_steps_where_the_total_shapes_each_step(tmp_path):
    PretrainConfig(out=str(tmp_path / "r"), steps=8).check_resumed_steps(4)  # a constant lr, the stream: longer is fine
    with pytest.raises(ValueError, match="cosine schedule depends on the total"):
        PretrainConfig(out=str(tmp_path / "r"), steps=8, lr_schedule="cosine").check_resumed_steps(4)
    with pytest.raises(ValueError, match="resume with --steps 4"):
        PretrainConfig(out=str(tmp_path / "r"), steps=8, data_order="blocked").check_resumed_steps(4)
    PretrainConfig(out=str(tmp_path / "r"), steps=8, data_order="blocked").check_resumed_steps(8)
