"""The executable verifier: static check, then execution in a sandboxed child process.

    verdict = verify(source, entry_point, cases, timeout_s=2.0)
    verdict.status in {"passed", "failed", "invalid", "timeout", "memory", "crashed"}

Stage 1 (static_check.py) refuses anything outside a small safe subset before it runs. Stage 2 sends the
program to a pool of warm worker processes (sandbox_worker.py); each candidate runs in a fresh forked child
with resource limits, and a case counts only from the structured result the harness writes back, compared
with type-strict equality (1 != True, 1 != 1.0, also inside lists).

Simplifications: this is a defence in depth for model-written one-liners, not a security boundary against a
determined attacker: there are no namespaces, seccomp or containers, and as root the process-count limit is
not enforced (the static stage already forbids every route to os, imports and attribute access).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from .static_check import ALLOWED_CALLS, StaticCheckError, check_source

STATUSES = ("passed", "failed", "invalid", "timeout", "memory", "crashed")
WORKER = Path(__file__).with_name("sandbox_worker.py")
DEFAULT_TIMEOUT_S = 2.0
DEFAULT_MEMORY_MB = 512


@dataclass
class Verdict:
    status: str
    passed_cases: int
    total_cases: int
    message: str = ""
    rule: str | None = None  # the static rule broken, for invalid programs

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def valid(self) -> bool:
        return self.status != "invalid"

    def to_json(self) -> dict:
        return asdict(self)


def same_value(actual, expected) -> bool:
    """Type-strict equality, recursively through lists, tuples and dicts."""
    if type(actual) is not type(expected):
        return False
    if isinstance(expected, (list, tuple)):
        return len(actual) == len(expected) and all(same_value(a, e) for a, e in zip(actual, expected))
    if isinstance(expected, dict):
        return actual.keys() == expected.keys() and all(same_value(actual[k], expected[k]) for k in expected)
    return actual == expected


def _encode(value):
    from .sandbox_worker import encode

    return encode(value)


class SandboxPool:
    """Warm worker processes, each answering jobs one at a time; jobs are spread over them by threads."""

    def __init__(self, workers: int | None = None, memory_mb: int = DEFAULT_MEMORY_MB):
        self.size = workers or max(1, min(4, os.cpu_count() or 1))
        self.memory_mb = memory_mb
        self.scratch = Path(tempfile.mkdtemp(prefix="glm53-sandbox-"))
        self._procs: list[subprocess.Popen | None] = [None] * self.size
        self._lock = threading.Lock()
        self._closed = False

    def _spawn(self, i: int) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-I", "-S", str(WORKER)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=self.scratch, env={},
                                start_new_session=True, text=True, bufsize=1)
        self._procs[i] = proc
        return proc

    def _worker(self, i: int) -> subprocess.Popen:
        proc = self._procs[i]
        if proc is None or proc.poll() is not None:
            proc = self._spawn(i)
        return proc

    def _run_one(self, i: int, job: dict) -> dict:
        proc = self._worker(i)
        try:
            proc.stdin.write(json.dumps(job) + "\n")
            proc.stdin.flush()
            # the worker enforces the job's deadline; this outer one only catches a stuck worker
            ready, _, _ = select.select([proc.stdout], [], [], job["timeout_s"] + 10)
            line = proc.stdout.readline() if ready else ""
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            self._kill(i)
            return {"status": "crashed", "message": "sandbox worker stopped answering; restarted"}
        return json.loads(line)

    def run(self, jobs: list[dict]) -> list[dict]:
        if self._closed:
            raise RuntimeError("this SandboxPool is closed")
        replies: list[dict | None] = [None] * len(jobs)

        def lane(i: int) -> None:
            for j in range(i, len(jobs), self.size):
                replies[j] = self._run_one(i, jobs[j])

        threads = [threading.Thread(target=lane, args=(i,)) for i in range(min(self.size, len(jobs)))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return replies

    def _kill(self, i: int) -> None:
        proc = self._procs[i]
        if proc is None:
            return
        try:
            os.killpg(proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self._procs[i] = None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for i in range(self.size):
            self._kill(i)
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> "SandboxPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_default_pool: SandboxPool | None = None


def default_pool() -> SandboxPool:
    global _default_pool
    if _default_pool is None or _default_pool._closed:
        _default_pool = SandboxPool()
        atexit.register(_default_pool.close)
    return _default_pool


def verify_many(items: Sequence[tuple[str, str, Sequence]], timeout_s: float = DEFAULT_TIMEOUT_S,
                pool: SandboxPool | None = None) -> list[Verdict]:
    """items: (source, entry_point, cases) with cases [(args, expected), ...]. Returns one Verdict each."""
    verdicts: list[Verdict | None] = [None] * len(items)
    jobs, owners = [], []
    for n, (source, entry_point, cases) in enumerate(items):
        cases = [(list(args), expected) for args, expected in cases]
        try:
            check_source(source, entry_point)
        except StaticCheckError as err:
            verdicts[n] = Verdict("invalid", 0, len(cases), str(err), err.rule)
            continue
        try:
            args = [[_encode(a) for a in case_args] for case_args, _ in cases]
        except ValueError as err:
            raise ValueError(f"item {n}: test case arguments cannot be sent to the sandbox ({err})") from None
        jobs.append({"id": n, "source": source, "entry_point": entry_point, "args": args,
                     "builtins": sorted(ALLOWED_CALLS), "timeout_s": float(timeout_s),
                     "memory_mb": (pool or default_pool()).memory_mb})
        owners.append((n, cases))
    if jobs:
        replies = (pool or default_pool()).run(jobs)
        for (n, cases), reply in zip(owners, replies):
            verdicts[n] = _verdict_from_reply(reply, cases)
    return verdicts  # type: ignore[return-value]


def verify(source: str, entry_point: str, cases: Sequence, timeout_s: float = DEFAULT_TIMEOUT_S,
           pool: SandboxPool | None = None) -> Verdict:
    return verify_many([(source, entry_point, cases)], timeout_s, pool)[0]


def _verdict_from_reply(reply: dict, cases: list) -> Verdict:
    from .sandbox_worker import decode

    total = len(cases)
    status = reply.get("status")
    if status != "ran":
        status = status if status in STATUSES else "crashed"
        return Verdict(status, 0, total, str(reply.get("message", "")))
    results = reply.get("results", [])
    passed, first_failure = 0, ""
    for k, ((args, expected), result) in enumerate(zip(cases, results)):
        ok = False
        if "value" in result:
            try:
                ok = same_value(decode(result["value"]), expected)
            except (ValueError, TypeError, KeyError, IndexError):
                ok = False
        if ok:
            passed += 1
        elif not first_failure:
            first_failure = f"case {k} {'raised ' + result['error'] if 'error' in result else 'returned a wrong value'}"
    if len(results) != total:
        return Verdict("crashed", passed, total, "the harness returned too few results")
    if passed == total:
        return Verdict("passed", passed, total, "")
    return Verdict("failed", passed, total, first_failure)
