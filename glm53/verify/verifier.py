"""The executable verifier: static check, then execution in an isolated process, one per program.

    verdict = verify(source, entry_point, cases, timeout_s=2.0, language="reference", cpu_s=0.1)
    verdict.status in {"passed", "failed", "invalid", "timeout", "memory", "crashed"}

A program that spins ends as `timeout` once it has spent `cpu_s` of its own CPU time (DEFAULT_CPU_S, 0.1 s, plus
0.5 ms a case): it holds its own lane that long and no longer. `timeout_s` is only the wall-clock backstop.

Stage 1 (static_check.py) refuses anything outside the language level (languages.py: `reference`, the
reference suite's one-line subset, the default; `python`, ordinary Python) before it runs. Stage 2 sends the
program to a pool of warm workers (sandbox_worker.py). Each worker keeps a template process that entered the
OS isolation layers (isolation.py) before any job existed, and forks one child per program from it; the
worker feeds that child one case at a time and compares each result with the expected value itself.

What it guarantees, on Linux with every layer on (`isolation_report()["level"] == "full"`):
- A program passes only by returning, for every hidden case, a value equal in type and value to the expected
  one (1 != True != 1.0, also inside lists, tuples, dicts and dict keys; floats by ==, so -0.0 passes for 0.0).
  An expected value the sandbox cannot represent (a set, bytes, a numpy integer, NaN) is refused when the job is
  built, naming the case. Expected values never enter the
  program's process; the inputs of other cases and of other jobs are not in it either, so nothing it can reach
  tells it an answer it did not compute.
- The program cannot open a socket, reach any network, run another program, create processes, signal, trace or
  list other processes, write or create a file, read /proc or /sys, see another job's IPC objects, or change
  its limits; it runs (when the pool runs as root) under a uid of its template's own, with at most `memory_mb`
  of address space, a limit on its own CPU time and a wall-clock backstop. Whatever it does, the caller gets a
  verdict: a crash, hang or flood of output becomes crashed, timeout or memory.
- The pool is safe to share between threads; every reply is matched to its job by an id unique in the pool, and
  a worker whose exchange was interrupted (Ctrl-C in the caller) is replaced, so no stale reply is ever taken.
What it does not guarantee: it is not a hardened container. The kernel is shared (a kernel bug reachable through
the allowed syscalls is out of scope); reads of world-readable files in the read-only mount view are allowed;
CPU and memory use within the limits can slow the machine. Where a layer is unavailable (not Linux, no user
namespaces, no libseccomp) the pool says so once on stderr and `isolation_report()` records it; the static stage and
resource limits still apply. Receipts record `isolation_report()`.
"""

from __future__ import annotations

import atexit
import itertools
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
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from .isolation import LAYERS, isolation_level
from .languages import DEFAULT_LANGUAGE, get_language
from .channels import LineReader
from .program import Program, as_program
from .sandbox_worker import CASE_OVERHEAD_S
from .values import decode, encode, encode_cases, same_value  # noqa: F401 - same_value, encode_cases: this API
from .static_check import StaticCheckError, check_source, normalized_name

STATUSES = ("passed", "failed", "invalid", "timeout", "memory", "crashed")
WORKER = Path(__file__).with_name("sandbox_worker.py")
DEFAULT_TIMEOUT_S = 2.0  # the wall-clock backstop of a program: generous, so a loaded machine fails no correct program
# A program's own CPU time (user and system, from just before it is defined), plus CASE_OVERHEAD_S a case, after
# which it ends as a timeout. A simple per-suite default, the same for both suites, not a per-task measurement:
# the slowest reference solution of the broad suite spends 0.26 ms of CPU on its 10 cases (2,000 tasks measured on a
# 2-core AMD EPYC), the reference suite's one-liners less, so 0.1 s is a floor about 400 times above the slowest
# correct program. A program that spins costs its lane 0.1 s of CPU, not the wall-clock backstop.
DEFAULT_CPU_S = 0.1
# the channels' poll() waits in whole milliseconds held in a C int (24.8 days at most; beyond, it raises an
# OverflowError: "timestamp out of range for platform time_t" for 1e300); a day is far beyond any test program
MAX_TIMEOUT_S = 86400.0
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

    def __init__(self, pool_scratch: Path, layers: tuple[str, ...]):
        # a scratch folder of its own (mkdtemp: private, 0o700), removed with it: unprivileged, programs keep the
        # caller's uid, so in a folder shared by the pool one lane's flood of names broke the others' jobs
        self.scratch = Path(tempfile.mkdtemp(prefix="worker-", dir=pool_scratch))
        self.proc = subprocess.Popen([sys.executable, "-I", "-S", str(WORKER), ",".join(layers)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     cwd=self.scratch, env={}, start_new_session=True, bufsize=0)
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
        shutil.rmtree(self.scratch, ignore_errors=True)


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
        self._pid = os.getpid()  # a forked child's copy of this pool is not its to use or close
        self.scratch = Path(tempfile.mkdtemp(prefix=scratch_prefix(self._pid)))
        self._workers: list[_Worker | None] = [None] * self.size
        self._idle: queue.SimpleQueue[int] = queue.SimpleQueue()
        for i in range(self.size):
            self._idle.put(i)
        self._report: dict | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._ids = itertools.count(1)  # job ids unique in the pool: a reply can only ever match its own job
        # every worker this pool started, replaced ones included; each leads its own session, which its template
        # and its programs' processes stay in (seccomp refuses setsid), so these name everything the pool made
        self.worker_pids: list[int] = []

    def next_id(self) -> int:
        return next(self._ids)

    def _worker(self, i: int) -> _Worker:
        worker = self._workers[i]
        if worker is None or worker.proc.poll() is not None:
            worker = self._workers[i] = _Worker(self.scratch, self.layers)
            self.worker_pids.append(worker.proc.pid)
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
        answered = False
        try:
            reply = self._worker(i).ask(job)
            answered = reply is not None
            if reply is None:
                return {"id": job["id"], "status": "crashed", "passed": 0, "total": len(job["cases"]),
                        "message": "sandbox worker stopped answering or answered another job; replaced"}
            return reply
        finally:
            if not answered:  # broken, or interrupted mid-exchange (its reply may still be in the pipe)
                self._replace(i)
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
        for i in range(self.size if os.getpid() == self._pid else 0):  # a forked copy's workers are the parent's
            self._replace(i)
        if os.getpid() == self._pid:  # and so is its scratch folder
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
        if _default_pool is None or _default_pool._closed or _default_pool._pid != os.getpid():
            _default_pool = SandboxPool()
            atexit.register(_default_pool.close)
        return _default_pool


def _job(job_id: int, source: str, entry_point: str, encoded_cases: list, timeout_s: float, memory_mb: int,
         language: str = DEFAULT_LANGUAGE, cpu_s: float = DEFAULT_CPU_S) -> dict:
    """One job for a worker. The CPU budget is never above the wall-clock backstop."""
    level = get_language(language)
    return {"id": job_id, "source": source, "entry_point": entry_point, "cases": encoded_cases,
            "builtins": sorted(level.builtins), "modules": {m: sorted(names) for m, names in level.modules.items()},
            "timeout_s": float(timeout_s), "cpu_s": min(float(cpu_s), float(timeout_s)), "memory_mb": memory_mb}


def isolation_report(pool: SandboxPool | None = None) -> dict:
    """The isolation layers the verifier runs with, for receipts."""
    return (pool or default_pool()).isolation()


def _prepare(n: int, item: Program | Sequence, timeout_s: float, pool: SandboxPool, language: str,
             cpu_s: float = DEFAULT_CPU_S) -> tuple:
    """(verdict, None) for a statically refused program, or (None, job). A program's own language level, when it
    names one, overrides `language` for that program."""
    program = as_program(item)
    cases, level = [(list(args), expected) for args, expected in program.cases], program.language or language
    entry_point = program.entry_point
    if isinstance(entry_point, str):
        entry_point = normalized_name(entry_point)  # `def ﬁx` defines `fix`, as Python reads it
    get_language(level)
    if not cases:
        raise ValueError(f"item {n}: no test cases; a program can only be judged against at least one case")
    encoded = encode_cases(cases, f"item {n}")
    try:
        check_source(*program.judged_source(entry_point), language=level)
    except StaticCheckError as err:
        return Verdict("invalid", 0, len(cases), str(err), err.rule), None
    return None, _job(pool.next_id(), program.source, entry_point, encoded, timeout_s, pool.memory_mb, level, cpu_s)


def _verdict(reply: dict) -> Verdict:
    status = reply["status"] if reply.get("status") in STATUSES else "crashed"
    return Verdict(status, int(reply.get("passed", 0)), int(reply["total"]), str(reply.get("message", "")))


def _check_cpu(cpu_s: float) -> None:
    if not (isinstance(cpu_s, (int, float)) and 0 < cpu_s <= MAX_TIMEOUT_S):
        raise ValueError(f"cpu_s must be a number of seconds > 0 and at most {MAX_TIMEOUT_S:.0f}, got {cpu_s!r}")


def verify_many(items: Sequence[Program], timeout_s: float = DEFAULT_TIMEOUT_S, pool: SandboxPool | None = None,
                language: str = DEFAULT_LANGUAGE, cpu_s: float = DEFAULT_CPU_S) -> list[Verdict]:
    """items: Programs (program.py), cases [(args, expected), ...]. One Verdict each.
    `cpu_s`: each program's own CPU time (plus 0.5 ms a case); `timeout_s`: its wall-clock backstop."""
    _check_cpu(cpu_s)
    pool = pool or default_pool()
    get_language(language)
    verdicts: list[Verdict | None] = [None] * len(items)
    jobs, index_of = [], {}
    for n, item in enumerate(items):
        verdicts[n], job = _prepare(n, item, timeout_s, pool, language, cpu_s)
        if job is not None:
            index_of[job["id"]] = n
            jobs.append(job)
    for job, reply in zip(jobs, pool.run(jobs)):
        verdicts[index_of[job["id"]]] = _verdict(reply)
    return verdicts  # type: ignore[return-value]


def verify(source: str, entry_point: str, cases: Sequence, timeout_s: float = DEFAULT_TIMEOUT_S,
           pool: SandboxPool | None = None, language: str = DEFAULT_LANGUAGE, cpu_s: float = DEFAULT_CPU_S) -> Verdict:
    return verify_many([Program(source, entry_point, cases)], timeout_s, pool, language, cpu_s)[0]


def verify_stream(items: Iterable[Program], timeout_s: float = DEFAULT_TIMEOUT_S, pool: SandboxPool | None = None,
                  window: int = 256, language: str = DEFAULT_LANGUAGE, cpu_s: float = DEFAULT_CPU_S
                  ) -> Iterator[Verdict]:
    """Verdicts in order for an iterable of any length, holding at most `window` items at a time. Jobs run as
    lanes free up, not in batches, so a program that runs to its time limit holds only its own lane while the
    others go on (until the window fills behind it)."""
    pool = pool or default_pool()
    get_language(language)
    _check_cpu(cpu_s)
    pending: deque = deque()
    with ThreadPoolExecutor(max_workers=pool.size) as executor:
        for n, item in enumerate(items):
            verdict, job = _prepare(n, item, timeout_s, pool, language, cpu_s)
            pending.append(verdict if job is None else executor.submit(pool.run_one, job))
            while len(pending) >= window or (pending and _done(pending[0])):
                head = pending.popleft()
                yield head if isinstance(head, Verdict) else _verdict(head.result())
        while pending:
            head = pending.popleft()
            yield head if isinstance(head, Verdict) else _verdict(head.result())


def _done(entry) -> bool:
    return isinstance(entry, Verdict) or entry.done()


def probe(source: str, entry_point: str, args_per_case: Sequence, pool: SandboxPool,
          skip_seccomp: bool = False, builtin_names: Sequence[str] | None = None) -> list:
    """Test-only hook: run raw code in a sandbox child, bypassing the static stage, and return what each case
    returned (or raised). With `builtin_names=None` the code gets every builtin, `__import__` included."""
    import builtins

    names = sorted(dir(builtins)) if builtin_names is None else list(builtin_names)
    job = _job(pool.next_id(), source, entry_point, encode_cases([(args, None) for args in args_per_case], "probe"),
               10.0, pool.memory_mb, cpu_s=10.0)
    job.update(builtins=names, raw_builtins=True, echo=True, test_skip_seccomp=skip_seccomp)
    reply = pool.run_one(job)
    if "values" not in reply:
        raise RuntimeError(f"probe did not run: {reply.get('status')}: {reply.get('message')}")
    return [decode(r["value"]) if "value" in r else f"raised {r['error']}" for r in reply["values"]]
