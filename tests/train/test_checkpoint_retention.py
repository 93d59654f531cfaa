"""Lean checkpoints: --keep-last N prunes older checkpoints to their metadata, --no-save-optimizer writes no
trainer state (and refuses --resume), resume stays exact, and the main job keeps what its report and resume need."""

import json

import pytest

from glm53 import ModelConfig
from glm53.checkpoints.format import load_model, read_metadata
from glm53.train.pretrain import pretrain
from glm53.train.pretrain_config import PretrainConfig
from glm53.checkpoints.retention import prune_checkpoints

from ..tiny import TINY

SMALL = ModelConfig(**{**TINY, "max_sequence_length": 160})
WHOLE = {"config.json", "metadata.json", "model.safetensors", "trainer_state.pt"}
METADATA_ONLY = {"config.json", "metadata.json"}


def tiny_pretrain(out, **kw):
    args = dict(out=str(out), steps=4, checkpoints=(1, 2, 3, 4), batch_size=2, sequence_length=128, lr=1e-3,
                progress=False, device="cpu", model=SMALL)
    return PretrainConfig(**{**args, **kw})


def files(folder):
    return {p.name for p in folder.iterdir()}


def test_prune_keeps_the_newest_whole_spares_named_weights_and_every_metadata(tmp_path):
    for step in (0, 5, 10, 10000):  # checkpoint-10000 is the newest, though it sorts first by name
        folder = tmp_path / f"checkpoint-{step:04d}"
        folder.mkdir()
        for name in WHOLE:
            (folder / name).write_text("x")
    (tmp_path / "checkpoint-0020").mkdir()  # no metadata.json: not a checkpoint anyone recorded, left alone
    (tmp_path / "checkpoint-0020" / "model.safetensors").write_text("x")
    assert prune_checkpoints(tmp_path, 1, {"checkpoint-0005"}) == ["checkpoint-0000", "checkpoint-0005",
                                                                     "checkpoint-0010"]
    assert files(tmp_path / "checkpoint-10000") == WHOLE
    assert files(tmp_path / "checkpoint-0005") == METADATA_ONLY | {"model.safetensors"}
    assert files(tmp_path / "checkpoint-0000") == files(tmp_path / "checkpoint-0010") == METADATA_ONLY
    assert files(tmp_path / "checkpoint-0020") == {"model.safetensors"}
    assert prune_checkpoints(tmp_path, 1, {"checkpoint-0005"}) == []  # nothing left to prune


@pytest.mark.slow
def test_keep_last_keeps_the_newest_n_whole_and_every_metadata(tmp_path):
    out = tmp_path / "run"
    receipt = pretrain(tiny_pretrain(out, keep_last=2), dev_tasks=[], log=lambda *_: None)
    names = [c["path"] for c in receipt["checkpoints"]]
    assert names == ["checkpoint-0000", "checkpoint-0001", "checkpoint-0002", "checkpoint-0003", "checkpoint-0004"]
    assert [files(out / n) for n in names] == [METADATA_ONLY] * 3 + [WHOLE] * 2
    assert receipt["retention"] == {"pruned": names[:3], "weights_only": []}
    for c in receipt["checkpoints"]:  # the metadata still records every checkpoint's weights
        assert read_metadata(out / c["path"])["weights_sha256"] == c["weights_sha256"]
    with pytest.raises(FileNotFoundError, match="holds only the metadata.*--keep-last"):
        load_model(out / "checkpoint-0001")
    with pytest.raises(ValueError, match="--keep-last must be >= 0"):
        tiny_pretrain(tmp_path / "bad", keep_last=-1)


@pytest.mark.slow
def test_no_save_optimizer_writes_no_trainer_state_and_refuses_resume(tmp_path):
    out = tmp_path / "run"
    receipt = pretrain(tiny_pretrain(out, steps=2, checkpoints=(2,), save_optimizer=False), dev_tasks=[],
                       log=lambda *_: None)
    assert [files(out / c["path"]) for c in receipt["checkpoints"]] == [METADATA_ONLY | {"model.safetensors"}] * 2
    assert receipt["retention"]["weights_only"] == ["checkpoint-0000", "checkpoint-0002"]
    with pytest.raises(ValueError, match="--resume needs the optimizer state"):
        tiny_pretrain(out, steps=4, save_optimizer=False, resume=True)
    (out / "training-receipt.json").unlink()  # as if stopped: resuming with the optimizer asked for is refused too
    with pytest.raises(ValueError, match="started with --no-save-optimizer"):
        pretrain(tiny_pretrain(out, steps=4, resume=True), dev_tasks=[], log=lambda *_: None)


@pytest.mark.slow
def test_resume_with_keep_last_continues_exactly(tmp_path, monkeypatch):
    import glm53.train.pretrain as module

    whole, part = tmp_path / "whole", tmp_path / "part"
    pretrain(tiny_pretrain(whole), dev_tasks=[], log=lambda *_: None)
    real, calls = module.train_step, []

    def stop_at_the_third_step(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:  # checkpoints 0-2 written, 0 and 1 pruned
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(module, "train_step", stop_at_the_third_step)
        with pytest.raises(KeyboardInterrupt):
            pretrain(tiny_pretrain(part, keep_last=1), dev_tasks=[], log=lambda *_: None)
    assert files(part / "checkpoint-0001") == METADATA_ONLY and files(part / "checkpoint-0002") == WHOLE
    # resumed with another --keep-last: it decides what stays on disk, not what is computed
    receipt = pretrain(tiny_pretrain(part, keep_last=2, resume=True), dev_tasks=[], log=lambda *_: None)
    assert receipt["resumed_from"]["path"] == "checkpoint-0002"
    assert read_metadata(part / "checkpoint-0004")["weights_sha256"] == \
        read_metadata(whole / "checkpoint-0004")["weights_sha256"]
    loss = lambda out: [json.loads(r)["loss"] for r in (out / "train_log.jsonl").read_text().splitlines()]  # noqa: E731
    assert loss(part) == loss(whole)
    assert receipt["retention"]["pruned"] == ["checkpoint-0000", "checkpoint-0001", "checkpoint-0002"]


# the tiny main job of tests/test_run.py, RL starting from step 1 of 3 so that --pretrain.keep-last 1 must spare it
RUN = {"pretrain": dict(steps=3, checkpoints=(1, 3), batch_size=2, warmup_steps=1, seed=5, model=SMALL),
       "rl_start": 1, "confirm_per_family": 1,
       "rl": dict(groups=2, group_size=2, tasks_per_family=1, checkpoints=(1, 2), groups_per_step=1, dev_per_family=1,
                  dev_samples=2, max_new_tokens=6)}


def tiny_job(out, keep_last=0, **kw):
    from glm53.run import RunConfig

    spec = {**RUN, "pretrain": {**RUN["pretrain"], "keep_last": keep_last}, "rl": {**RUN["rl"], "keep_last": keep_last}}
    return RunConfig.from_preset(str(out), "quick", device="cpu", progress=False, **spec, **kw)


def finished(out):
    from ..test_run import _strip_timings

    receipt = json.loads((out / "run-receipt.json").read_text())
    evals = [_strip_timings(json.loads((out / "eval" / f"{name}.json").read_text()))
             for name in ("before-confirm", "after-confirm", "comparison")]
    hashes = sorted((p.parent.relative_to(out).as_posix(), json.loads(p.read_text())["weights_sha256"])
                    for p in out.glob("*/checkpoint-*/metadata.json"))
    rollouts = json.loads((out / "rl" / "training-receipt.json").read_text())["rollouts"]
    return receipt["checkpoint_sha256"], receipt["confirm"], receipt["selected_rl_checkpoint"], evals, hashes, rollouts


@pytest.mark.slow
def test_the_main_job_keeps_what_its_report_and_resume_need(tmp_path, monkeypatch):
    import glm53.train.rl
    from glm53.run import run_pipeline

    from ..test_run import _interrupt_on_call

    quiet = lambda *_: None  # noqa: E731
    whole, part = tmp_path / "whole", tmp_path / "part"
    kept = run_pipeline(tiny_job(whole, keep_checkpoints="all"), log=quiet)
    assert all(files(f) == WHOLE for f in whole.glob("*/checkpoint-*")) and len(list(whole.glob("*/checkpoint-*"))) == 6
    assert kept["retention"] == {"keep_checkpoints": "all", "pretrain": {"pruned": [], "weights_only": []},
                                 "rl": {"pruned": [], "weights_only": []}}
    with monkeypatch.context() as patch:  # stopped during RL, after its checkpoint 1, both stages with --keep-last 1
        _interrupt_on_call(glm53.train.rl, "sample_and_verify", 2, patch)
        with pytest.raises(KeyboardInterrupt):
            run_pipeline(tiny_job(part, keep_last=1), log=quiet)
    # pretraining finished: the RL start alone keeps its weights; RL stopped: its newest checkpoint is whole
    assert [files(part / "pretrain" / f"checkpoint-000{s}") for s in (0, 1, 3)] == \
        [METADATA_ONLY, METADATA_ONLY | {"model.safetensors"}, METADATA_ONLY]
    assert [files(part / "rl" / f"checkpoint-000{g}") for g in (0, 1)] == [METADATA_ONLY, WHOLE]
    run_pipeline(tiny_job(part, keep_last=1, resume=True), log=quiet)
    assert finished(part) == finished(whole)
    receipt = json.loads((part / "run-receipt.json").read_text())
    best = receipt["selected_rl_checkpoint"]
    assert receipt["retention"] == {
        "keep_checkpoints": "needed", "pretrain": {"pruned": ["checkpoint-0000", "checkpoint-0003"],
                                                   "weights_only": ["checkpoint-0001"]},
        "rl": {"pruned": sorted({"checkpoint-0000", "checkpoint-0001", "checkpoint-0002"} - {best}),
               "weights_only": [best]}}
    assert "McNemar" in (part / "REPORT.md").read_text()
    assert load_model(part / "final").weights_sha256 == receipt["final"]["weights_sha256"]
    assert load_model(part / "rl" / best).weights_sha256 == receipt["checkpoint_sha256"]["after"]
    with pytest.raises(FileExistsError, match="already finished"):
        run_pipeline(tiny_job(part, keep_last=1, resume=True), log=quiet)
