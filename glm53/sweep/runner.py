"""`glm53 sweep`: every (arm, seed) of a spec as an independent job, in parallel, resumable.

Layout of a sweep folder:
    spec.json                       the resolved spec (a folder belongs to one spec; another is refused)
    setup/receipt.json              the spec's [setup] job, if any: run once, alone, before the arms
    runs/ARM/seed-S/receipt.json    a finished job (written atomically); error.json + log.txt for a failed one
    sweep-log.jsonl                 one line per finished or failed job, with its wall time
    analysis.json, REPORT.md, charts/   written by `glm53 analyze` (also run at the end of every sweep)

Rerunning the same command skips jobs that have a receipt and redoes every other one from the start (a job
is minutes at most; its partial files are removed first). One sweep process at a time holds a folder.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import time
from pathlib import Path

from tqdm.auto import tqdm

from ..runtime.config import RuntimeConfig
from ..runtime.distributed import available_cores
from ..runtime.files import atomic_write_json, is_housekeeping, read_json, run_lock
from .executor import RECEIPT, Executor, Job, LocalExecutor
from .spec import SweepSpec

SPEC_FILE = "spec.json"
SWEEP_LOG = "sweep-log.jsonl"


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
        held, now = read_json(saved), json.loads(json.dumps(spec.to_dict()))
        # the recipes' names are a note (a folder from before the book has none): the settings they gave count
        if {k: v for k, v in held.items() if k != "recipes"} != {k: v for k, v in now.items() if k != "recipes"}:
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
        held = read_json(receipt)
    except ValueError:
        return False
    return held.get("sweep_settings") == job.settings and held.get("seed") == job.seed


def _training_receipt(job: Job) -> dict | None:
    """A finished job's training receipt (kept gzipped by scripts/keep_study.py when large), or None."""
    try:
        pointer = read_json(Path(job.dir) / RECEIPT).get("run_receipt")
        if not pointer:
            return None
        path = Path(job.dir) / pointer
        if not path.is_file() and path.with_name(path.name + ".gz").is_file():
            with gzip.open(path.with_name(path.name + ".gz"), "rt", encoding="utf-8") as f:
                return json.load(f)
        return read_json(path)
    except (OSError, ValueError):
        return None


def check_stream_files(finished: list[Job]) -> None:
    """Refuse to resume a sweep when a finished job's stream file (`--stream-primitives`) has been edited since it ran.

    A job's identity is its settings, and the setting names the file, not its content: without this check a sweep
    resumed after an edit would pair jobs that read two different streams. The file and the content a job read are
    in its training receipt (`stream_primitives`: as given, and its sha256); a job whose receipt records none read
    the built-in grammar. (An edit while the sweep runs is the source guard's: glm53's own files, wider.toml among
    them; a file of one's own elsewhere is checked here only, when the sweep is run again.)"""
    from ..data.broad.registry import RegistryError
    from ..data.broad.stream_primitives import file_sha256, stream_file

    now: dict[str, str] = {}
    for job in finished:
        held = (_training_receipt(job) or {}).get("stream_primitives") or {}
        given, sha = held.get("given"), held.get("sha256")
        if not given or not sha:
            continue
        if given not in now:
            try:
                now[given] = file_sha256(stream_file(given))
            except (RegistryError, OSError):
                raise ValueError(f"{job.name} read --stream-primitives {given} ({held.get('path')}), which is not "
                                 "there now; run the sweep from where that path resolves, restore the file, or run "
                                 "the spec into another --out") from None
        if sha != now[given]:
            raise ValueError(f"{job.name} read --stream-primitives {given} with sha256 {sha[:12]}..., and the file "
                             f"now holds {now[given][:12]}...; restore the file this sweep began with, or run the "
                             "spec into another --out")


def setup_job(spec: SweepSpec, out: Path, accept_partial_isolation: bool = False) -> Job | None:
    if spec.setup is None:
        return None
    s = spec.setup
    return Job("setup", s["seed"], str(out / "setup"), s["job"], s["settings"], tuple(s["checkpoints"]),
               runtime=RuntimeConfig(accept_partial_isolation=accept_partial_isolation))


def shared_setup(spec: SweepSpec, other: Path) -> Path:
    """The finished setup job of another sweep folder, when it is this spec's setup (same job, seed, settings)."""
    if spec.setup is None:
        raise ValueError(f"--setup-from {other}: spec {spec.name!r} has no [setup] job to share")
    setup = setup_job(spec, other)
    receipt = Path(setup.dir) / RECEIPT
    if not receipt.is_file():
        raise ValueError(f"--setup-from {other}: no finished setup job there ({receipt} is missing)")
    held = read_json(receipt)
    same = (held.get("sweep_settings"), held.get("seed"), held.get("kind")) == (setup.settings, setup.seed, setup.kind)
    if not same:
        raise ValueError(f"--setup-from {other}: its setup job ({held.get('kind')}, seed {held.get('seed')}, "
                         f"{held.get('sweep_settings')}) is not this spec's ({setup.kind}, seed {setup.seed}, "
                         f"{setup.settings}); name a sweep folder whose [setup] is this spec's, or leave out "
                         "--setup-from to run the setup")
    return Path(setup.dir).resolve()


def plan_jobs(spec: SweepSpec, out: Path, setup_dir: Path | None = None,
              runtime: RuntimeConfig | None = None) -> list[Job]:
    """The sweep's jobs, seed by seed (every arm of the first seed, then of the next): a sweep stopped part way
    holds whole seeds, which the paired comparisons can use, rather than some arms with no seed at all."""
    if spec.setup is not None:
        setup_dir = str(setup_dir or (out / "setup").resolve())
    return [Job(arm, seed, str(job_dir(out, arm, seed)), spec.job, spec.settings(arm), tuple(spec.checkpoints),
                setup_dir, runtime or RuntimeConfig()) for seed in spec.seeds for arm in spec.arms]


def clear_job(job: Job) -> None:
    """Remove what an unfinished or failed attempt left, so the job starts from nothing."""
    folder = Path(job.dir)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)


def job_identity(kind: str, settings: dict, seed: int, checkpoints) -> tuple:
    """What makes two jobs of any two sweeps the same computation."""
    return kind, json.dumps(settings, sort_keys=True), seed, tuple(checkpoints)


def check_reuse_folder(other: Path, named_by: str = "--reuse-from") -> None:
    """Refuse a folder that `glm53 sweep` did not write; `named_by` is the flag or argument the caller took it from."""
    if not (other / SPEC_FILE).is_file():
        raise ValueError(f"{named_by} {other}: not a sweep folder (no {SPEC_FILE}); name a folder `glm53 sweep` wrote")


def finished_jobs_in(other: Path) -> dict[tuple, Path]:
    """{job_identity: job folder} of another sweep folder's finished arm jobs."""
    check_reuse_folder(other)
    checkpoints = read_json(other / SPEC_FILE)["checkpoints"]  # every job of a sweep shares them
    found = {}
    for receipt in sorted(other.glob(f"runs/*/*/{RECEIPT}")):
        try:
            held = read_json(receipt)
        except ValueError:
            continue
        identity = job_identity(held.get("kind"), held.get("sweep_settings"), held.get("seed"), checkpoints)
        found[identity] = receipt.parent
    return found


def reuse_finished(spec: SweepSpec, jobs: list[Job], others: list[Path], log) -> int:
    """Copy into this sweep the finished jobs of other sweep folders that ran exactly one of its jobs (same job kind,
    settings, seed and checkpoints; the arm's name may differ), hard-linking files where the filesystem allows.
    Their receipts gain `reused_from`. Returns how many were copied. (Not for specs with a [setup] job: their
    arms start from that folder's own setup.)"""
    found = {}
    for other in others:
        found.update({k: v for k, v in finished_jobs_in(other).items() if k not in found})
    reused = 0
    for job in jobs:
        source = found.get(job_identity(job.kind, job.settings, job.seed, job.checkpoints))
        if source is None or is_finished(job) or Path(job.dir).resolve() == source.resolve():
            continue
        if Path(job.dir).exists():
            shutil.rmtree(job.dir)
        # the receipt comes last, so a copy cut short is an unfinished job, redone like any other
        shutil.copytree(source, job.dir, copy_function=_link_or_copy,
                        ignore=lambda folder, names: [n for n in names if is_housekeeping(n)
                                                      or (n == RECEIPT and Path(folder) == source)])
        receipt = read_json(source / RECEIPT)
        atomic_write_json(Path(job.dir) / RECEIPT, {**receipt, "arm": job.arm, "reused_from": str(source.resolve())})
        log(f"reused: {job.name} from {source}")
        reused += 1
    return reused


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another filesystem, or links not allowed
        shutil.copy2(src, dst)


def keep_without_checkpoints(src: str | os.PathLike, dst: str | os.PathLike, compress_over: int | None = None) -> int:
    """Copy a sweep folder's record (spec, log, analysis, report, charts and every finished job's receipts and logs)
    to `dst` without checkpoints, small enough to commit; `glm53 sweep SPEC --out DST` then continues the study,
    skipping the kept jobs. Unfinished jobs are left out (they are redone anyway). `compress_over`: a job's files
    larger than this many bytes (an RL run's rollouts and training receipt) are kept gzipped as NAME.gz, all but
    its receipt.json, which analyze and the sweep read. Returns the finished jobs kept."""
    src, dst = Path(src), Path(dst)
    check_reuse_folder(src, named_by="sweep folder")
    if dst.exists() and (dst / SPEC_FILE).is_file() and read_json(dst / SPEC_FILE) != \
            read_json(src / SPEC_FILE):
        raise ValueError(f"{dst} holds another sweep; keep each study in its own folder")
    dst.mkdir(parents=True, exist_ok=True)
    for name in (SPEC_FILE, SWEEP_LOG, "analysis.json", "REPORT.md"):
        if (src / name).is_file():
            shutil.copy2(src / name, dst / name)
    if (src / "charts").is_dir():
        shutil.copytree(src / "charts", dst / "charts", dirs_exist_ok=True)
    skip = lambda folder, names: [n for n in names if n.startswith("checkpoint-") or is_housekeeping(n)]  # noqa: E731
    kept = 0
    for receipt in sorted(src.glob(f"runs/*/*/{RECEIPT}")):
        target = dst / receipt.parent.relative_to(src)
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(receipt.parent, target, ignore=skip)
        if compress_over is not None:
            for path in [p for p in target.rglob("*") if p.is_file() and p.name != RECEIPT and not p.suffix == ".gz"
                         and p.stat().st_size > compress_over]:
                with open(path, "rb") as f, gzip.open(path.with_name(path.name + ".gz"), "wb") as out:
                    shutil.copyfileobj(f, out)
                path.unlink()
        kept += 1
    return kept


def run_sweep(spec: SweepSpec, out: str | os.PathLike, workers: int | None = None, threads_per_worker: int = 1,
              progress: bool = True, executor: Executor | None = None, log=print,
              setup_from: str | os.PathLike | None = None, report_to: str = "none",
              reuse_from: list[str | os.PathLike] = (), accept_partial_isolation: bool = False) -> dict:
    """Run what is left of the sweep; returns {"jobs", "skipped", "done", "failed": [{job, error}], "seconds"}.
    `setup_from`: another sweep folder whose finished setup job is this spec's; its result is used, not rerun.
    `report_to`: a tracker every job's training runs log to, one run per (arm, seed), grouped by the spec's name.
    `reuse_from`: other sweep folders whose finished jobs equal some of this sweep's (see `reuse_finished`).
    `accept_partial_isolation`: the jobs' isolation policy, recorded in their receipts (`glm53 sweep` checks it)."""
    out = Path(out)
    runtime = RuntimeConfig(report_to=report_to, report_group=spec.name,
                            accept_partial_isolation=accept_partial_isolation)
    shared = shared_setup(spec, Path(setup_from)) if setup_from is not None else None
    for other in reuse_from:  # refused before anything is written
        check_reuse_folder(Path(other))
    if reuse_from and spec.setup is not None:
        raise ValueError(f"--reuse-from: spec {spec.name!r} has a [setup] job, and its arms' results depend on that "
                         "setup's weights; use --setup-from to share the setup instead")
    workers = workers or default_workers(threads_per_worker)
    executor = executor or LocalExecutor(workers, threads_per_worker)
    existed = check_sweep_folder(spec, out)
    with run_lock(out):
        if not existed:
            atomic_write_json(out / SPEC_FILE, spec.to_dict())
        setup = setup_job(spec, out, accept_partial_isolation)
        if shared is not None:
            log(f"setup: using the finished setup job in {shared}")
        elif setup is not None and not is_finished(setup):
            _run_setup(setup, executor, workers, threads_per_worker, out, log)
        jobs = plan_jobs(spec, out, shared, runtime)
        if any(not is_finished(j) for j in jobs):  # jobs left to pair with the finished ones: their streams match
            check_stream_files([j for j in jobs if is_finished(j)])
        if reuse_from and reuse_finished(spec, jobs, [Path(o) for o in reuse_from], log):
            check_stream_files([j for j in jobs if is_finished(j)])  # and the jobs copied in
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


def _run_setup(setup: Job, executor: Executor, workers: int, threads_per_worker: int, out: Path, log) -> None:
    """The setup job alone, with every thread the arms will share (the local pool), before any arm starts."""
    clear_job(setup)
    if isinstance(executor, LocalExecutor):
        executor = LocalExecutor(1, workers * threads_per_worker, executor.source_root)
    log(f"setup: {setup.kind} job (seed {setup.seed}) in {setup.dir}, which every arm starts from")
    started, outcome = time.perf_counter(), {}

    def on_event(event: str, job: Job, detail: str) -> None:
        if event != "started":
            outcome[event] = detail
            with open(out / SWEEP_LOG, "a", encoding="utf-8") as f:
                f.write(json.dumps({"job": "setup", "status": event,
                                    "seconds": round(time.perf_counter() - started, 3),
                                    "error": detail or None}) + "\n")

    executor.run([setup], on_event)
    if "done" not in outcome:
        raise RuntimeError(f"the sweep's setup job failed: {outcome.get('failed')} "
                           f"(see {Path(setup.dir) / 'log.txt'}); no arm was started; fix the cause and rerun the "
                           "same command")
    log(f"setup done in {time.perf_counter() - started:.1f} s")
