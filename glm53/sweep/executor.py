"""Where a sweep's jobs run. One interface, `Executor.run(jobs, on_event)`; the local process pool is the default
(a cluster executor plugs in beside it).

`LocalExecutor`: at most `workers` jobs at a time, each in a process of its own with `threads` torch threads.
Job processes are forked from a fork server that has imported torch and glm53 once, so a job starts in
milliseconds rather than the second or two an import takes; each is still a fresh process holding nothing of
another job. A job process dies with the sweep (PR_SET_PDEATHSIG), so a killed sweep leaves no job running.

A job writes `receipt.json` (atomically) when it finishes, or `error.json` when it raises; a job process that
dies without either (killed, out of memory) is reported as failed with its exit status.

The source guard: the fork server holds glm53's modules as they were when it started, and a job imports others
lazily, so a sweep whose package source changes mid-way would run jobs of two versions of the code (or fail with an
ImportError between them), and its table would mix them. `LocalExecutor` takes a record of glm53's files (code and
data: SOURCE_SUFFIXES; sweep specs aside, which a sweep reads once) the first time it runs in a process, checks it
before it starts each job and every SOURCE_CHECK_S while jobs run, and on a change stops: the running jobs are killed
and recorded as failed ("stopped: ..."), and SourceChanged (one line) ends the sweep. The finished jobs are kept, so
the same command, run again, continues with the new code. Simplification: the record is files' sizes and
modification times, not their contents; a cluster executor has no guard.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import json
import multiprocessing
import os
import signal
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import Callable, Protocol, Sequence

from ..runtime.config import RuntimeConfig
from ..runtime.files import atomic_write_json, disk_full_message, run_lock
from ..verify.sandbox_policy import sandbox_record
from ..verify.verifier import close_default_pool
from .jobs import job_kind
from .spec import resolve_setup

RECEIPT = "receipt.json"
STOPPED_RECEIPT = "receipt.stopped.json"  # a job that ended after the source changed
DISK_FULL_STATUS = 28  # a job process's exit status when the disk filled under it (ENOSPC's number)
ERROR = "error.json"
JOB_LOG = "log.txt"
# torch._dynamo is imported by the first optimizer a process builds: 1.5 s of every job, paid once here instead
PRELOAD = ["torch", "torch._dynamo", "glm53.sweep.jobs", "glm53.train.expression_pretrain", "glm53.train.pretrain",
           "glm53.decode.task_completions", "glm53.evaluate.evaluate", "glm53.train.rl"]

PACKAGE = Path(__file__).resolve().parents[1]  # glm53/
SOURCE_SUFFIXES = (".py", ".toml", ".json", ".jsonl")
SOURCE_CHECK_S = 5.0
_BASELINES: dict[Path, dict] = {}  # package root -> its files as this process's fork server imported them


class SourceChanged(ValueError):
    """glm53's source changed while a sweep ran (the module docstring); the message is one line."""


def source_state(root: Path) -> dict[str, tuple[int, int]]:
    """(modification time, size) of each file under `root` a job may read, by relative path."""
    state = {}
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if path.suffix not in SOURCE_SUFFIXES or "__pycache__" in rel.parts or rel.parts[:2] == ("sweep", "specs") \
                or path.name.startswith(".#") or path.is_symlink():  # an editor's lock file is a dangling link
            continue
        try:
            stat = path.stat()
        except OSError:  # gone since the walk saw it (a checkout under way): absent, as the next look will say
            continue
        state[str(rel)] = (stat.st_mtime_ns, stat.st_size)
    return state


def source_changes(root: Path) -> list[str]:
    """The files under `root` added, removed or changed since this process first looked (sorted)."""
    baseline, now = _BASELINES.setdefault(root, source_state(root)), source_state(root)
    return sorted(name for name in baseline.keys() | now.keys() if baseline.get(name) != now.get(name))


@dataclass(frozen=True)
class Job:
    arm: str
    seed: int
    dir: str
    kind: str
    settings: dict
    checkpoints: tuple[int, ...]
    setup_dir: str | None = None  # what "{setup}" in the settings stands for
    # the sweep's runtime settings for its jobs: the tracker every training run logs to (report_to, with the sweep's
    # name as report_group) and the isolation policy (accept_partial_isolation)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)

    @property
    def name(self) -> str:
        return f"{self.arm}/seed-{self.seed}"


class Executor(Protocol):
    def run(self, jobs: Sequence[Job], on_event: Callable[[str, Job, str], None]) -> None:
        """Run every job; call on_event("started" | "done" | "failed", job, detail) as they go."""


def run_job(job: Job, threads: int) -> int:
    """Run one job in this process: its receipt or its error lands in job.dir. Returns the exit status."""
    job_dir = Path(job.dir)
    with run_lock(job_dir), open(job_dir / JOB_LOG, "a", encoding="utf-8", buffering=1) as log_file:
        def log(line: str) -> None:
            log_file.write(line + "\n")

        try:
            import torch

            torch.set_num_threads(threads)
            kind = job_kind(job.kind)
            cfg = kind.make(resolve_setup(job.settings, job.setup_dir), job.seed, job.checkpoints, job_dir)
            cfg = with_runtime(cfg, job.runtime, job.name)
            receipt = kind.run(cfg, job_dir, log)
            receipt = {**receipt, "arm": job.arm, "seed": job.seed, "kind": job.kind, "sweep_settings": job.settings,
                       "threads": threads}
            if kind.verifies:
                receipt["sandbox"] = sandbox_record(job.runtime.accept_partial_isolation)
            atomic_write_json(job_dir / RECEIPT, receipt)
            return 0
        except Exception as err:  # noqa: BLE001 - recorded for the sweep; other jobs go on
            try:
                log(traceback.format_exc())
                atomic_write_json(job_dir / ERROR, {"error": f"{type(err).__name__}: {err}",
                                                    "traceback": traceback.format_exc()}, overwrite=True)
            except OSError as unrecorded:
                if disk_full_message(unrecorded, job_dir) is None:
                    raise
            return DISK_FULL_STATUS if disk_full_message(err, job_dir) else 1
        finally:
            close_default_pool()  # its sandbox workers and scratch folder; job processes end by os._exit (no atexit)


def with_runtime(cfg, runtime: RuntimeConfig, name: str):
    """`cfg` with every runtime config in it (at any depth) taking the sweep's isolation policy and, when the sweep
    reports to a tracker, reporting there as run `name` of the sweep's group; other settings stay as they are."""
    if not dataclasses.is_dataclass(cfg):
        return cfg
    if isinstance(cfg, RuntimeConfig):
        reporting = {"report_to": runtime.report_to, "report_name": name, "report_group": runtime.report_group} \
            if runtime.report_to != "none" else {}
        return dataclasses.replace(cfg, accept_partial_isolation=runtime.accept_partial_isolation, **reporting)
    changes = {f.name: with_runtime(getattr(cfg, f.name), runtime, name)
               for f in dataclasses.fields(cfg) if dataclasses.is_dataclass(getattr(cfg, f.name))}
    return dataclasses.replace(cfg, **changes)


def _die_with_parent() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: a killed sweep may leave a job running until it ends


def _job_process(job: Job, threads: int) -> None:
    import threading

    from tqdm import tqdm

    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the sweep's to handle: it stops the jobs itself
    # tqdm's default lock is a multiprocessing semaphore, which os._exit would leave behind for the resource
    # tracker to report at the end of the sweep; a job process has no other process to share its bars with
    tqdm.set_lock(threading.RLock())
    try:
        status = run_job(job, threads)
    except BaseException as err:  # noqa: BLE001 - its own bookkeeping failed
        if disk_full_message(err, job.dir) is None:
            raise
        status = DISK_FULL_STATUS  # the sweep says it once, not every job's traceback
    os._exit(status)


def exit_detail(job: Job, exitcode: int | None) -> str:
    error = Path(job.dir) / ERROR
    if error.is_file():
        try:
            return json.loads(error.read_text())["error"]
        except (ValueError, KeyError):
            pass
    if exitcode is not None and exitcode < 0:
        return f"the job process was killed by signal {signal.Signals(-exitcode).name}"
    return f"the job process exited with status {exitcode} without a receipt"


class LocalExecutor:
    def __init__(self, workers: int, threads: int, source_root: Path = PACKAGE):
        if workers < 1 or threads < 1:
            raise ValueError(f"--workers and --threads-per-worker must be >= 1, got {workers} and {threads}")
        self.workers, self.threads, self.source_root = workers, threads, Path(source_root)

    def _stop_if_source_changed(self, running: dict, on_event) -> None:
        changed = source_changes(self.source_root)
        if not changed:
            return
        where = f"{len(changed)} file{'s' if len(changed) > 1 else ''} under {self.source_root}, first {changed[0]}"
        for sentinel, (process, job) in list(running.items()):
            process.kill()
            process.join(10)
            running.pop(sentinel)
            receipt = Path(job.dir) / RECEIPT
            if receipt.is_file():  # it ended after the change, unreported: kept aside, so the rerun runs it again
                receipt.rename(receipt.with_name(STOPPED_RECEIPT))
            on_event("failed", job, f"stopped: glm53's source changed while it ran ({where})")
        raise SourceChanged(f"glm53's source changed since this sweep started ({where}): its jobs would mix two "
                            "versions of the code; the finished jobs are kept, and the same command run again "
                            "continues with the code as it is then")

    def run(self, jobs: Sequence[Job], on_event: Callable[[str, Job, str], None]) -> None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        pending, running = list(jobs), {}
        checked = time.monotonic()
        try:
            while pending or running:
                if pending and len(running) < self.workers or time.monotonic() - checked >= SOURCE_CHECK_S:
                    self._stop_if_source_changed(running, on_event)
                    checked = time.monotonic()
                while pending and len(running) < self.workers:
                    job = pending.pop(0)
                    process = context.Process(target=_job_process, args=(job, self.threads), name=job.name)
                    process.start()
                    running[process.sentinel] = (process, job)
                    on_event("started", job, "")
                ended = wait(list(running), timeout=1.0)
                if ended:  # looked at before a job that ended is reported done
                    self._stop_if_source_changed(running, on_event)
                for sentinel in ended:
                    process, job = running.pop(sentinel)
                    process.join()
                    if process.exitcode == DISK_FULL_STATUS:  # the next jobs would meet the same full disk
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), job.dir)
                    ok = process.exitcode == 0 and (Path(job.dir) / RECEIPT).is_file()
                    on_event("done" if ok else "failed", job, "" if ok else exit_detail(job, process.exitcode))
                if not running and not pending:
                    break
        finally:
            for process, _ in running.values():
                process.kill()
            deadline = time.monotonic() + 10
            for process, _ in running.values():
                process.join(max(0.0, deadline - time.monotonic()))
