"""The wall-time estimate of `glm53 sweep --plan`: from a short timing on this machine (`--time`) or from a
pilot sweep's job times (`--pilot DIR`). Writes nothing: the short timing trains in a temporary folder that is
removed, whatever happens.

- `--time`, expression-pretrain jobs: the baseline arm's job is trained three times at a few updates (k updates
  scored once, 2k scored once, 2k scored twice) in a temporary folder; the differences give the seconds per
  update and per held-out scoring, the rest is the fixed cost; each job's estimate is fixed + updates x
  per-update + scorings x per-scoring, and the jobs are packed longest first onto the workers.
- `--time`, pretrain, pretrain-eval and pretrain-splits jobs: the baseline arm's own job (its model and batch) runs
  once at PRETRAIN_TIMING_UPDATES updates with a checkpoint at the last, and (pretrain-eval) one task per family
  scored at it, or (pretrain-splits) its whole scoring, in a temporary folder. The seconds per update come from the
  training receipt's tokens per second (optimizer steps only); the rest of the pretraining, over its two dev scorings
  (step 0 and the last), is the seconds per checkpoint scoring (the fixed cost included: an overestimate); the
  evaluation after it is the seconds per task per family. Each job: updates x per-update + (checkpoints + 1) x
  per-scoring + eval_per_family x evaluated checkpoints x per-evaluation. Untrained weights decode to the token cap,
  so the scoring figures are upper bounds; a trained model that stops early scores faster.
- `--time`, rl-eval and rl-splits jobs: they start from a trained checkpoint. The start is the finished setup of
  `--setup-from DIR` when given (real weights: realistic figures); else the spec's pretraining [setup] shortened as
  above, whose figures also estimate the setup's own time; its untrained weights sample completions of other lengths
  than trained ones (measured: rl-screen's rollouts 35 ms on untrained weights, 79 ms on its real start), so those
  figures are rough; else the spec's `init` where it exists. The baseline's RL runs RL_TIMING_UPDATES updates of its
  own size: the steps' own seconds over their rollouts give the seconds per rollout, the rest of the run (loading,
  saves, the sandbox's start) the fixed cost. Each final evaluation (rl-eval: greedy and sampled; rl-splits: each
  split) is timed on up to RL_TIMING_TASKS tasks spread over it and scaled to the whole. Each job: fixed + rollouts
  (groups x group size) x per-rollout + the evaluation; an rl-splits sweep scores its start once more (its jobs share
  it). Plain rl jobs are not timed.
- Simplifications: every arm evaluates as the baseline does, and (pretraining) trains at its speed; RL arms differ
  by their rollouts only (DAPO's redraws and extra passes are not counted); workers do not slow each other (true
  while workers x threads <= cores). The eval kind is not timed (it points to `--pilot`).
- `--pilot DIR`: the median seconds of the pilot's finished jobs (its sweep-log.jsonl), for any job kind: right
  when the pilot ran this spec's jobs on this machine.
"""

from __future__ import annotations

import heapq
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from ..checkpoints.names import checkpoint_name
from ..runtime.distributed import available_cores
from ..verify.verifier import close_default_pool
from .jobs import final_evaluation, job_kind
from .runner import SWEEP_LOG, shared_setup
from .scored_per_split import split_evaluation
from .spec import SweepSpec, resolve_setup

PRETRAIN_KINDS = ("pretrain", "pretrain-eval", "pretrain-splits")
RL_KINDS = ("rl-eval", "rl-splits")  # plain rl jobs are not timed (dev scorings at every checkpoint)
TIMED_KINDS = ("expression-pretrain", *PRETRAIN_KINDS, *RL_KINDS)
TIMING_UPDATES = 4  # k: the timed expression-pretrain runs train k and 2k updates
PRETRAIN_TIMING_UPDATES = 2  # the timed pretrain run: real-size steps, so as few as give a per-update figure
RL_TIMING_UPDATES = 2  # the timed RL run: optimizer steps of the baseline's own size
RL_TIMING_TASKS = 4  # tasks of each final evaluation timed (spread over the split), scaled to the whole


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def pack(seconds: list[float], workers: int) -> float:
    """Wall time of jobs packed longest first onto `workers` equal workers."""
    loads = [0.0] * max(1, workers)
    for s in sorted(seconds, reverse=True):
        heapq.heapreplace(loads, loads[0] + s)
    return max(loads)


def _timed_run(settings: dict, seed: int, updates: int, scored: tuple[int, ...], folder: Path) -> float:
    kind = job_kind("expression-pretrain")
    cfg = kind.make({**settings, "steps": updates}, seed, scored, folder)
    started = time.perf_counter()
    kind.run(cfg, folder, lambda *_: None)
    return time.perf_counter() - started


def _pretrain_shape(spec: SweepSpec, job) -> tuple:
    """(pretrain config, evaluated checkpoints, tasks per family) of a pretrain, pretrain-eval or pretrain-splits
    job (pretrain-splits: its whole scoring counts as one "family", timed at full size)."""
    if spec.job == "pretrain-eval":
        return job.pretrain, len(job.extra.eval_at), job.extra.eval_per_family
    if spec.job == "pretrain-splits":
        return job.pretrain, len(set(job.pretrain.checkpoints) | {job.pretrain.steps}), 1
    return job, 0, 0


def _short_pretrain(kind_name: str, settings: dict, seed: int, name: str, folder: Path) -> dict:
    """One run of a pretrain, pretrain-eval or pretrain-splits job shortened to PRETRAIN_TIMING_UPDATES updates
    (a checkpoint at the last) in `folder`: seconds per update (optimizer steps only, from the training receipt's
    tokens per second), per dev scoring (the rest of the pretraining over its two scorings, the fixed cost
    included), and whatever followed the pretraining (the job's evaluation)."""
    kind, k = job_kind(kind_name), PRETRAIN_TIMING_UPDATES
    short = {**settings, "steps": k, "warmup_steps": 0}
    if kind_name == "pretrain-eval":
        short.update(eval_at=[k], eval_per_family=1)
    try:
        job = kind.make(short, seed, (k,), folder)
    except ValueError as err:
        raise ValueError(f"--time: {name}'s job cannot be shortened to {k} updates ({err}); for an estimate give "
                         "--pilot DIR, a sweep of a few of these jobs on this machine") from None
    started = time.perf_counter()
    receipt = kind.run(job, folder, lambda *_: None)
    total = time.perf_counter() - started
    cfg = job.pretrain if hasattr(job, "pretrain") else job
    training = json.loads((Path(cfg.out) / "training-receipt.json").read_text())
    per_update = cfg.batch_size * cfg.sequence_length / training["train_tokens_per_second"]
    pretraining = receipt["elapsed_seconds"]
    return {"per_update": per_update, "per_scoring": max(pretraining - k * per_update, 0.0) / 2,
            "per_evaluation": max(total - pretraining, 0.0), "checkpoint": Path(cfg.out) / checkpoint_name(k)}


def pretrain_seconds(cfg, short: dict) -> float:
    """A pretraining's seconds from a short run's figures: its updates, and a dev scoring before training and
    at each checkpoint and the last step."""
    return cfg.steps * short["per_update"] + (1 + len(set(cfg.checkpoints or ()) | {cfg.steps})) * short["per_scoring"]


def time_pretrain_jobs(spec: SweepSpec) -> dict:
    """Per-job seconds of each arm from one short run of the baseline arm's job (see the module's docstring)."""
    kind, seed, k = job_kind(spec.job), spec.seeds[0], PRETRAIN_TIMING_UPDATES
    with tempfile.TemporaryDirectory(prefix="glm53-plan-") as folder:
        (Path(folder) / "setup").mkdir()
        (Path(folder) / "short").mkdir()
        setup_dir = _corpus_setup(spec, Path(folder) / "setup")
        short = _short_pretrain(spec.job, resolve_setup(spec.settings(spec.baseline), setup_dir), seed,
                                spec.baseline, Path(folder) / "short")
        per_update, per_scoring = short["per_update"], short["per_scoring"]
        per_evaluation = short["per_evaluation"] if spec.job != "pretrain" else 0.0
        job_seconds = {}
        for arm in spec.arms:
            made = kind.make(resolve_setup(spec.settings(arm), setup_dir), seed, spec.checkpoints, Path("."))
            cfg, evaluated, per_family = _pretrain_shape(spec, made)
            job_seconds[arm] = pretrain_seconds(cfg, short) + evaluated * per_family * per_evaluation
    label = {"pretrain-eval": f"{k} updates, one task per family", "pretrain-splits": f"{k} updates, one scoring of "
             f"the splits"}.get(spec.job, f"{k} updates")
    return {"per_update": per_update, "per_scoring": per_scoring, "per_evaluation": per_evaluation,
            "evaluation_unit": "a scoring of the splits" if spec.job == "pretrain-splits" else "an evaluation per task "
                                                                                               "per family",
            "job_seconds": job_seconds, "short": label}


def _corpus_setup(spec: SweepSpec, folder: Path) -> str | None:
    """For a spec whose [setup] builds the corpus its arms read, that corpus built in `folder` (seconds: the standard
    library's), so the short run reads what the jobs will; else None."""
    if spec.setup is None or spec.setup["job"] != "corpus":
        return None
    kind = job_kind("corpus")
    kind.run(kind.make(spec.setup["settings"], spec.setup["seed"], (), folder), folder, lambda *_: None)
    return str(folder)


def _rl_start(spec: SweepSpec, settings: dict, setup_from: str | None, folder: Path) -> tuple[dict, dict]:
    """The baseline's settings with a start checkpoint that exists, and where it came from: the finished setup of
    `setup_from`; else, for a spec with a pretraining [setup], that setup shortened to PRETRAIN_TIMING_UPDATES
    updates here (its figures also estimate the setup's own time); else the spec's own `init`."""
    if setup_from is not None:
        return resolve_setup(settings, str(shared_setup(spec, Path(setup_from)))), {
            "start": f"the finished setup in {setup_from}", "setup_reused": True}
    if spec.setup is not None and spec.setup["job"] in PRETRAIN_KINDS:
        setup = spec.setup
        short = _short_pretrain(setup["job"], setup["settings"], setup["seed"], "the setup", folder / "setup")
        start = {"start": f"a {PRETRAIN_TIMING_UPDATES}-update checkpoint of the setup's model (untrained)"}
        if setup["job"] == "pretrain":  # the other kinds' evaluations after pretraining are not timed here
            cfg = job_kind("pretrain").make(setup["settings"], setup["seed"], tuple(setup["checkpoints"]), Path("."))
            start["setup"] = pretrain_seconds(cfg, short)
        return {**settings, "init": str(short["checkpoint"])}, start
    init = resolve_setup(settings, None).get("init") or ""
    if spec.setup is None and init and Path(init).is_dir():
        return settings, {"start": f"its start {init}"}
    if spec.setup is not None:
        raise ValueError(f"--time: {spec.name}'s [setup] is a {spec.setup['job']} job, which a plan cannot shorten "
                         "into a start; add --setup-from DIR (a sweep of this spec whose setup finished)")
    raise ValueError(f"--time: the start checkpoint {init or '(init is not set)'} does not exist; make it first (the "
                     "spec's init), or leave out --time")


def _rl_evaluations(spec: SweepSpec, job) -> list[tuple[list, Any]]:
    """(tasks, evaluation settings) of each evaluation that ends the job: rl-eval's greedy and sampled, rl-splits'
    greedy scoring of each split."""
    if spec.job == "rl-eval":
        tasks, greedy, sampled = final_evaluation(job)
        return [(tasks, config) for config in (greedy, sampled) if config is not None]
    by_split, config = split_evaluation(job)
    return [(tasks, config) for tasks in by_split.values()]


def time_rl_jobs(spec: SweepSpec, setup_from: str | None = None) -> dict:
    """Per-job seconds of each arm of an rl-eval or rl-splits spec from one short run of the baseline's job (the
    module's docstring). Its sandbox workers are closed before it returns."""
    from ..evaluate.evaluate import evaluate
    from ..train.rl import rl_train
    from .jobs import job_kind, load_final

    kind, seed = job_kind(spec.job), spec.seeds[0]
    try:
        with tempfile.TemporaryDirectory(prefix="glm53-plan-") as folder:
            settings, start = _rl_start(spec, spec.settings(spec.baseline), setup_from, Path(folder))
            rl = kind.make(settings, seed, (), Path(folder) / "job").rl
            groups = min(rl.groups, RL_TIMING_UPDATES * rl.groups_per_step)
            short = kind.make({**settings, "groups": groups}, seed, (), Path(folder) / "job")
            started = time.perf_counter()
            receipt = rl_train(short.rl, log=lambda *_: None)
            model = load_final(short.rl, receipt).model
            whole = time.perf_counter() - started
            stepping = sum(step["seconds"] for step in receipt["steps"])
            per_rollout = stepping / max(1, sum(step["rollouts"] for step in receipt["steps"]))
            fixed = max(whole - stepping, 0.0)  # loading, the checkpoints' saves, the sandbox's start
            evaluation = 0.0
            for tasks, config in _rl_evaluations(spec, short):
                sample = tasks[:: max(1, len(tasks) // RL_TIMING_TASKS)][:RL_TIMING_TASKS]
                if sample:
                    begun = time.perf_counter()
                    evaluate(model, sample, config, accepted_partial=short.rl.runtime.accept_partial_isolation)
                    evaluation += (time.perf_counter() - begun) / len(sample) * len(tasks)
    finally:
        close_default_pool()
    job_seconds = {}
    for arm in spec.arms:
        arm_rl = kind.make(spec.settings(arm), seed, (), Path(".")).rl
        job_seconds[arm] = fixed + per_rollout * arm_rl.groups * arm_rl.group_size + evaluation
    updates = -(-groups // rl.groups_per_step)
    timing = {"parts": [f"{per_rollout * 1000:.0f} ms a rollout", f"{fixed:.2f} s fixed",
                        f"{evaluation:.2f} s the evaluation after RL"],
              "job_seconds": job_seconds, "bounds": "untrained" in start["start"],
              "short": f"{updates} update{'s' if updates != 1 else ''} of RL from {start['start']}, up to "
                       f"{RL_TIMING_TASKS} tasks of each {'split' if spec.job == 'rl-splits' else 'evaluation'}"}
    timing.update({key: start[key] for key in ("setup", "setup_reused") if key in start})
    if spec.job == "rl-splits":
        timing["once"] = evaluation  # the start's scores: the first job computes them, the others read them
    return timing


def time_jobs(spec: SweepSpec, threads: int, setup_from: str | None = None) -> dict:
    """Per-job seconds of each arm from short runs of the baseline arm (see the module's docstring); only for
    TIMED_KINDS."""
    import torch

    if spec.job in PRETRAIN_KINDS or spec.job in RL_KINDS:
        held = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            return time_pretrain_jobs(spec) if spec.job in PRETRAIN_KINDS else time_rl_jobs(spec, setup_from)
        finally:
            torch.set_num_threads(held)
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
    scorings = 1 + (len(spec.checkpoints) or 1)  # no checkpoints: each job is scored once, at its end
    return {"per_update": per_update, "per_scoring": per_scoring, "fixed": fixed,
            "job_seconds": {arm: fixed + steps[arm] * per_update + scorings * per_scoring for arm in spec.arms},
            "short": f"{k} and {2 * k} updates"}


def pilot_job_seconds(pilot: Path) -> float | None:
    """The median seconds of the pilot's finished arm jobs, from its sweep-log.jsonl (a line that is not JSON is
    refused, naming the file and the line)."""
    log = pilot / SWEEP_LOG
    if not log.is_file():
        return None
    rows = []
    for number, line in enumerate(log.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise ValueError(f"--pilot: {log} line {number} is not JSON ({error.msg}, column {error.colno}; a sweep "
                             "stopped mid-write?): delete that line, or rerun the pilot's sweep to finish it") from None
    done = [r["seconds"] for r in rows if isinstance(r, dict) and r.get("status") == "done"
            and r.get("job") != "setup" and isinstance(r.get("seconds"), (int, float))]
    return statistics.median(done) if done else None


def untimed_line(spec: SweepSpec) -> str:
    return (f"  --time does not time {spec.job} jobs (they start from a trained checkpoint, the setup job's or a "
            "named one, which a plan does not make): for an estimate, run a few on this machine (glm53 sweep "
            f"{spec.name} --seeds S --out DIR) and give --pilot DIR")


def wall_lines(spec: SweepSpec, workers: int, threads: int, timing: dict | None, pilot_seconds: float | None,
               asked_time: bool = False) -> list[str]:
    jobs = len(spec.arms) * len(spec.seeds)
    lines = [f"wall time on this machine ({cpu_name()}, {available_cores()} usable cores; {workers} workers x "
             f"{threads} threads), an estimate:"]
    if timing:
        per_job = [timing["job_seconds"][arm] for arm in spec.arms for _ in spec.seeds]
        if "parts" in timing:  # RL kinds
            parts = timing["parts"]
            bounds = " (decoding timed on untrained weights: rough; --setup-from DIR times a real start)" \
                if timing.get("bounds") else ""
            per_job[0] += timing.get("once", 0.0)  # the start's scores: the first job computes them, the rest read
        else:
            parts = [f"{timing['per_update'] * 1000:.0f} ms an update", f"{timing['per_scoring']:.2f} s a scoring"]
            parts += [f"{timing['fixed']:.2f} s fixed"] if "fixed" in timing else []
            unit = timing.get("evaluation_unit", "an evaluation per task per family")
            parts += [f"{timing['per_evaluation']:.2f} s {unit}"] if timing.get("per_evaluation") else []
            bounds = "" if "fixed" in timing else " (scorings timed on untrained weights: upper bounds)"
        lines.append(f"  from a short timing of {spec.baseline} ({timing['short']}): {', '.join(parts)}; about "
                     f"{_duration(pack(per_job, workers))} for the {jobs} jobs" + bounds)
    if pilot_seconds is not None:
        lines.append(f"  from the pilot's job times (median {pilot_seconds:.1f} s a job): about "
                     f"{_duration(pack([pilot_seconds] * jobs, workers))} for the {jobs} jobs")
    if spec.job not in TIMED_KINDS and (asked_time or pilot_seconds is None):
        lines.append(untimed_line(spec))
    elif not timing and pilot_seconds is None:
        lines.append("  not timed: add --time (a few updates of training in a temporary folder) or --pilot DIR")
    if spec.setup and timing and "setup" in timing:
        lines.append(f"  plus the setup job, run first and alone: about {_duration(timing['setup'])} (from the same "
                     "short pretraining; its dev scorings timed on untrained weights: an upper bound)")
    elif spec.setup and (timing or pilot_seconds is not None) and not (timing or {}).get("setup_reused"):
        lines.append("  plus the setup job, not included" + (" (--setup-from reuses a finished one)"
                                                             if timing and "parts" in timing else ""))
    if workers * threads > available_cores():
        lines.append(f"  ({workers} x {threads} threads exceed the {available_cores()} cores: jobs will slow each "
                     "other, so the real time is longer)")
    return lines


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min" if seconds < 7200 else \
        f"{seconds / 3600:.1f} h"


