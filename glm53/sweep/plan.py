"""`glm53 sweep --plan SPEC`: what a sweep would run and what it could detect, before anything runs. Writes
nothing: no sweep folder, no file (the optional timing trains in a temporary folder that is removed).

- the jobs: the [setup] job if any, then every arm x seed with its job kind and the arm's settings;
- the wall time on this machine, an estimate, from either source available:
  * `--time` (expression-pretrain jobs): the baseline arm's job is trained three times at a few updates (k
    updates scored once, 2k scored once, 2k scored twice) in a temporary folder; the differences give the
    seconds per update and per held-out scoring, the rest is the fixed cost; each job's estimate is
    fixed + updates x per-update + scorings x per-scoring, and the jobs are packed longest first onto the
    workers. Simplifications: every arm costs what the baseline does per update; workers do not slow each
    other (true while workers x threads <= cores); a setup job is not timed.
  * `--pilot DIR`: the median seconds of the pilot's finished jobs (its sweep-log.jsonl), for any job kind:
    right when the pilot ran this spec's jobs on this machine.
- with `--pilot DIR`: per comparison of the pilot, the smallest effect the planned seeds would detect at the
  pilot's spread, and with `--effect E` the seeds needed to detect E (glm53/evaluate/power.py: the pilot's
  centered differences stretched to n seeds by their quantiles, `design_like`), and the exact test's floor.
"""

from __future__ import annotations

import heapq
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from ..evaluate.power import ALPHA, design_like, exact_floor_seeds, seeds_needed, sign_flip_mde, bootstrap_mde
from .analysis import _magnitude, collect, load_receipts, saved_spec
from .runner import SWEEP_LOG, check_reuse_folder
from .spec import SweepSpec

TIMED_KINDS = ("expression-pretrain",)
TIMING_UPDATES = 4  # k: the timed runs train k and 2k updates


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def job_lines(spec: SweepSpec) -> list[str]:
    jobs = len(spec.arms) * len(spec.seeds) + (spec.setup is not None)
    lines = [f"sweep {spec.name}: {jobs} jobs" + (" (1 setup, then " if spec.setup else " (")
             + f"{len(spec.arms)} arms x {len(spec.seeds)} seeds of {spec.job})",
             f"  seeds: {', '.join(map(str, spec.seeds))}; checkpoints: {', '.join(spec.labels)}; "
             f"metrics: {', '.join(spec.metrics)}"]
    if spec.setup:
        lines.append(f"  setup: {spec.setup['job']} job, seed {spec.setup['seed']}, once before the arms: "
                     + ", ".join(f"{k} = {v}" for k, v in spec.setup["settings"].items()))
    for arm, overrides in spec.arms.items():
        own = ", ".join(f"{k} = {v}" for k, v in overrides.items()) or "the base settings"
        lines.append(f"  {arm}: {len(spec.seeds)} {spec.job} jobs ({own})" + (" [baseline]" if arm == spec.baseline
                                                                                else ""))
    lines.append(f"  comparisons ({len(spec.comparisons)}, Holm over them): "
                 + ", ".join(f"{a} - {b}" for a, b in spec.comparisons))
    return lines


def pack(seconds: list[float], workers: int) -> float:
    """Wall time of jobs packed longest first onto `workers` equal workers."""
    loads = [0.0] * max(1, workers)
    for s in sorted(seconds, reverse=True):
        heapq.heapreplace(loads, loads[0] + s)
    return max(loads)


def _timed_run(settings: dict, seed: int, updates: int, scored: tuple[int, ...], folder: Path) -> float:
    from .jobs import job_kind

    kind = job_kind("expression-pretrain")
    cfg = kind.make({**settings, "steps": updates}, seed, scored, folder)
    started = time.perf_counter()
    kind.run(cfg, folder, lambda *_: None)
    return time.perf_counter() - started


def time_jobs(spec: SweepSpec, threads: int) -> dict:
    """Per-job seconds of each arm from three short runs of the baseline arm (see the module's docstring)."""
    if spec.job not in TIMED_KINDS:
        raise ValueError(f"--time trains {', '.join(TIMED_KINDS)} jobs only; for {spec.job} jobs give --pilot DIR, "
                         "a sweep of them that ran on this machine, whose job times are used instead")
    import torch

    from .jobs import job_kind

    settings, seed, k = spec.settings(spec.baseline), spec.seeds[0], TIMING_UPDATES
    held = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with tempfile.TemporaryDirectory(prefix="glm53-plan-") as folder:
            _timed_run(settings, seed, 1, (1,), Path(folder))  # warm-up: first-call costs are not per-job costs
            once_k = _timed_run(settings, seed, k, (k,), Path(folder))
            once_2k = _timed_run(settings, seed, 2 * k, (2 * k,), Path(folder))
            twice_2k = _timed_run(settings, seed, 2 * k, (k, 2 * k), Path(folder))
    finally:
        torch.set_num_threads(held)
    per_update = max((once_2k - once_k) / k, 1e-6)  # clipped: timing noise must not make updates free
    per_scoring = max(twice_2k - once_2k, 0.0)
    fixed = max(once_k - k * per_update - 2 * per_scoring, 0.0)  # a run scores before training and at each point
    steps = {arm: job_kind(spec.job).make(spec.settings(arm), seed, spec.checkpoints, Path(".")).steps
             for arm in spec.arms}
    scorings = 1 + len(spec.checkpoints)
    return {"per_update": per_update, "per_scoring": per_scoring, "fixed": fixed,
            "job_seconds": {arm: fixed + steps[arm] * per_update + scorings * per_scoring for arm in spec.arms}}


def pilot_job_seconds(pilot: Path) -> float | None:
    """The median seconds of the pilot's finished arm jobs, from its sweep-log.jsonl."""
    log = pilot / SWEEP_LOG
    if not log.is_file():
        return None
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    done = [r["seconds"] for r in rows if r.get("status") == "done" and r.get("job") != "setup"]
    return statistics.median(done) if done else None


def wall_lines(spec: SweepSpec, workers: int, threads: int, timing: dict | None,
               pilot_seconds: float | None) -> list[str]:
    from ..runtime.distributed import available_cores

    jobs = len(spec.arms) * len(spec.seeds)
    lines = [f"wall time on this machine ({cpu_name()}, {available_cores()} usable cores; {workers} workers x "
             f"{threads} threads), an estimate:"]
    if timing:
        per_job = [timing["job_seconds"][arm] for arm in spec.arms for _ in spec.seeds]
        lines.append(f"  from a short timing of {spec.baseline} ({TIMING_UPDATES} and {2 * TIMING_UPDATES} updates): "
                     f"{timing['per_update'] * 1000:.0f} ms an update, {timing['per_scoring']:.2f} s a scoring, "
                     f"{timing['fixed']:.2f} s fixed; about {_duration(pack(per_job, workers))} for the {jobs} jobs")
    if pilot_seconds is not None:
        lines.append(f"  from the pilot's job times (median {pilot_seconds:.1f} s a job): about "
                     f"{_duration(pack([pilot_seconds] * jobs, workers))} for the {jobs} jobs")
    if not timing and pilot_seconds is None:
        lines.append("  not timed: add --time (a few seconds of training in a temporary folder) or --pilot DIR")
    if spec.setup and (timing or pilot_seconds is not None):
        lines.append("  plus the setup job, not included")
    if workers * threads > available_cores():
        lines.append(f"  ({workers} x {threads} threads exceed the {available_cores()} cores: jobs will slow each "
                     "other, so the real time is longer)")
    return lines


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min" if seconds < 7200 else \
        f"{seconds / 3600:.1f} h"


def pilot_differences(spec: SweepSpec, pilot: Path, metric: str | None) -> tuple[str, str, dict[str, list[float]]]:
    """(metric, checkpoint, {"arm - against": paired differences}) of the pilot's comparisons with 2+ paired
    seeds, at the planned spec's last checkpoint when the pilot scored it, else at the pilot's last."""
    check_reuse_folder(pilot, named_by="--pilot")
    held = saved_spec(pilot)
    metric = metric or spec.metrics[0]
    if metric not in held.metrics:
        raise ValueError(f"--pilot {pilot}: its spec has no metric {metric!r} (it has {', '.join(held.metrics)}); "
                         "choose one with --metric")
    label = spec.labels[-1] if spec.labels[-1] in held.labels else held.labels[-1]
    values, _ = collect(held, load_receipts(held, pilot))
    found = {}
    for arm, against in held.comparisons:
        a, b = values[arm][label][metric], values[against][label][metric]
        d = [a[s] - b[s] for s in a if s in b]
        if len(d) >= 2:
            found[f"{arm} - {against}"] = d
    if not found:
        raise ValueError(f"--pilot {pilot}: no comparison has 2 or more seeds both arms finished at {label} for "
                         f"{metric}; let the pilot run further, or name a finished one")
    return metric, label, found


def power_lines(spec: SweepSpec, pilot: Path, metric: str | None, effect: float | None) -> list[str]:
    metric, label, pilot_diffs = pilot_differences(spec, pilot, metric)
    m, n, seed = len(spec.comparisons), len(spec.seeds), spec.analysis_seed
    lines = [f"power at the pilot's spread ({pilot}, {metric} at {label}; exact sign-flip at alpha {ALPHA} / {m} "
             f"comparisons, Holm's first step; paired bootstrap 95%):",
             f"  the exact test needs at least {exact_floor_seeds(ALPHA, m)} seeds to reject anything "
             f"(2 / 2^n <= {ALPHA / m:.3g}); this spec has {n}"]
    needed = []
    for name, d in pilot_diffs.items():
        design = design_like(d, n)
        flip = sign_flip_mde(design, ALPHA, m, seed, resamples=20_000)["mde"]
        boot = bootstrap_mde(design, seed)["mde"]
        flip_text = "none (too few seeds)" if flip is None else _magnitude(metric, flip)
        line = (f"  {name} (pilot: {len(d)} seeds, sd {np.std(d, ddof=1):.3g}): with {n} seeds, smallest "
                f"detectable {flip_text} (sign-flip) / {_magnitude(metric, boot)} (bootstrap)")
        if effect is not None:
            need = seeds_needed(d, effect, m, seed)
            needed.append(need)
            line += (f"; to detect {_magnitude(metric, effect)}: {_seeds(need['sign_flip'], need['most'])} "
                     f"(sign-flip), {_seeds(need['bootstrap'], need['most'])} (bootstrap)")
        lines.append(line)
    lines.append("  (the percentile bootstrap is liberal at few seeds, its interval too narrow below about 10: below "
                 "that, trust the sign-flip figures)")
    if needed:
        worst = [r["sign_flip"] for r in needed]
        lines.append(f"  seeds for every comparison to detect {_magnitude(metric, effect)} (sign-flip): "
                     + (_seeds(max(worst), needed[0]["most"]) if None not in worst else
                        f"more than {needed[0]['most']}"))
    return lines


def _seeds(n: int | None, most: int) -> str:
    return f"more than {most} seeds" if n is None else f"{n} seeds"


def plan_text(spec: SweepSpec, workers: int, threads: int, pilot: str | None = None, effect: float | None = None,
              metric: str | None = None, timed: bool = False) -> str:
    """Everything `glm53 sweep --plan` prints; reads the pilot, writes nothing."""
    if effect is not None and effect <= 0:
        raise ValueError(f"--effect must be > 0 (in the metric's units: 0.03 is 3 points of a rate), got {effect}")
    if effect is not None and pilot is None:
        raise ValueError("--effect needs --pilot DIR: the seeds needed depend on the spread a pilot sweep measured")
    if metric is not None and pilot is None:
        raise ValueError("--metric chooses the pilot's metric; add --pilot DIR")
    power = power_lines(spec, Path(pilot), metric, effect) if pilot is not None else []
    timing = time_jobs(spec, threads) if timed else None
    pilot_seconds = pilot_job_seconds(Path(pilot)) if pilot is not None else None
    lines = job_lines(spec) + wall_lines(spec, workers, threads, timing, pilot_seconds) + power
    if pilot is None:
        lines.append("power: add --pilot DIR (a sweep of the same metric) for the smallest detectable effect, and "
                     "--effect E for the seeds needed")
    return "\n".join(lines)
