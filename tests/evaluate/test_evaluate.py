import itertools

import pytest

from glm53 import GLM53
from glm53.data.tasks import frozen_tasks
from glm53.decode.generate import Sampling
from glm53.evaluate.compare import compare, holm, mcnemar_exact
from glm53.decode.task_completions import task_stop_rule
from glm53.evaluate.evaluate import EvalConfig, evaluate, pass_at_k


@pytest.mark.parametrize("n,c", [(1, 0), (1, 1), (5, 2), (8, 3), (8, 8), (6, 0)])
def test_unbiased_pass_at_k_matches_brute_force(n, c):
    outcomes = [1] * c + [0] * (n - c)
    for k in range(1, n + 1):
        subsets = list(itertools.combinations(outcomes, k))
        brute = sum(any(s) for s in subsets) / len(subsets)
        assert pass_at_k(n, c, k) == pytest.approx(brute)


def test_stop_rule_needs_a_complete_and_valid_function():
    task = frozen_tasks("dev", 1, "double")[0]
    stop = task_stop_rule([task])
    assert stop(task.prompt, "\n    return x * 2\n")
    assert not stop(task.prompt, "\n    return x *")
    assert not stop(task.prompt, "\n    import os\n")  # parses, but the static check refuses it


def test_evaluate_receipt_records_everything(tiny_config):
    import dataclasses

    model = GLM53(dataclasses.replace(tiny_config, max_sequence_length=128))
    tasks = frozen_tasks("dev", 1, "increment,reverse")
    greedy = evaluate(model, tasks, EvalConfig(sampling=Sampling(max_new_tokens=8)))
    assert greedy["settings"]["greedy"] and greedy["summary"]["rollouts"] == 2
    for row in greedy["tasks"]:
        assert {"task_id", "family", "prompt", "entry_point", "samples", "passed"} <= set(row)
        sample = row["samples"][0]
        assert sample["verdict"]["status"] in ("passed", "failed", "invalid", "timeout", "memory", "crashed")
    assert set(greedy["by_family"]) == {"increment", "reverse"}
    assert evaluate(model, tasks, EvalConfig(sampling=Sampling(max_new_tokens=8)))["tasks"] == greedy["tasks"]
    sampled = evaluate(model, tasks,
                       EvalConfig(samples=4, seed=3, sampling=Sampling(temperature=1.0, max_new_tokens=8)))
    assert set(sampled["summary"]["pass_at_k"]) == {"1", "2", "4"}
    assert sampled["summary"]["rollouts"] == 8
    with pytest.raises(ValueError, match="temperature"):
        evaluate(model, tasks, EvalConfig(samples=4))


def _receipt(outcomes: dict[str, list[int]], settings: dict | None = None) -> dict:
    return {"settings": settings or {"greedy": True, "samples": 1, "temperature": 0.0},
            "tasks": [{"task_id": tid, "family": tid.split("-")[1], "passed": sum(s),
                       "samples": [{"verdict": {"status": "passed" if x else "failed"}} for x in s]}
                      for tid, s in outcomes.items()]}


def test_compare_counts_gains_losses_and_tests_them():
    ids = [f"confirm-{fam}-{i:03d}" for fam in ("double", "even") for i in range(10)]
    a = _receipt({tid: [int(i < 3)] for i, tid in enumerate(ids)})
    b = _receipt({tid: [int(i < 15)] for i, tid in enumerate(ids)})
    c = _receipt({tid: [int(i < 4)] for i, tid in enumerate(ids)})
    result = compare(a, [b, c], names=["base", "b", "c"])
    ob = result["comparisons"][0]["overall"]
    assert (ob["gains"], ob["losses"], ob["solved_a"], ob["solved_b"]) == (12, 0, 3, 15)
    assert ob["mcnemar_p"] == pytest.approx(2 * 0.5**12)
    low, high = ob["bootstrap_95"]
    assert ob["mean_difference"] == pytest.approx(0.6)
    assert low <= ob["mean_difference"] <= high and low > 0
    assert result["comparisons"][0]["name"] == "b" and result["baseline"] == "base"
    holm_ps = [x["overall"]["holm_p"] for x in result["comparisons"]]
    assert holm_ps[0] == pytest.approx(2 * ob["mcnemar_p"]) and holm_ps[1] == 1.0
    assert result["comparisons"][0]["by_family"]["double"]["gains"] == 7


def test_compare_refuses_what_it_cannot_pair():
    greedy = _receipt({"confirm-double-000": [1]})
    sampled = _receipt({"confirm-double-000": [1, 0]}, {"greedy": False, "samples": 2, "temperature": 0.35})
    with pytest.raises(ValueError, match="sampled differently"):
        compare(greedy, [sampled])
    with pytest.raises(ValueError, match="not an eval receipt"):
        compare(greedy, [{"summary": {}}])


def test_mcnemar_and_holm_edge_cases():
    assert mcnemar_exact(0, 0) == 1.0
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
