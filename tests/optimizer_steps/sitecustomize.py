"""Loaded by every Python process the tests start (tests/trains_marked_slow.py puts this folder first on
PYTHONPATH): each optimizer step in the process appends a byte to the file GLM53_TEST_STEP_LOG names, so a test
knows it trained also where the training ran in a subprocess, a torchrun rank, a spawned rank or a sweep's worker.

Simplifications: torch is not imported here, so a process that never imports it stays light (tests/test_light_cli.py
checks that); torch's global step hook goes in when torch.optim.optimizer is first imported. A process started
with -I or -S, or with an environment without PYTHONPATH (the sandbox's workers), records nothing."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys

STEP_LOG = "GLM53_TEST_STEP_LOG"


def record_step(optimizer, args, kwargs) -> None:
    """torch's optimizer step pre-hook: one byte a step (opened each time: a forked process writes its own)."""
    path = os.environ.get(STEP_LOG)
    if path:
        with open(path, "ab") as log:
            log.write(b".")


class HookOnImport(importlib.abc.MetaPathFinder):
    """Registers record_step as torch's global optimizer step pre-hook as soon as torch.optim.optimizer has run."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch.optim.optimizer":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run_module = spec.loader.exec_module

        def exec_module(module) -> None:
            run_module(module)
            module.register_optimizer_step_pre_hook(record_step)

        spec.loader.exec_module = exec_module
        return spec


if os.environ.get(STEP_LOG) and "torch.optim.optimizer" not in sys.modules:
    sys.meta_path.insert(0, HookOnImport())
