"""The sandbox's isolation level as a policy: `rl`, `eval`, `run` and `sweep` refuse a level below full before
writing anything unless given --accept-partial-isolation, and their receipts record what was accepted."""

import json

import pytest
import torch

from glm53 import GLM53, ModelConfig
from glm53.cli import main
from glm53.data.tasks import frozen_tasks, write_tasks
from glm53.verify.sandbox_policy import missing_layers
from glm53.checkpoints.format import save_checkpoint
from glm53.verify.verifier import SandboxPool

from ..tiny import TINY

PARTIAL = {"namespaces": "on (root: network, PID and read-only mount namespaces per template)",
           "drop-user": "off: not root; programs run as the caller's uid 1000, which can read the caller's files",
           "seccomp": "on (91 BPF instructions)", "level": "partial"}


@pytest.fixture
def partial(monkeypatch):
    """Every sandbox reports a missing user drop (as an unprivileged run does)."""
    monkeypatch.setattr(SandboxPool, "isolation", lambda self: dict(PARTIAL))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    root = tmp_path_factory.mktemp("policy")
    save_checkpoint(root / "start", GLM53(ModelConfig(**{**TINY, "max_sequence_length": 160})), {"step": 0})
    write_tasks(frozen_tasks("confirm", 1, "double"), root / "tasks.jsonl")
    return root


def test_missing_layers_name_the_layer_and_its_reason():
    assert missing_layers(PARTIAL) == ["drop-user (not root)"]


def refused(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "drop-user (not root)" in err and "--accept-partial-isolation" in err, err
    return err


def test_eval_refuses_then_accepts_and_records(partial, checkpoint, tmp_path, capsys):
    argv = ["eval", "--checkpoint", str(checkpoint / "start"), "--tasks", str(checkpoint / "tasks.jsonl"),
            "--out", str(tmp_path / "e.json"), "--max-new-tokens", "4", "--device", "cpu"]
    assert main(argv) == 2
    refused(capsys)
    assert not (tmp_path / "e.json").exists()
    assert main(argv + ["--accept-partial-isolation"]) == 0
    sandbox = json.loads((tmp_path / "e.json").read_text())["sandbox"]
    assert sandbox["level"] == "partial" and sandbox["accepted_partial"] is True


def test_rl_refuses_then_accepts_and_records(partial, checkpoint, tmp_path, capsys):
    argv = ["rl", "--init", str(checkpoint / "start"), "--out", str(tmp_path / "rl"), "--groups", "1",
            "--group-size", "2", "--tasks-per-family", "1", "--families", "double", "--max-new-tokens", "4",
            "--dev-per-family", "0", "--device", "cpu", "--no-progress"]
    assert main(argv) == 2
    refused(capsys)
    assert not (tmp_path / "rl").exists()
    assert main(argv + ["--accept-partial-isolation"]) == 0
    receipt = json.loads((tmp_path / "rl" / "training-receipt.json").read_text())
    assert receipt["sandbox"]["level"] == "partial" and receipt["sandbox"]["accepted_partial"] is True
    assert "accept_partial_isolation" not in receipt["settings"]  # the settings keep their keys; the sandbox says it


def test_run_and_sweep_refuse_before_writing_anything(partial, tmp_path, capsys):
    assert main(["run", "--preset", "quick", "--out", str(tmp_path / "run"), "--device", "cpu"]) == 2
    refused(capsys)
    assert main(["sweep", "rl-screen", "--out", str(tmp_path / "sweep"), "--no-analyze"]) == 2
    refused(capsys)
    assert not (tmp_path / "run").exists() and not (tmp_path / "sweep").exists()


def test_a_sweep_job_records_the_sweeps_policy(partial, checkpoint, tmp_path):
    from glm53.runtime.config import RuntimeConfig
    from glm53.sweep.executor import Job, run_job

    settings = {"checkpoint": str(checkpoint / "start"), "per_family": 1, "families": "double", "samples": 2,
                "max_new_tokens": 4}
    job = Job("a", 1, str(tmp_path / "job"), "eval", settings, (), runtime=RuntimeConfig(accept_partial_isolation=True))
    (tmp_path / "job").mkdir()
    threads = torch.get_num_threads()
    try:
        assert run_job(job, threads=1) == 0, (tmp_path / "job" / "log.txt").read_text()
    finally:
        torch.set_num_threads(threads)  # run_job sets this process's (a job's own, in a sweep)
    sandbox = json.loads((tmp_path / "job" / "receipt.json").read_text())["sandbox"]
    assert sandbox["level"] == "partial" and sandbox["accepted_partial"] is True


def test_a_full_sandbox_needs_no_flag_and_records_that_nothing_was_accepted(monkeypatch):
    from glm53.verify.sandbox_policy import require_isolation

    monkeypatch.setattr(SandboxPool, "isolation", lambda self: {**PARTIAL, "drop-user": "on (uid 5)", "level": "full"})
    assert require_isolation(False, "rl")["accepted_partial"] is False
