"""--executor ray: a tiny sweep on a local Ray instance gives the local pool's receipts and analysis; bad input is
refused in one line before anything is written."""

import json
import sys

import pytest

from glm53.cli import main
from glm53.sweep.runner import run_sweep
from glm53.sweep.spec import load_spec
from tests.sweep.test_sweep import write_spec

needs_ray = pytest.mark.skipif(__import__("importlib").util.find_spec("ray") is None,
                               reason='Ray is not installed (the optional extra: pip install -e ".[ray]")')


def job_receipts(out) -> dict:
    return {str(p.relative_to(out)): {k: v for k, v in json.loads(p.read_text()).items() if k != "elapsed_seconds"}
            for p in sorted((out / "runs").rglob("receipt.json"))}


@pytest.mark.slow
@needs_ray
def test_a_sweep_on_local_ray_equals_the_local_pool(tmp_path):
    from glm53.sweep.ray_executor import RayExecutor

    spec = load_spec(write_spec(tmp_path), seeds=[1, 2])
    local = run_sweep(spec, tmp_path / "local", workers=2, progress=False, log=lambda *_: None)
    executor = RayExecutor(threads=1, num_cpus=2)
    try:
        on_ray = run_sweep(spec, tmp_path / "ray", progress=False, log=lambda *_: None, executor=executor)
        again = run_sweep(spec, tmp_path / "ray", progress=False, log=lambda *_: None, executor=executor)
    finally:
        executor.close()
    assert local["done"] == on_ray["done"] == 4 and not on_ray["failed"]
    assert again["skipped"] == 4 and again["done"] == 0  # resume: finished jobs are kept
    assert job_receipts(tmp_path / "ray") == job_receipts(tmp_path / "local")
    from glm53.sweep.analysis import analyze

    assert analyze(tmp_path / "ray", charts=False) == analyze(tmp_path / "local", charts=False)


def refused(tmp_path, capsys, *flags) -> str:
    out = tmp_path / "sweep"
    assert main(["sweep", str(write_spec(tmp_path)), "--out", str(out), *flags]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and not out.exists()
    return lines[0]


def test_ray_executor_without_ray_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if it were not installed
    assert 'pip install -e ".[ray]"' in refused(tmp_path, capsys, "--executor", "ray")


@needs_ray
def test_an_unreachable_ray_address_is_refused(tmp_path, capsys):
    assert "no Ray cluster answers there" in refused(tmp_path, capsys, "--executor", "ray", "--address", "127.0.0.1:1")


def test_ray_flags_without_the_ray_executor_are_refused(tmp_path, capsys):
    assert "belong to --executor ray" in refused(tmp_path, capsys, "--address", "auto")
