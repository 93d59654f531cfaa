"""A test that trains is marked slow, so that `python -m pytest -m "not slow"` is the quick loop; the README's
command runs them all. "Trains" is decided by what runs, not by reading the test: a test trains when an optimizer
takes a step while its setup, call or teardown runs (torch's global step hook sees every torch.optim optimizer, so
pretrain(), rl_train(), the vision and expression trainers, Muon and the profiler are all seen), in this process or
in a Python process it starts (optimizer_steps/sitecustomize.py: commands run as subprocesses, torchrun and
spawned ranks, a sweep's workers).

A test not marked slow that trains fails: at its first step in this process, so that the quick loop stays quick
(TrainsUnmarked, a BaseException, so that a command's `except Exception` does not turn it into a one-line error),
and at its teardown when a process it started stepped. conftest.py imports the hooks below.

Simplifications: a step is a step, however small (a test of the optimizer itself trains too); a process started
with -I or -S or an environment without PYTHONPATH is not seen; the log is one file a pytest process, so tests run
one at a time in it (pytest-xdist's workers are processes of their own, each with its own log)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from torch.optim.optimizer import register_optimizer_step_pre_hook

STEPS_FOLDER = Path(__file__).parent / "optimizer_steps"
_spec = importlib.util.spec_from_file_location("optimizer_steps", STEPS_FOLDER / "sitecustomize.py")
recorder = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(recorder)

_running: dict = {"item": None}  # the test whose setup, call or teardown is running
_steps_before = pytest.StashKey[int]()
_stopped = pytest.StashKey[bool]()  # TrainsUnmarked already said it
_log_folder = pytest.StashKey[str]()


class TrainsUnmarked(BaseException):
    """An optimizer stepped in a test not marked slow."""


def unmarked_message(item) -> str:
    return (f"{item.nodeid} trains (an optimizer stepped while it ran) and is not marked slow: add "
            "@pytest.mark.slow (or pytestmark for a whole module), so that `pytest -m 'not slow'` stays quick "
            "(tests/trains_marked_slow.py)")


def _stop_unmarked(optimizer, args, kwargs) -> None:
    item = _running["item"]
    if item is not None and item.get_closest_marker("slow") is None:
        item.stash[_stopped] = True
        raise TrainsUnmarked(unmarked_message(item))


def _steps_logged() -> int:
    return os.path.getsize(os.environ[recorder.STEP_LOG])


def pytest_configure(config) -> None:
    """A fresh step log for this pytest process, this folder first on its children's PYTHONPATH, and the hooks."""
    folder = tempfile.mkdtemp(prefix="glm53-test-steps-")
    config.stash[_log_folder] = folder
    log = Path(folder) / "steps"
    log.touch()
    os.environ[recorder.STEP_LOG] = str(log)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(STEPS_FOLDER), *filter(None, [os.environ.get("PYTHONPATH")])])
    register_optimizer_step_pre_hook(recorder.record_step)
    register_optimizer_step_pre_hook(_stop_unmarked)


def pytest_unconfigure(config) -> None:
    shutil.rmtree(config.stash.get(_log_folder, ""), ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    _running["item"] = item
    item.stash[_steps_before] = _steps_logged()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    try:
        return (yield)
    finally:
        _running["item"] = None
        trained = _steps_logged() > item.stash.get(_steps_before, _steps_logged())
        if trained and item.get_closest_marker("slow") is None and not item.stash.get(_stopped, False):
            pytest.fail(unmarked_message(item), pytrace=False)
