import json

import pytest
import torch

from glm53.data.pretrain_batches import IGNORE_INDEX, pretraining_batch
from glm53.data.tasks import frozen_tasks
from glm53.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from glm53.checkpoints.format import load_model, read_metadata, verify_checkpoint
from glm53.runtime.cpu import cpu_description
from glm53.train.pretrain import pretrain
from glm53.train.pretrain_config import PretrainConfig

from ..tiny import TINY


def tiny_run(out, **kw):
    from glm53 import ModelConfig

    args = dict(out=str(out), steps=4, checkpoints=(2, 4), batch_size=3, sequence_length=128, lr=1e-3,
                progress=False, device="cpu", dev_max_new_tokens=6,
                model=ModelConfig(**{**TINY, "max_sequence_length": 160}))
    args.update(kw)
    return PretrainConfig(**args)


DEV = frozen_tasks("dev", 1, "increment,reverse")


def losses(out):
    return [json.loads(line)["loss"] for line in (out / "train_log.jsonl").read_text().splitlines()]


def test_batches_are_bos_text_eos_and_pad_is_never_a_target():
    inputs, labels = pretraining_batch(step=3, batch_size=4, sequence_length=128, seed=42)
    assert inputs.shape == labels.shape == (4, 128)
    assert torch.all(inputs[:, 0] == BOS_ID)
    assert not torch.any(labels == PAD_ID) and not torch.any(labels == BOS_ID)
    for row_in, row_lab in zip(inputs, labels):
        n = int((row_lab != IGNORE_INDEX).sum())
        assert row_lab[n - 1] == EOS_ID
        assert torch.equal(row_in[1:n], row_lab[: n - 1])
    again, _ = pretraining_batch(step=3, batch_size=4, sequence_length=128, seed=42)
    assert torch.equal(inputs, again)


@pytest.mark.slow
def test_run_writes_checkpoints_with_metadata_and_receipt(tmp_path):
    out = tmp_path / "run"
    receipt = pretrain(tiny_run(out), dev_tasks=DEV, log=lambda *_: None)
    assert [c["step"] for c in receipt["checkpoints"]] == [0, 2, 4]
    for c in receipt["checkpoints"]:
        path = out / c["path"]
        assert {p.name for p in path.iterdir()} == {"model.safetensors", "config.json", "metadata.json",
                                                    "trainer_state.pt"}
        meta = read_metadata(path)
        assert meta["step"] == c["step"] and meta["seed"] == 42
        assert verify_checkpoint(path) == c["weights_sha256"] == meta["weights_sha256"]
        assert [s["task_id"] for s in meta["dev_completions"]] == [t.task_id for t in DEV]
        assert all(s["status"] in ("passed", "failed", "invalid", "timeout", "memory", "crashed")
                   for s in meta["dev_completions"])
        passed = sum(s["status"] == "passed" for s in meta["dev_completions"])
        assert meta["dev_pass_at_1"] == passed / len(DEV) and c["dev_passed"] == passed
    assert len(losses(out)) == 4
    assert (out / "training-receipt.json").is_file()
    on_disk = json.loads((out / "training-receipt.json").read_text())
    assert on_disk["cpu"] == cpu_description() | {"threads": receipt["threads"]}  # the machine it ran on
    model = load_model(out / "checkpoint-0004").model
    assert model.parameter_counts() == receipt["parameter_counts"]
    assert not list(out.glob(".*.tmp")), "temporary files left behind"


@pytest.mark.slow
def test_existing_output_is_never_overwritten(tmp_path):
    out = tmp_path / "run"
    pretrain(tiny_run(out, steps=2, checkpoints=(2,)), dev_tasks=[], log=lambda *_: None)
    before = (out / "checkpoint-0002" / "model.safetensors").read_bytes()
    with pytest.raises(FileExistsError, match="never overwrites"):
        pretrain(tiny_run(out, steps=2, checkpoints=(2,)), dev_tasks=[], log=lambda *_: None)
    assert (out / "checkpoint-0002" / "model.safetensors").read_bytes() == before


@pytest.mark.slow
def test_resume_continues_exactly_where_the_run_stopped(tmp_path):
    whole, part = tmp_path / "whole", tmp_path / "part"
    pretrain(tiny_run(whole, steps=6, checkpoints=(3, 6)), dev_tasks=[], log=lambda *_: None)
    pretrain(tiny_run(part, steps=3, checkpoints=(3,)), dev_tasks=[], log=lambda *_: None)
    (part / "training-receipt.json").unlink()  # as if the run had been stopped right after checkpoint 3
    with open(part / "train_log.jsonl", "a") as f:  # and had logged a step past it before dying
        f.write(json.dumps({"step": 4, "loss": 123.0}) + "\n")
    pretrain(tiny_run(part, steps=6, checkpoints=(3, 6), resume=True), dev_tasks=[], log=lambda *_: None)
    assert losses(part) == losses(whole)
    assert (read_metadata(part / "checkpoint-0006")["weights_sha256"]
            == read_metadata(whole / "checkpoint-0006")["weights_sha256"])


@pytest.mark.slow
def test_resume_refuses_changed_settings(tmp_path):
    out = tmp_path / "run"
    pretrain(tiny_run(out, steps=2, checkpoints=(2,)), dev_tasks=[], log=lambda *_: None)
    (out / "training-receipt.json").unlink()
    with pytest.raises(ValueError, match="settings differ.*lr"):
        pretrain(tiny_run(out, steps=4, checkpoints=(2, 4), lr=5e-4, resume=True), dev_tasks=[], log=lambda *_: None)


@pytest.mark.slow
def test_same_seed_same_losses(tmp_path):
    pretrain(tiny_run(tmp_path / "a", steps=2, checkpoints=(2,)), dev_tasks=[], log=lambda *_: None)
    pretrain(tiny_run(tmp_path / "b", steps=2, checkpoints=(2,)), dev_tasks=[], log=lambda *_: None)
    assert losses(tmp_path / "a") == losses(tmp_path / "b")


def test_bad_settings_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="checkpoints"):
        tiny_run(tmp_path / "x", steps=4, checkpoints=(5,))
    with pytest.raises(ValueError, match="--sequence-length"):
        tiny_run(tmp_path / "x", sequence_length=500)


@pytest.mark.slow
def test_one_writer_per_run_folder_and_stale_temporaries_are_removed(tmp_path):
    from glm53.runtime.files import run_lock

    out = tmp_path / "run"
    with run_lock(out):
        with pytest.raises(FileExistsError, match="in use by another glm53 process"):
            pretrain(tiny_run(out), dev_tasks=[], log=lambda *_: None)
    stale = out / ".checkpoint-0002.x1y2.tmp"  # what Ctrl-C during a checkpoint write leaves
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"partial")
    pretrain(tiny_run(out), dev_tasks=[], log=lambda *_: None)
    assert not stale.exists() and (out / "training-receipt.json").is_file()
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_default_checkpoints_fit_short_runs():
    from glm53.train.rl_config import RLConfig

    assert PretrainConfig(out="x", steps=3).checkpoints == (3,)
    assert PretrainConfig(out="x", steps=250).checkpoints == (100, 200, 250)
    assert PretrainConfig(out="x").checkpoints == (100, 200, 400)
    assert RLConfig(init="a", out="b", groups=2).checkpoints == (2,)
    assert RLConfig(init="a", out="b").checkpoints == (24, 48, 72, 96)


def test_results_are_readable_like_other_files(tmp_path):
    import os

    from glm53.runtime.files import atomic_write_text

    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "receipt.json", "{}")
    finally:
        os.umask(old)
    assert (tmp_path / "receipt.json").stat().st_mode & 0o777 == 0o644


def released_run(out, **kw):
    from glm53 import ModelConfig

    model = ModelConfig(**{**TINY, "max_sequence_length": 160}, linear_attention="kda", sparse_selection="indexer",
                        position="none", indexer_top_k=4)
    return tiny_run(out, model=model, indexer_warmup_steps=2, **kw)


@pytest.mark.slow
def test_released_switches_train_and_resume_exactly_across_the_indexer_warmup(tmp_path):
    whole, part = tmp_path / "whole", tmp_path / "part"
    pretrain(released_run(whole, steps=6, checkpoints=(3, 6)), dev_tasks=[], log=lambda *_: None)
    pretrain(released_run(part, steps=3, checkpoints=(3,)), dev_tasks=[], log=lambda *_: None)
    (part / "training-receipt.json").unlink()
    pretrain(released_run(part, steps=6, checkpoints=(3, 6), resume=True), dev_tasks=[], log=lambda *_: None)
    assert losses(part) == losses(whole)
    rows = [json.loads(line) for line in (whole / "train_log.jsonl").read_text().splitlines()]
    assert all(r["indexer_loss"] > 0 for r in rows)
    assert (read_metadata(part / "checkpoint-0006")["weights_sha256"]
            == read_metadata(whole / "checkpoint-0006")["weights_sha256"])


@pytest.mark.slow
def test_resume_refuses_another_switch_and_names_it(tmp_path):
    import dataclasses

    out = tmp_path / "run"
    cfg = tiny_run(out, steps=2, checkpoints=(2,))
    pretrain(cfg, dev_tasks=[], log=lambda *_: None)
    (out / "training-receipt.json").unlink()
    nope = dataclasses.replace(cfg.model, position="none")
    with pytest.raises(ValueError, match="model.position"):
        pretrain(tiny_run(out, steps=4, checkpoints=(2, 4), model=nope, resume=True), dev_tasks=[], log=lambda *_: None)
    with pytest.raises(ValueError, match="--indexer-warmup-steps needs --sparse-selection indexer"):
        tiny_run(tmp_path / "x", indexer_warmup_steps=2)
