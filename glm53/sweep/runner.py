"""`glm53 sweep`: every (arm, seed) of a spec as an independent job, in parallel, resumable.

Layout of a sweep folder:
    spec.json                       the resolved spec (a folder belongs to one spec; another is refused)
    runs/ARM/seed-S/receipt.json    a finished job (written atomically); error.json + log.txt for a failed one
    sweep-log.jsonl                 one line per finished or failed job, with its wall time
    analysis.json, REPORT.md, charts/   written by `glm53 analyze` (also run at the end of every sweep)

Rerunning the same command skips jobs that have a receipt and redoes every other one from the start (a job
is minutes at most; its partial files are removed first). One sweep process at a time holds a folder.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from tqdm.auto import tqdm

from ..io import atomic_write_json, run_lock
from .executor import RECEIPT, Executor, Job, LocalExecutor
from .spec import SweepSpec

SPEC_FILE = "spec.json"
SWEEP_LOG = "sweep-log.jsonl"


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def default_workers(threads_per_worker: int) -> int:
    return max(1, available_cores() // threads_per_worker)


def job_dir(out: Path, arm: str, seed: int) -> Path:
    return out / "runs" / arm / f"seed-{seed}"


def check_sweep_folder(spec: SweepSpec, out: Path) -> bool:
    """True when `out` already holds this spec's sweep; raises when it holds anything else."""
    if not out.exists():
        return False
    if not out.is_dir():
        raise FileExistsError(f"{out} exists as a file; --out must name a folder")
    saved = out / SPEC_FILE
    if saved.is_file():
        held = json.loads(saved.read_text())
        if held != json.loads(json.dumps(spec.to_dict())):
            raise ValueError(f"{out} holds another sweep (spec {held.get('name')!r}, seeds {held.get('seeds')}); "
                             "rerun with the same spec and seeds to continue it, or choose another --out")
        return True
    if any(p for p in out.iterdir() if not p.name.startswith(".")):
        raise FileExistsError(f"{out} exists and is not a sweep folder; choose another --out")
    return False


def is_finished(job: Job) -> bool:
    receipt = Path(job.dir) / RECEIPT
    if not receipt.is_file():
        return False
    try:
        held = json.loads(receipt.read_text())
    except ValueError:
        return False
    return held.get("sweep_settings") == job.settings and held.get("seed") == job.seed


def plan_jobs(spec: SweepSpec, out: Path) -> list[Job]:
    return [Job(arm, seed, str(job_dir(out, arm, seed)), spec.job, spec.settings(arm), tuple(spec.checkpoints))
            for arm in spec.arms for seed in spec.seeds]


def clear_job(job: Job) -> None:
    """Remove what an unfinished or failed attempt left, so the job starts from nothing."""
    folder = Path(job.dir)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)


def run_sweep(spec: SweepSpec, out: str | os.PathLike, workers: int | None = None, threads_per_worker: int = 1,
              progress: bool = True, executor: Executor | None = None, log=print) -> dict:
    """Run what is left of the sweep; returns {"jobs", "skipped", "done", "failed": [{job, error}], "seconds"}."""
    out = Path(out)
    workers = workers or default_workers(threads_per_worker)
    executor = executor or LocalExecutor(workers, threads_per_worker)
    existed = check_sweep_folder(spec, out)
    with run_lock(out):
        if not existed:
            atomic_write_json(out / SPEC_FILE, spec.to_dict())
        jobs = plan_jobs(spec, out)
        todo = [j for j in jobs if not is_finished(j)]
        for job in todo:
            clear_job(job)
        log(f"glm53 sweep {spec.name}: {len(jobs)} jobs ({len(spec.arms)} arms x {len(spec.seeds)} seeds), "
            f"{len(jobs) - len(todo)} already finished; {getattr(executor, 'workers', '?')} workers x "
            f"{getattr(executor, 'threads', '?')} threads")
        started = time.perf_counter()
        failed, done, starts = [], 0, {}
        bar = tqdm(total=len(jobs), initial=len(jobs) - len(todo), desc="sweep", unit="job", disable=not progress,
                   dynamic_ncols=True)

        def on_event(event: str, job: Job, detail: str) -> None:
            nonlocal done
            if event == "started":
                starts[job.name] = time.perf_counter()
            else:
                seconds = time.perf_counter() - starts.pop(job.name, started)
                with open(out / SWEEP_LOG, "a", encoding="utf-8") as f:
                    f.write(json.dumps({"job": job.name, "status": event, "seconds": round(seconds, 3),
                                        "error": detail or None}) + "\n")
                if event == "done":
                    done += 1
                else:
                    failed.append({"job": job.name, "error": detail})
                    bar.write(f"failed: {job.name}: {detail} (see {Path(job.dir) / 'log.txt'})")
                bar.update(1)
                if not progress:
                    log(f"{event}: {job.name} ({seconds:.1f} s)")
            bar.set_postfix(done=len(jobs) - len(todo) + done, running=len(starts), failed=len(failed))

        try:
            executor.run(todo, on_event)
        finally:
            bar.close()
        seconds = time.perf_counter() - started
    return {"jobs": len(jobs), "skipped": len(jobs) - len(todo), "done": done, "failed": failed, "seconds": seconds}
