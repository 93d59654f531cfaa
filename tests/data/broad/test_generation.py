"""Generated tasks: determinism, prompt shape, cases, reference bodies (exec and the verifier)."""

import json

import pytest

from glm53.data.broad import (FROZEN_SPLITS, BroadTask, broad_pretraining_task, broad_pretraining_text,
                         frozen_broad_tasks)
from glm53.data.broad.check import exec_failures, verify_references
from glm53.data.broad.task_draw import MAX_BYTES
from glm53.data.broad.task import HEADER
from glm53.data.tasks import read_tasks, write_tasks


def sample(n_per_split=40):
    return [t for split in FROZEN_SPLITS for t in frozen_broad_tasks(split, n_per_split)]


def test_deterministic_and_prefix_stable():
    from glm53.data.broad.registry import Registry, builtin_registry
    from glm53.data.broad.splits import _stream_block

    fresh = Registry(builtin_registry().primitives)  # a new registry object: nothing cached
    first = [t.to_json() for t in frozen_broad_tasks("dev", 12, fresh)]
    assert first == [t.to_json() for t in frozen_broad_tasks("dev", 12)]
    assert [t.to_json() for t in frozen_broad_tasks("dev", 5)] == first[:5]
    text = broad_pretraining_text(7)
    _stream_block.cache_clear()
    assert broad_pretraining_text(7) == text and broad_pretraining_text(7, seed=43) != text


def test_prompt_shape_metadata_and_size():
    for task in sample():
        lines = task.prompt.split("\n")
        assert lines[0] == HEADER and all(line.startswith("# ") and len(line) <= 80 for line in lines[1:-1])
        assert lines[-1].startswith(f"def {task.entry_point}(") and lines[-1].endswith("):")
        assert task.body.startswith("\n    ") and task.body.endswith("\n") and "return" in task.body
        assert len(task.text.encode()) <= MAX_BYTES
        assert 1 <= task.depth <= 3 and task.family == f"broad/{task.root}" and task.phrasings
        assert len(task.cases) >= 8
        assert len({json.dumps(list(args)) for args, _ in task.cases}) == len(task.cases)


def test_sampled_reference_bodies_pass_by_exec():
    tasks = sample(30) + [broad_pretraining_task(i) for i in range(50)]
    assert len(tasks) >= 200
    assert exec_failures(tasks) == []


def test_sampled_reference_bodies_pass_the_verifier():
    pytest.importorskip("glm53.verify.languages")  # the python language level
    tasks = sample(40)
    assert len(tasks) == 200 and verify_references(tasks) == []


def test_task_rows_round_trip_through_task_files(tmp_path):
    tasks = frozen_broad_tasks("phrase", 6)
    row = tasks[0].to_json()
    assert row["language"] == "python" and row["split"] == "phrase" and row["body"] == tasks[0].body
    assert {"root", "depth", "phrasings", "pairs"} <= set(row)
    write_tasks(tasks, tmp_path / "broad.jsonl")
    back = read_tasks(tmp_path / "broad.jsonl")
    assert [(t.task_id, t.prompt, t.entry_point, t.cases) for t in back] == \
           [(t.task_id, t.prompt, t.entry_point, tuple((tuple(a), e) for a, e in t.cases)) for t in tasks]
    assert isinstance(tasks[0], BroadTask) and tasks[0].canonical_completion == tasks[0].body


def test_a_description_that_means_another_function_is_redrawn():
    from glm53.data.broad.task_draw import make_task
    from glm53.data.broad.registry import builtin_registry

    conflicts = {}
    first = make_task(builtin_registry(), "dev", "t-0", "conflict-test", "abcdefg", conflicts=conflicts)
    (key,) = conflicts
    assert key[0] == first.description
    conflicts[key] = ("another behaviour",)  # as if an earlier task had said the same about another function
    second = make_task(builtin_registry(), "dev", "t-0", "conflict-test", "abcdefg", conflicts=conflicts)
    assert (second.description, second.prompt) != (first.description, first.prompt)
