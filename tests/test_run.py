"""The end-to-end pipeline on a tiny model: two runs with the same seed give the same results."""

import json

from glm53 import ModelConfig
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
