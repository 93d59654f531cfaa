"""Run a script as a caller that is not root: this process's user seen from a user namespace of its own, as uid
65534 (unshare --map-user), so it still reads this interpreter wherever it is. The script prints one JSON object
last, holding the pool's isolation `report`; the test skips where no user namespace is to be had."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_unprivileged(script: str, **env: str) -> dict:
    if shutil.which("unshare") is None:
        pytest.skip("the test needs util-linux's unshare")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT), "HOME": "/tmp", **env}
    result = subprocess.run(["unshare", "--user", "--map-user=65534", "--map-group=65534", sys.executable, "-c",
                             script], env=env, cwd="/tmp", capture_output=True, text=True, timeout=300)
    if result.returncode != 0 and "unshare failed" in result.stderr:
        pytest.skip(f"no user namespace for this user here: {result.stderr.strip()}")
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    if not out["report"]["namespaces"].startswith("on"):
        pytest.skip(f"no user namespace for an unprivileged user here: {out['report']['namespaces']}")
    return out
