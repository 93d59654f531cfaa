"""scripts/split_coverage.py: the tasks of a split that any kept job solved, counted once each, over several studies;
a study folder without job receipts is refused in one line."""

import json
from pathlib import Path

import pytest

from ..scripts import load_script


def _script():
    return load_script("split_coverage")


def _job(study: Path, arm: str, seed: int, outcomes: dict) -> None:
    folder = study / "runs" / arm / f"seed-{seed}"
    folder.mkdir(parents=True)
    (folder / "receipt.json").write_text(json.dumps({"task_outcomes": {"human_pass_at_1": outcomes}}))


def test_the_union_counts_each_solved_task_once_over_jobs_and_studies(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _job(a, "x", 1, {"h1": 1.0, "h2": 0.0, "h3": 0.0})
    _job(a, "y", 1, {"h1": 1.0, "h2": 0.0, "h3": 0.0})
    _job(b, "x", 2, {"h1": 0.0, "h2": 0.0, "h3": 1.0})
    jobs, tasks, solved = _script().coverage([a, b], "human_pass_at_1")
    assert (jobs, tasks, dict(solved)) == (3, 3, {"h1": 2, "h3": 1})  # h2 never solved
    assert _script().coverage([a], "compose_pass_at_1")[0] == 0  # no job recorded that metric


def test_a_folder_without_job_receipts_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="no job receipts"):
        _script().coverage([tmp_path], "human_pass_at_1")
