"""Rewards as code (verify/rewards.py): docs/rl.md's custom reward, run for real on a tiny RL run through `glm53 rl
--reward`; its broken reward refused at the start with one line; a raising or non-finite reward stopping the run
before any update; the built-ins as functions, equal to the modes."""

import hashlib
import json
import math
import re
from pathlib import Path

import pytest

from glm53.cli import main
from glm53.data.tasks import frozen_tasks
from glm53.train.pretrain import pretrain
from glm53.train.pretrain_config import PretrainConfig
from glm53.train.rl import rl_train
from glm53.train.rl_config import RLConfig
from glm53.verify.rewards import RewardError, ordering_problem, reward, reward_terms, total_reward
from glm53.verify.verifier import Verdict

from .test_rl import SMALL, small_rl

DOCS = Path(__file__).resolve().parents[2] / "docs" / "rl.md"
TINY_RL = ["--groups", "4", "--group-size", "4", "--families", "increment,even", "--tasks-per-family", "2",
           "--temperature", "1.0", "--max-new-tokens", "8", "--checkpoints", "2,4", "--groups-per-step", "2",
           "--dev-per-family", "1", "--dev-samples", "2", "--device", "cpu", "--no-progress", "--lr", "1e-3"]


@pytest.fixture(scope="module")
def start(tmp_path_factory):
    out = tmp_path_factory.mktemp("pre") / "run"
    pretrain(PretrainConfig(out=str(out), steps=2, checkpoints=(2,), batch_size=2, progress=False, device="cpu",
                            model=SMALL), dev_tasks=[], log=lambda *_: None)
    return out / "checkpoint-0002"


@pytest.fixture
def my_rewards(tmp_path, monkeypatch):
    """docs/rl.md's `# my_rewards.py` blocks, written as the module my_rewards on the import path."""
    blocks = re.findall(r"```python\n# my_rewards.py\n(.*?)```", DOCS.read_text(), re.S)
    assert len(blocks) == 2
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "my_rewards.py").write_text("\n\n".join(blocks))
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    import importlib

    import my_rewards
    return importlib.reload(my_rewards)


@pytest.mark.slow
def test_the_docs_length_penalty_runs_and_its_receipt_records_it(start, tmp_path, my_rewards):
    out = tmp_path / "rl-short"
    assert main(["rl", "--init", str(start), "--out", str(out), "--reward", "binary",
                 "--reward", "my_rewards:length_penalty=0.1", *TINY_RL]) == 0
    receipt = json.loads((out / "training-receipt.json").read_text())
    source = hashlib.sha256(__import__("inspect").getsource(my_rewards.length_penalty).encode()).hexdigest()
    assert receipt["settings"]["reward"] == "binary,my_rewards:length_penalty=0.1"
    assert [{k: r[k] for k in ("name", "weight")} for r in receipt["rewards"]] == \
        [{"name": "binary", "weight": 1.0}, {"name": "my_rewards:length_penalty", "weight": 0.1}]
    assert receipt["rewards"][1]["source_sha256"] == source and len(receipt["rewards"][0]["source_sha256"]) == 64
    for r in receipt["rollouts"]:
        expected = reward(Verdict(**r["verdict"])) + 0.1 * (-len(r["completion"].encode()) / 64)
        assert r["reward"] == pytest.approx(expected, abs=1e-12)
    # the same rewards from Python: the same run, the same weights
    again = rl_train(small_rl(start, tmp_path / "python"), log=lambda *_: None,
                     reward_funcs=["binary", (my_rewards.length_penalty, 0.1)])
    assert again["settings"]["reward"] == "binary,my_rewards:length_penalty=0.1"
    assert again["checkpoints"][-1]["weights_sha256"] == receipt["checkpoints"][-1]["weights_sha256"]


@pytest.mark.slow
def test_the_docs_broken_reward_is_refused_at_the_start_with_one_line(start, tmp_path, my_rewards, capsys):
    out = tmp_path / "broken"
    assert main(["rl", "--init", str(start), "--out", str(out), "--reward", "my_rewards:pays_failures",
                 *TINY_RL]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "my_rewards:pays_failures breaks the ordering rule" in err and "--allow-unordered-reward" in err
    assert "a program passed scores 0" in err and not out.exists()
    # allowed on purpose, it trains
    assert main(["rl", "--init", str(start), "--out", str(out), "--reward", "my_rewards:pays_failures",
                 "--allow-unordered-reward", *TINY_RL]) == 0
    assert json.loads((out / "training-receipt.json").read_text())["status"] == "completed"


@pytest.mark.slow
@pytest.mark.parametrize("function, shown", [(lambda task, completion, verdict: math.nan, "returned nan"),
                                             (lambda task, completion, verdict: 1 / len(completion[:0]),
                                              "raised ZeroDivisionError: division by zero")], ids=["nan", "raises"])
def test_a_reward_that_fails_mid_run_stops_it_before_any_update(start, tmp_path, function, shown):
    def failing_in_the_run(task, completion, verdict):  # ordered on the probe set, fails on a real rollout
        return function(task, completion, verdict) if completion and verdict.rule != "probe" and \
            completion != task.canonical_completion else 0.0

    out = tmp_path / "stopped"
    with pytest.raises(RewardError, match=f"failing_in_the_run {shown} on task ") as err:
        rl_train(small_rl(start, out), log=lambda *_: None, reward_funcs=["binary", (failing_in_the_run, 0.5)])
    assert "\n" not in str(err.value) and "before any update used it" in str(err.value)
    assert not (out / "rl_log.jsonl").exists() or (out / "rl_log.jsonl").read_text() == ""  # no step finished


@pytest.mark.parametrize("spec, message", [
    ("binary=abc", "the weight after = must be a finite number other than 0"),
    ("binary=0", "the weight after = must be a finite number other than 0"),
    ("bianry", "name a built-in (binary, partial) or a function as package.module:function"),
])
def test_a_bad_reward_flag_is_one_line_before_anything_is_written(tmp_path, capsys, spec, message):
    assert main(["rl", "--init", str(tmp_path / "none"), "--out", str(tmp_path / "out"), "--reward", spec]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_an_unimportable_reward_is_one_line(start, tmp_path):
    with pytest.raises(ValueError, match="cannot import no_such_module"):
        rl_train(small_rl(start, tmp_path / "x", reward="no_such_module:f"), log=lambda *_: None)
    assert not (tmp_path / "x").exists()


def test_the_built_in_modes_are_functions_equal_to_the_modes_and_keep_the_order():
    task = frozen_tasks("rl", 1, "increment")[0]
    for mode, extra in (("binary", {}), ("partial", {"exact_bonus": 0.5})):
        cfg = RLConfig(out="x", init="y", reward=mode, invalid_penalty=-0.2, **extra)
        terms = reward_terms(cfg)
        assert ordering_problem(terms, task) is None
        for verdict in (Verdict("passed", 5, 5), Verdict("failed", 2, 5), Verdict("invalid", 0, 5)):
            assert total_reward(terms, task, "x", verdict) == reward(verdict, mode, -0.2, extra.get("exact_bonus", 0.0))
    # a reward that ties a failure with a pass breaks the strict part of the rule
    cfg = RLConfig(out="x", init="y", reward="partial", invalid_penalty=-0.1)
    assert ordering_problem(reward_terms(cfg, [lambda t, c, v: 0.0]), task).count("must score above") == 1
