"""The executable verifier: static check, then execution in an isolated process, one per program.

    verdict = verify(source, entry_point, cases, timeout_s=2.0)
    verdict.status in {"passed", "failed", "invalid", "timeout", "memory", "crashed"}

Stage 1 (static_check.py) refuses anything outside a small safe subset before it runs. Stage 2 sends the
program to a pool of warm workers (sandbox_worker.py). Each worker keeps a template process that entered the
OS isolation layers (isolation.py) before any job existed, and forks one child per program from it; the
worker feeds that child one case at a time and compares each result with the expected value itself.

What it guarantees, on Linux with every layer on (`isolation_report()["level"] == "full"`):
- A program passes only by returning, for every hidden case, a value equal in type and value to the expected
  one (1 != True != 1.0, also inside lists, tuples, dicts and dict keys). Expected values never enter the
  program's process; the inputs of other cases and of other jobs are not in it either, so nothing it can reach
  tells it an answer it did not compute.
- The program cannot open a socket, reach any network, run another program, create processes, signal or trace
  other processes, write or create a file, read /proc or /sys, or change its limits; it runs as `nobody` (when
  the pool runs as root) with at most `memory_mb` of address space and a CPU and wall-clock limit. Whatever it
  does, the caller gets a verdict: a crash, hang or flood of output becomes crashed, timeout or memory.
- The pool is safe to share between threads; every reply is matched to its job by id.
What it does not guarantee: it is not a hardened container. The kernel is shared (a kernel bug reachable through
the allowed syscalls is out of scope); reads of world-readable files in the read-only mount view are allowed;
CPU and memory use within the limits can slow the machine. Where a layer is unavailable (not Linux, no user
namespaces, no libseccomp) the pool says so once on stderr and `isolation_report()` records it; the static stage and
resource limits still apply. Receipts record `isolation_report()`.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from .isolation import LAYERS, isolation_level
from .sandbox_worker import CASE_OVERHEAD_S, LineReader, encode, same_value  # noqa: F401 - same_value is part of this API
from .static_check import ALLOWED_CALLS, StaticCheckError, check_source

STATUSES = ("passed", "failed", "invalid", "timeout", "memory", "crashed")
WORKER = Path(__file__).with_name("sandbox_worker.py")
DEFAULT_TIMEOUT_S = 2.0
DEFAULT_MEMORY_MB = 512
START_TIMEOUT_S = 30.0
_warned = threading.Event()


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

    def to_json(self) -> dict:
        return asdict(self)


class _Worker:
    """One `sandbox_worker.py` process and the isolation report its template sent at start."""

    def __init__(self, scratch: Path, layers: tuple[str, ...]):
        self.proc = subprocess.Popen([sys.executable, "-I", "-S", str(WORKER), ",".join(layers)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     cwd=scratch, env={}, start_new_session=True, bufsize=0)
        self.reader = LineReader(self.proc.stdout.fileno())
        try:
            line = self.reader.readline(time.monotonic() + START_TIMEOUT_S)
            self.report = json.loads(line)["hello"]
        except (TimeoutError, TypeError, ValueError, KeyError) as err:
            self.kill()
            raise RuntimeError(f"the sandbox worker did not start ({type(err).__name__})") from None

    def ask(self, job: dict) -> dict | None:
        """Send one job and return its reply, or None when the worker broke, hung or answered another job."""
        try:
            self.proc.stdin.write(json.dumps(job).encode() + b"\n")
            # the worker enforces the job's deadline; this outer one only catches a stuck worker
            line = self.reader.readline(time.monotonic() + job["timeout_s"] + CASE_OVERHEAD_S * len(job["cases"]) + 10)
            reply = json.loads(line) if line else None
        except (OSError, TimeoutError, ValueError):
            return None
        if not isinstance(reply, dict) or reply.get("id") != job["id"]:
            return None
        return reply

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


class SandboxPool:
    """Warm sandbox workers shared safely by any number of threads: each job checks one out, uses it alone
    and returns it. `layers` chooses the isolation layers (all by default; fewer only to measure their cost)."""

    def __init__(self, workers: int | None = None, memory_mb: int = DEFAULT_MEMORY_MB,
                 layers: Sequence[str] = LAYERS):
        unknown = set(layers) - set(LAYERS)
        if unknown:
            raise ValueError(f"unknown isolation layers {sorted(unknown)}; choose from {list(LAYERS)}")
        self.size = workers or max(1, min(4, os.cpu_count() or 1))
        self.memory_mb = memory_mb
        self.layers = tuple(layers)
        remove_abandoned_scratch()
        self.scratch = Path(tempfile.mkdtemp(prefix=scratch_prefix(os.getpid())))
        self._workers: list[_Worker | None] = [None] * self.size
        self._idle: queue.SimpleQueue[int] = queue.SimpleQueue()
        for i in range(self.size):
            self._idle.put(i)
        self._report: dict | None = None
        self._closed = False
        self._lock = threading.Lock()

    def _worker(self, i: int) -> _Worker:
        worker = self._workers[i]
        if worker is None or worker.proc.poll() is not None:
            worker = self._workers[i] = _Worker(self.scratch, self.layers)
            with self._lock:
                if self._report is None:
                    self._report = dict(worker.report)
                    _warn_once(self._report)
        return worker

    def _replace(self, i: int) -> None:
        worker, self._workers[i] = self._workers[i], None
        if worker is not None:
            worker.kill()

    def run_one(self, job: dict) -> dict:
        if self._closed:
            raise RuntimeError("this SandboxPool is closed")
        i = self._idle.get()
        try:
            reply = self._worker(i).ask(job)
            if reply is None:
                self._replace(i)
                return {"id": job["id"], "status": "crashed", "passed": 0, "total": len(job["cases"]),
                        "message": "sandbox worker stopped answering or answered another job; replaced"}
            return reply
        finally:
            self._idle.put(i)

    def run(self, jobs: list[dict]) -> list[dict]:
        if len(jobs) <= 1:
            return [self.run_one(job) for job in jobs]
        with ThreadPoolExecutor(max_workers=min(self.size, len(jobs))) as executor:
            return list(executor.map(self.run_one, jobs))

    def isolation(self) -> dict:
        """{layer: "on (...)" or "off: reason", "level": full|partial|none}, starting a worker if none ran yet."""
        if self._report is None:
            i = self._idle.get()
            try:
                self._worker(i)
            finally:
                self._idle.put(i)
        return {**self._report, "level": isolation_level(self._report)}

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for i in range(self.size):
            self._replace(i)
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> "SandboxPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def scratch_prefix(pid: int) -> str:
    # host and pid in the name, so a later pool can tell a folder whose process is gone from one still in use
    return f"{_scratch_host_prefix()}{pid}-"


def _scratch_host_prefix() -> str:
    return f"glm53-sandbox-{socket.gethostname()}-"


def remove_abandoned_scratch() -> None:
    """Remove the scratch folders of pools on this host whose process ended without closing them (killed, or
    ended by os._exit, which skips atexit). Folders of live processes, and of other hosts sharing the temporary
    folder, are left alone."""
    host = _scratch_host_prefix()
    for folder in Path(tempfile.gettempdir()).glob(host + "*-*"):
        pid = folder.name.removeprefix(host).split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except PermissionError:
            pass  # alive, another user's


def _warn_once(report: dict) -> None:
    off = {layer: why for layer, why in report.items() if not str(why).startswith("on")
           and "not requested" not in str(why)}
    if off and not _warned.is_set():
        _warned.set()
        print("glm53 verifier: running without " + "; ".join(f"{k} ({v})" for k, v in off.items())
              + ". Programs are still statically checked and resource-limited; receipts record the isolation level.",
              file=sys.stderr)


_default_pool: SandboxPool | None = None
_default_lock = threading.Lock()


def close_default_pool() -> None:
    """Close this process's default pool, if it made one (for processes that end without running atexit)."""
    with _default_lock:
        if _default_pool is not None:
            _default_pool.close()


def default_pool() -> SandboxPool:
    global _default_pool
    with _default_lock:
        if _default_pool is None or _default_pool._closed:
            _default_pool = SandboxPool()
            atexit.register(_default_pool.close)
        return _default_pool


def _job(n: int, source: str, entry_point: str, cases: list, timeout_s: float, memory_mb: int) -> dict:
    try:
        encoded = [[[encode(a) for a in args], encode(expected)] for args, expected in cases]
    except ValueError as err:
        raise ValueError(f"item {n}: test cases cannot be sent to the sandbox ({err})") from None
    return {"id": n, "source": source, "entry_point": entry_point, "cases": encoded,
            "builtins": sorted(ALLOWED_CALLS), "timeout_s": float(timeout_s), "memory_mb": memory_mb}


def isolation_report(pool: SandboxPool | None = None) -> dict:
    """The isolation layers the verifier runs with, for receipts."""
    return (pool or default_pool()).isolation()


def verify_many(items: Sequence[tuple[str, str, Sequence]], timeout_s: float = DEFAULT_TIMEOUT_S,
                pool: SandboxPool | None = None) -> list[Verdict]:
    """items: (source, entry_point, cases) with cases [(args, expected), ...]. Returns one Verdict each."""
    pool = pool or default_pool()
    verdicts: list[Verdict | None] = [None] * len(items)
    jobs = []
    for n, (source, entry_point, cases) in enumerate(items):
        cases = [(list(args), expected) for args, expected in cases]
        if not cases:
            raise ValueError(f"item {n}: no test cases; a program can only be judged against at least one case")
        try:
            check_source(source, entry_point)
        except StaticCheckError as err:
            verdicts[n] = Verdict("invalid", 0, len(cases), str(err), err.rule)
            continue
        jobs.append(_job(n, source, entry_point, cases, timeout_s, pool.memory_mb))
    for reply in pool.run(jobs):
        status = reply["status"] if reply.get("status") in STATUSES else "crashed"
        verdicts[reply["id"]] = Verdict(status, int(reply.get("passed", 0)), int(reply["total"]),
                                        str(reply.get("message", "")))
    return verdicts  # type: ignore[return-value]


def verify(source: str, entry_point: str, cases: Sequence, timeout_s: float = DEFAULT_TIMEOUT_S,
           pool: SandboxPool | None = None) -> Verdict:
    return verify_many([(source, entry_point, cases)], timeout_s, pool)[0]


def verify_stream(items: Iterable[tuple[str, str, Sequence]], timeout_s: float = DEFAULT_TIMEOUT_S,
                  pool: SandboxPool | None = None, chunk: int = 64) -> Iterator[Verdict]:
    """Verdicts in order for an iterable of any length, holding at most `chunk` items at a time."""
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == chunk:
            yield from verify_many(batch, timeout_s, pool)
            batch = []
    if batch:
        yield from verify_many(batch, timeout_s, pool)


def probe(source: str, entry_point: str, args_per_case: Sequence, pool: SandboxPool,
          skip_seccomp: bool = False, builtin_names: Sequence[str] | None = None) -> list:
    """Test-only hook: run raw code in a sandbox child, bypassing the static stage, and return what each case
    returned (or raised). With `builtin_names=None` the code gets every builtin, `__import__` included."""
    import builtins

    names = sorted(dir(builtins)) if builtin_names is None else list(builtin_names)
    job = _job(0, source, entry_point, [(args, None) for args in args_per_case], 10.0, pool.memory_mb)
    job.update(builtins=names, echo=True, test_skip_seccomp=skip_seccomp)
    reply = pool.run_one(job)
    if "values" not in reply:
        raise RuntimeError(f"probe did not run: {reply.get('status')}: {reply.get('message')}")
    from .sandbox_worker import decode

    return [decode(r["value"]) if "value" in r else f"raised {r['error']}" for r in reply["values"]]
