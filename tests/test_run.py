"""The end-to-end pipeline on a tiny model: two runs with the same seed give the same results."""

import json

import pytest

from glm53 import GLM53, ModelConfig
from glm53.run import RunConfig, run_pipeline

from .tiny import TINY

OVERRIDES = {"pretrain": dict(steps=3, checkpoints=(3,), batch_size=2, warmup_steps=1), "rl_start": 3,
             "rl": dict(groups=2, group_size=2, tasks_per_family=1, checkpoints=(2,), dev_per_family=1, dev_samples=2,
                        max_new_tokens=6),
             "confirm_per_family": 1}


def _run(out):
    model = ModelConfig(**{**TINY, "max_sequence_length": 160})
    overrides = {**OVERRIDES, "pretrain": {**OVERRIDES["pretrain"], "seed": 5, "model": model}}
    cfg = RunConfig.from_preset(str(out), "quick", device="cpu", progress=False, **overrides)
    return run_pipeline(cfg, log=lambda *_: None)


def _strip_timings(obj):
    if isinstance(obj, dict):
        return {k: _strip_timings(v) for k, v in obj.items()
                if k not in ("seconds", "elapsed_seconds", "peak_memory_bytes", "runs_seconds", "checkpoint")}
    if isinstance(obj, list):
        return [_strip_timings(v) for v in obj]
    return obj


@pytest.mark.slow
def test_same_seed_same_run(tmp_path):
    a, b = _run(tmp_path / "a"), _run(tmp_path / "b")
    assert a["checkpoint_sha256"]["after"] == b["checkpoint_sha256"]["after"]
    assert a["confirm"] == b["confirm"]
    for name in ("before-confirm.json", "after-confirm.json"):
        ra = json.loads((tmp_path / "a" / "eval" / name).read_text())
        rb = json.loads((tmp_path / "b" / "eval" / name).read_text())
        assert _strip_timings(ra) == _strip_timings(rb)
    rla = json.loads((tmp_path / "a" / "rl" / "training-receipt.json").read_text())
    rlb = json.loads((tmp_path / "b" / "rl" / "training-receipt.json").read_text())
    assert rla["rollouts"] == rlb["rollouts"] and rla["schedule_sha256"] == rlb["schedule_sha256"]
    report = (tmp_path / "a" / "REPORT.md").read_text()
    assert "McNemar" in report and "charts/before_after_by_family.png" in report
    assert len(a["charts"]) == 4 and all((tmp_path / "a" / c).is_file() for c in a["charts"])
    # the chosen model in the save_pretrained format, and the suite in the receipt
    assert a["final"]["weights_sha256"] == a["checkpoint_sha256"]["after"] and (a["suite"], a["language"]) == (
        "reference", "reference")
    assert GLM53.from_pretrained(tmp_path / "a" / "final").config.max_sequence_length == 160


RESUMABLE = {"pretrain": dict(steps=3, checkpoints=(1, 3), batch_size=2, warmup_steps=1), "rl_start": 3,
             "rl": dict(groups=2, group_size=2, tasks_per_family=1, checkpoints=(1, 2), groups_per_step=1,
                        dev_per_family=1, dev_samples=2, max_new_tokens=6), "confirm_per_family": 1}


def _resumable(out, resume=False):
    model = ModelConfig(**{**TINY, "max_sequence_length": 160})
    overrides = {**RESUMABLE, "pretrain": {**RESUMABLE["pretrain"], "seed": 5, "model": model}}
    return RunConfig.from_preset(str(out), "quick", device="cpu", progress=False, resume=resume, **overrides)


def _interrupt_on_call(module, name, call, monkeypatch):
    real, calls = getattr(module, name), []

    def wrapper(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)


def _finished_state(out):
    receipt = json.loads((out / "run-receipt.json").read_text())
    evals = {name: _strip_timings(json.loads((out / "eval" / name).read_text()))
             for name in ("before-confirm.json", "after-confirm.json", "comparison.json")}
    hashes = sorted((p.parent.relative_to(out).as_posix(), json.loads(p.read_text())["weights_sha256"])
                    for p in out.glob("*/checkpoint-*/metadata.json"))
    rollouts = json.loads((out / "rl" / "training-receipt.json").read_text())["rollouts"]
    return receipt["checkpoint_sha256"], receipt["confirm"], evals, hashes, rollouts


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["pretraining", "rl", "evaluation"])
def test_run_resume_after_an_interruption_ends_as_an_uninterrupted_run(tmp_path, monkeypatch, stage):
    import glm53.train.pretrain
    import glm53.train.rl
    import glm53.run

    whole = tmp_path / "whole"
    run_pipeline(_resumable(whole), log=lambda *_: None)
    target = {"pretraining": (glm53.train.pretrain, "train_step", 3), "rl": (glm53.train.rl, "sample_and_verify", 2),
              "evaluation": (glm53.run, "evaluate", 2)}[stage]
    part = tmp_path / "part"
    with monkeypatch.context() as patch:
        _interrupt_on_call(*target, patch)
        with pytest.raises(KeyboardInterrupt):
            run_pipeline(_resumable(part), log=lambda *_: None)
    assert not (part / "run-receipt.json").exists()
    with pytest.raises(FileExistsError, match="--resume"):
        run_pipeline(_resumable(part), log=lambda *_: None)
    run_pipeline(_resumable(part, resume=True), log=lambda *_: None)
    assert _finished_state(part) == _finished_state(whole)
    if stage != "evaluation":  # the stage went on from its checkpoint rather than starting over
        folder = {"pretraining": "pretrain", "rl": "rl"}[stage]
        receipt = json.loads((part / folder / "training-receipt.json").read_text())
        assert receipt["resumed_from"]["path"] == "checkpoint-0001"
    with pytest.raises(FileExistsError, match="already finished"):
        run_pipeline(_resumable(part, resume=True), log=lambda *_: None)
