"""`glm53 sweep --plan SPEC`: what a sweep would run and what it could detect, before anything runs. Writes
nothing: no sweep folder, no file (the optional timing trains in a temporary folder that is removed).

- the jobs: the [setup] job if any, then every arm x seed with its job kind and the arm's settings, and the
  tests `glm53 analyze` will make: the comparisons (Holm over them) and each arm's `*_lift` metrics against zero
  (Holm over an arm's lift metrics);
- the wall time on this machine, an estimate (glm53/sweep/timing.py): `--time` (a short timing) or `--pilot DIR`
  (the pilot's job times);
- with `--pilot DIR`: for the metric (the spec's first, or `--metric`), per comparison of the pilot and, for a
  lift metric, per arm's lift test, the critical shift the planned seeds would detect at the pilot's spread (about
  50% power: glm53/evaluate/power.py), and with `--effect E` the seeds needed to detect E (the fewest from which
  on the figure stays <= E; the pilot's centered differences stretched to n seeds by their quantiles and
  rescaled to the pilot's sample SD, `design_like`), and the exact test's floor.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..evaluate.power import (ALPHA, BOOTSTRAP_FEWEST, bootstrap_mde, design_like, exact_floor_seeds, seeds_needed,
                              sign_flip_mde)
from .analysis import collect, load_receipts, saved_spec
from .runner import check_reuse_folder
from .spec import SweepSpec
from .timing import TIMED_KINDS, pilot_job_seconds, time_jobs, wall_lines
from .wording import magnitude, seeds


def lift_metrics(spec: SweepSpec) -> list[str]:
    return [m for m in spec.metrics if m.endswith("_lift")]


def job_lines(spec: SweepSpec) -> list[str]:
    jobs = len(spec.arms) * len(spec.seeds) + (spec.setup is not None)
    lines = [f"sweep {spec.name}: {jobs} jobs" + (" (1 setup, then " if spec.setup else " (")
             + f"{len(spec.arms)} arms x {seeds(len(spec.seeds))} of {spec.job})",
             f"  seeds: {', '.join(map(str, spec.seeds))}; checkpoints: {', '.join(spec.labels)}; "
             f"metrics: {', '.join(spec.metrics)}"]
    if spec.recipes:  # opened already: the settings below are the ones they gave
        lines.append("  recipes (glm53/recipes/): " + ", ".join(f"[{t}] {r}" for t, r in spec.recipes.items()))
    if spec.setup:
        lines.append(f"  setup: {spec.setup['job']} job, seed {spec.setup['seed']}, once before the arms: "
                     + ", ".join(f"{k} = {v}" for k, v in spec.setup["settings"].items()))
    for arm, overrides in spec.arms.items():
        own = ", ".join(f"{k} = {v}" for k, v in overrides.items()) or "the base settings"
        lines.append(f"  {arm}: {len(spec.seeds)} {spec.job} jobs ({own})" + (" [baseline]" if arm == spec.baseline
                                                                                else ""))
    lines.append(f"  comparisons ({len(spec.comparisons)}, Holm over them): "
                 + ", ".join(f"{a} - {b}" for a, b in spec.comparisons) if spec.comparisons else "  comparisons: none")
    lifts = lift_metrics(spec)
    if lifts:
        lines.append(f"  lift tests: each arm's {len(lifts)} lift metrics against zero, Holm over them: "
                     + ", ".join(lifts))
    return lines


def pilot_families(spec: SweepSpec, pilot: Path, metric: str | None) -> tuple[str, str, list[dict]]:
    """(metric, checkpoint, [{"name", "differences", "holm_over"}]): the pilot's comparisons and, for a lift metric,
    its arms' lift tests, with 2+ finite paired seeds, at the planned spec's last checkpoint when the pilot scored
    it, else at the pilot's last. Holm's family sizes are the planned spec's."""
    check_reuse_folder(pilot, named_by="--pilot")
    held = saved_spec(pilot)
    metric = metric or spec.metrics[0]
    if metric not in held.metrics:
        raise ValueError(f"--pilot {pilot}: its spec has no metric {metric!r} (it has {', '.join(held.metrics)}); "
                         "choose one with --metric")
    lifted = metric.endswith("_lift") and metric in lift_metrics(spec)
    if not spec.comparisons and not lifted:
        raise ValueError(f"--plan: {spec.name} has no comparisons and {metric!r} is not one of its lift metrics "
                         f"tested against zero; choose one with --metric ({', '.join(lift_metrics(spec)) or 'none'})")
    label = spec.labels[-1] if spec.labels[-1] in held.labels else held.labels[-1]
    values, _ = collect(held, load_receipts(held, pilot))
    found = []
    for arm, against in held.comparisons if spec.comparisons else ():
        a, b = values[arm][label][metric], values[against][label][metric]
        d = [a[s] - b[s] for s in a if s in b and math.isfinite(a[s] - b[s])]
        if len(d) >= 2:
            found.append({"name": f"{arm} - {against}", "differences": d, "holm_over": len(spec.comparisons)})
    for arm in held.arms if lifted else ():
        d = [v for v in values[arm][label][metric].values() if math.isfinite(v)]
        if len(d) >= 2:
            found.append({"name": f"{arm} {metric} against zero", "differences": d,
                          "holm_over": len(lift_metrics(spec))})
    if not found:
        raise ValueError(f"--pilot {pilot}: no comparison or lift test has 2 or more seeds finished at {label} for "
                         f"{metric}; let the pilot run further, or name a finished one")
    return metric, label, found


def _bootstrap_seeds(n: int | None, most: int) -> str:
    if n is None:
        return f"more than {most} seeds (bootstrap)"
    if n <= BOOTSTRAP_FEWEST:
        return f"{BOOTSTRAP_FEWEST} or fewer (bootstrap; below {BOOTSTRAP_FEWEST} seeds use the sign-flip figure)"
    return f"{n} seeds (bootstrap)"


def _family_line(metric: str, family: dict, n: int, seed: int, effect: float | None) -> tuple[str, dict | None]:
    d, m = family["differences"], family["holm_over"]
    design = design_like(d, n)
    flip = sign_flip_mde(design, ALPHA, m, seed, resamples=20_000)["mde"]
    boot = bootstrap_mde(design, seed)["mde"] if n >= 2 else None
    flip_text = f"none ({seeds(n)} cannot reach p <= {ALPHA / m:.3g})" if flip is None else magnitude(metric, flip)
    boot_text = "none (one seed has no interval)" if boot is None else magnitude(metric, boot)
    line = (f"  {family['name']} (pilot: {len(d)} seeds, sd {np.std(d, ddof=1):.3g}; Holm over {m}): with "
            f"{seeds(n)}, smallest detectable {flip_text} (sign-flip) / {boot_text} (bootstrap)")
    if effect is None:
        return line, None
    need = seeds_needed(d, effect, m, seed)
    flip_need = f"more than {need['most']} seeds" if need["sign_flip"] is None else seeds(need["sign_flip"])
    return (line + f"; to detect {magnitude(metric, effect)}: {flip_need} (sign-flip), "
            f"{_bootstrap_seeds(need['bootstrap'], need['most'])}"), need


def power_lines(spec: SweepSpec, pilot: Path, metric: str | None, effect: float | None) -> list[str]:
    metric, label, families = pilot_families(spec, pilot, metric)
    n, seed = len(spec.seeds), spec.analysis_seed
    holm_sizes = sorted({f["holm_over"] for f in families})
    lines = [f"power at the pilot's spread ({pilot}, {metric} at {label}; exact sign-flip at alpha {ALPHA} / m, "
             "Holm's first step; paired bootstrap 95%; the critical shift, about 50% power, not the 80% figure):"]
    for m in holm_sizes:
        lines.append(f"  with Holm over {m}, the exact test needs at least {exact_floor_seeds(ALPHA, m)} seeds to "
                     f"reject anything (2 / 2^n <= {ALPHA / m:.3g}); this spec has {n}")
    needed = []
    for family in families:
        line, need = _family_line(metric, family, n, seed, effect)
        lines.append(line)
        needed += [need] if need else []
    lines.append(f"  (the percentile bootstrap is liberal at few seeds, its interval too narrow below about "
                 f"{BOOTSTRAP_FEWEST}: below that, trust the sign-flip figures)")
    if needed:
        worst = [r["sign_flip"] for r in needed]
        lines.append(f"  seeds for every test above to detect {magnitude(metric, effect)} (sign-flip): "
                     + (seeds(max(worst)) if None not in worst else f"more than {needed[0]['most']}"))
    return lines


def plan_text(spec: SweepSpec, workers: int, threads: int, pilot: str | None = None, effect: float | None = None,
              metric: str | None = None, timed: bool = False, setup_from: str | None = None) -> str:
    """Everything `glm53 sweep --plan` prints; reads the pilot, writes nothing."""
    if effect is not None and not math.isfinite(effect):
        raise ValueError(f"--effect must be a finite number (in the metric's units: 0.03 is 3 points of a rate), "
                         f"got {effect}")
    if effect is not None and effect <= 0:
        raise ValueError(f"--effect must be > 0 (in the metric's units: 0.03 is 3 points of a rate), got {effect}")
    if effect is not None and pilot is None:
        raise ValueError("--effect needs --pilot DIR: the seeds needed depend on the spread a pilot sweep measured")
    if metric is not None and pilot is None:
        raise ValueError("--metric chooses the pilot's metric; add --pilot DIR")
    power = power_lines(spec, Path(pilot), metric, effect) if pilot is not None else []
    pilot_seconds = pilot_job_seconds(Path(pilot)) if pilot is not None else None
    timing = time_jobs(spec, threads, setup_from) if timed and spec.job in TIMED_KINDS else None
    lines = job_lines(spec) + wall_lines(spec, workers, threads, timing, pilot_seconds, timed) + power
    if pilot is None:
        lines.append("power: add --pilot DIR (a sweep of the same metric) for the smallest detectable effect, and "
                     "--effect E for the seeds needed")
    return "\n".join(lines)
