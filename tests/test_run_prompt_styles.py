"""Prompt styles in RL and in the run's evaluation: RL's `both` renders each task once, in the style a hash of its id
picks (about half each, the same on every run and seed), comment stays the default and leaves every task as it
was, and the run's splits are scored in comment style unless --eval-prompt-style says otherwise."""

from __future__ import annotations

import pytest

from glm53.data.broad.docstring import SUFFIX, docstring_task, in_docstring_half, styled_tasks
from glm53.data.suites import get_suite
from glm53.run_config import RunConfig, eval_splits
from glm53.train.rl_config import RLConfig


def _rl(**settings) -> RLConfig:
    return RLConfig(init="x", out="y", suite="broad", families="all", tasks_per_family=200, **settings)


def test_both_renders_each_task_once_in_the_style_its_id_picks():
    plain, both = _rl().training_tasks(), _rl(prompt_style="both").training_tasks()
    assert plain == get_suite("broad").tasks("rl", 200)  # comment, the default: the tasks as drawn
    assert len(both) == len(plain)
    for task, styled in zip(plain, both):
        assert styled == (docstring_task(task) if in_docstring_half(task.task_id) else task)
    docstring = sum(t.task_id.endswith(SUFFIX) for t in both)
    assert 80 <= docstring <= 120  # about half
    assert _rl(prompt_style="both", seed=7).training_tasks() == both  # not the seed's: the same tasks every run
    stream = _rl(prompt_style="both", task_source="stream").training_tasks()
    assert {t.task_id.endswith(SUFFIX) for t in stream} == {True, False}


def test_both_is_refused_where_prompts_are_not_the_suites_to_render():
    with pytest.raises(ValueError, match="--prompt-style both renders the broad suite's prompts"):
        RLConfig(init="x", out="y", prompt_style="both")
    with pytest.raises(ValueError, match="a --tasks-file's prompts are trained on as written"):
        RLConfig(init="x", out="y", suite="broad", prompt_style="both", tasks_file="t.jsonl")
    with pytest.raises(ValueError, match="unknown prompt style 'all'"):
        styled_tasks([], "all")


def test_the_runs_splits_are_scored_in_the_style_asked():
    comment = eval_splits(RunConfig.from_preset("RUN", "broad", confirm_per_family=2))
    assert list(comment) == list(get_suite("broad").eval_splits)
    both = eval_splits(RunConfig.from_preset("RUN", "broad", confirm_per_family=2, eval_prompt_style="both"))
    assert list(both) == list(comment) + [f"{s}{SUFFIX}" for s in comment]
    for split, tasks in comment.items():
        assert both[split] == tasks and both[split + SUFFIX] == [docstring_task(t) for t in tasks]
    docstring = eval_splits(RunConfig.from_preset("RUN", "broad", confirm_per_family=2, eval_prompt_style="docstring"))
    assert list(docstring) == [f"{s}{SUFFIX}" for s in comment]
    with pytest.raises(ValueError, match="--eval-prompt-style docstring renders the broad suite's prompts"):
        RunConfig.from_preset("RUN", "quick", eval_prompt_style="docstring")
    assert "eval_prompt_style" not in RunConfig.from_preset("RUN", "broad").to_dict()  # the default is not recorded
