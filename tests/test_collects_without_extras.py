"""The README's test command installs `--dev --extras` and nothing more: the suite must collect and the serve extra's
tests must skip (naming `--serve`) where FastAPI, uvicorn, Markdown, nh3, httpx and Selenium are absent, and the hf
extra's (naming `--hf`) where transformers, TRL and datasets are. CI runs that command first on a fresh clone; this
test keeps the promise where the extras happen to be installed, by hiding their packages from a child interpreter
that collects the whole suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVE_PACKAGES = ("fastapi", "starlette", "uvicorn", "markdown", "nh3", "httpx", "selenium")
HF_PACKAGES = ("transformers", "trl", "datasets", "accelerate")

# a finder placed first on sys.meta_path that answers "not installed" for the serve and hf extras' packages
HIDE = f"""
import importlib.abc, sys
class Hidden(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {SERVE_PACKAGES + HF_PACKAGES!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Hidden())
import pytest
sys.exit(pytest.main(sys.argv[1:]))
"""


def _pytest_without_extras(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", HIDE, "-p", "no:cacheprovider", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_the_suite_collects_without_the_serve_and_hf_extras():
    done = _pytest_without_extras("--collect-only", "-q", "tests")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "error" not in done.stdout.splitlines()[-1], done.stdout[-3000:]


def test_the_serve_tests_skip_and_name_the_install_flag():
    done = _pytest_without_extras("-q", "-rs", "tests/serve", "tests/runtime/test_checks_by_meaning.py::"
                                 "test_the_walk_finds_the_configs")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    skips = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skips and all("install.sh --serve" in line for line in skips), done.stdout[-3000:]
    assert " passed" in done.stdout.splitlines()[-1] and "skipped" in done.stdout.splitlines()[-1]


def test_the_hf_tests_skip_and_name_the_install_flag():
    done = _pytest_without_extras("-q", "-rs", "tests/interop")
    # 5: pytest's "no tests ran", as every file skips whole at its import of the extra
    assert done.returncode in (0, 5), done.stdout[-3000:] + done.stderr[-2000:]
    skips = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skips and all("install.sh --hf" in line for line in skips), done.stdout[-3000:]
    assert "passed" not in done.stdout.splitlines()[-1] and "skipped" in done.stdout.splitlines()[-1]
