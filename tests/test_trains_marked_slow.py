"""The check that a test that trains is marked slow (tests/trains_marked_slow.py), run on a toy suite in a child
pytest: an optimizer step in the test's process or in a Python process it starts fails a test without the mark,
also one that catches Exception around the step; with the mark, or without a step, the test passes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CONFTEST = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from tests.trains_marked_slow import (pytest_configure, pytest_runtest_setup, pytest_runtest_teardown,  # noqa: F401
                                      pytest_unconfigure)
"""

STEP = "import torch; w = torch.nn.Parameter(torch.ones(2)); torch.optim.SGD([w], lr=0.1).step()"

TOY = f"""
import subprocess, sys
import pytest

def test_steps_unmarked():
    {STEP}

def test_steps_under_except_exception():
    try:
        {STEP}
    except Exception:
        pass

@pytest.mark.slow
def test_steps_marked():
    {STEP}

def test_a_child_steps_unmarked():
    subprocess.run([sys.executable, "-c", {STEP!r}], check=True)

@pytest.mark.slow
def test_a_child_steps_marked():
    subprocess.run([sys.executable, "-c", {STEP!r}], check=True)

def test_no_step():
    import torch
    torch.nn.Linear(2, 2)(torch.ones(1, 2)).sum().backward()
"""


def test_a_step_fails_an_unmarked_test_here_or_in_a_child(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_toy.py").write_text(TOY)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: trains\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "test_toy.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    outcomes = {line.split()[1].split("::")[1]: line.split()[0] for line in done.stdout.splitlines()
                if line.split()[:1] in (["PASSED"], ["FAILED"], ["ERROR"])}
    assert outcomes == {"test_steps_unmarked": "FAILED", "test_steps_under_except_exception": "FAILED",
                        "test_steps_marked": "PASSED", "test_a_child_steps_unmarked": "ERROR",
                        "test_a_child_steps_marked": "PASSED", "test_no_step": "PASSED"}, done.stdout[-3000:]
    # the child's test passed its call and failed at teardown, where the step log is read
    assert "test_a_child_steps_unmarked trains (an optimizer stepped while it ran) and is not marked slow: " \
           "add @pytest.mark.slow" in done.stdout, done.stdout[-3000:]


def test_this_suite_runs_the_check():
    from . import conftest, trains_marked_slow

    for hook in ("pytest_configure", "pytest_runtest_setup", "pytest_runtest_teardown", "pytest_unconfigure"):
        assert getattr(conftest, hook) is getattr(trains_marked_slow, hook), hook
    assert Path(os.environ[trains_marked_slow.recorder.STEP_LOG]).is_file()
    assert os.environ["PYTHONPATH"].split(os.pathsep)[0] == str(trains_marked_slow.STEPS_FOLDER)
