"""`glm53 analyze DIR`: per arm and checkpoint the mean and per-seed values; per comparison the paired
difference over the seeds both arms finished, the exact sign-flip permutation test (Monte Carlo beyond 20
seeds, its seed recorded), a paired bootstrap 95% interval (scipy.stats.bootstrap, percentile), wins out of n
and Holm's correction across the spec's comparisons at the same checkpoint and metric. Metrics named `*_lift` (a
job's own after - before, such as rl-splits' per-split RL lift) are also tested against zero per arm: the same
exact sign-flip test over the seeds, Holm across an arm's lift metrics at each checkpoint.

Each comparison and lift test also records under "detectable" the critical shift of its mean at which a study
with the scatter observed would reject (glm53/evaluate/power.py; about 50% power, not the conventional 80%): for
the exact sign-flip test at Holm's first threshold, alpha / m over its family of m, and for the paired bootstrap
interval; the report prints it beside the effect (glm53/sweep/wording.py), so a difference that is not
significant reads "no difference larger than X". Seeds whose metric is not a number are left out, and listed.

Writes analysis.json (no timings, so an interrupted and resumed sweep gives the same file as an uninterrupted
one), REPORT.md and charts/: per-seed points with arm means and intervals, and each arm's curve over the
evaluated checkpoints.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..evaluate.power import ALPHA, detectable_effects
from ..evaluate.stats import bootstrap_interval, holm, seed_task_bootstrap, sign_flip_test
from ..runtime.files import atomic_write_json, atomic_write_text, read_json
from .executor import RECEIPT
from .runner import SPEC_FILE, job_dir
from .spec import SweepSpec
from .wording import detectable_text, is_fraction

ANALYSIS = "analysis.json"
REPORT = "REPORT.md"
LOWER_IS_BETTER = {"target_loss", "perplexity", "train_loss"}
LOWER_IS_BETTER_SUFFIXES = ("_body_loss",)  # pretrain-splits' per-split losses


def lower_is_better(metric: str) -> bool:
    return metric in LOWER_IS_BETTER or metric.endswith(LOWER_IS_BETTER_SUFFIXES)


def saved_spec(out: Path) -> SweepSpec:
    path = out / SPEC_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{out} is not a sweep folder (no {SPEC_FILE}); run `glm53 sweep SPEC --out {out}`")
    return SweepSpec.from_saved(read_json(path))


def load_receipts(spec: SweepSpec, out: Path) -> dict[tuple[str, int], dict]:
    """{(arm, seed): receipt} of the finished jobs."""
    receipts = {}
    for arm in spec.arms:
        for seed in spec.seeds:
            path = job_dir(out, arm, seed) / RECEIPT
            if path.is_file():
                receipts[arm, seed] = read_json(path)
    return receipts


def collect(spec: SweepSpec, receipts: dict) -> tuple[dict, list[str]]:
    """values[arm][label][metric][seed] from the finished receipts, and the jobs that have none."""
    values, missing = {}, []
    for arm in spec.arms:
        values[arm] = {label: {m: {} for m in spec.metrics} for label in spec.labels}
        for seed in spec.seeds:
            if (arm, seed) not in receipts:
                missing.append(f"{arm}/seed-{seed}")
                continue
            metrics = receipts[arm, seed]["metrics"]
            for label in spec.labels:
                for m in spec.metrics:
                    if label in metrics and m in metrics[label]:
                        values[arm][label][m][seed] = float(metrics[label][m])
    return values, missing


def collect_extras(spec: SweepSpec, receipts: dict) -> tuple[dict, dict]:
    """What some job kinds add to their receipts (jobs with one evaluation): per-task outcomes,
    outcomes[arm][metric][seed] = {task: value}, and training curves, curves[arm][name][seed] = [[x, y], ...]."""
    outcomes, curves = {}, {}
    for arm in spec.arms:
        outcomes[arm], curves[arm] = {}, {}
        for seed in spec.seeds:
            receipt = receipts.get((arm, seed), {})
            for metric, by_task in (receipt.get("task_outcomes") or {}).items():
                outcomes[arm].setdefault(metric, {})[seed] = by_task
            for name, points in (receipt.get("curves") or {}).items():
                curves[arm].setdefault(name, {})[seed] = points
    return outcomes, curves


def _seed_task_interval(outcomes: dict, comparison: dict, seed: int) -> list[float] | None:
    """The interval of a comparison whose metric is a mean over tasks: resample seeds, then tasks."""
    a = outcomes.get(comparison["arm"], {}).get(comparison["metric"], {})
    b = outcomes.get(comparison["against"], {}).get(comparison["metric"], {})
    seeds = [s for s in comparison["seeds"] if s in a and s in b]
    if not seeds:
        return None
    tasks = sorted(set.intersection(*(set(a[s]) & set(b[s]) for s in seeds)))
    if not tasks:
        return None
    d = np.array([[a[s][t] - b[s][t] for t in tasks] for s in seeds], dtype=float)
    return list(seed_task_bootstrap(d, seed))


def analyze(out: str | Path, charts: bool = True) -> dict:
    out = Path(out)
    spec = saved_spec(out)
    receipts = load_receipts(spec, out)
    values, missing = collect(spec, receipts)
    outcomes, curves = collect_extras(spec, receipts)
    arms = {arm: {label: {m: _summary(values[arm][label][m], spec.analysis_seed) for m in spec.metrics}
                  for label in spec.labels} for arm in spec.arms}
    comparisons = []
    for label in spec.labels:
        for metric in spec.metrics:
            family = [_compare(values, arm, against, label, metric, spec.analysis_seed)
                      for arm, against in spec.comparisons]
            tested = [c for c in family if c["n"] > 0]
            for c, p in zip(tested, holm([c["p"] for c in tested])):
                c["holm_p"] = p
                c["detectable"] = detectable_effects(c["differences"], len(tested), spec.analysis_seed)
                interval = _seed_task_interval(outcomes, c, spec.analysis_seed)
                if interval is not None:
                    c["seed_task_bootstrap95"] = interval
            comparisons += family
    result = {"spec": spec.name, "job": spec.job, "description": spec.description, "metrics": list(spec.metrics),
              "checkpoints": spec.labels, "seeds": list(spec.seeds), "baseline": spec.baseline, "arms": arms,
              "comparisons": comparisons, "missing_jobs": missing,
              "statistics": {"test": "two-sided paired sign-flip permutation test of the mean difference, exact "
                                     "over all 2^n sign vectors up to n = 20 seeds",
                             "interval": "paired percentile bootstrap 95% (scipy.stats.bootstrap)",
                             "seed_task_interval": "where a metric is a mean over tasks: percentile bootstrap 95% of "
                                                   "the paired per-task differences, resampling seeds then tasks",
                             "multiple_comparisons": "Holm across the spec's comparisons at each checkpoint and metric",
                             "detectable": "the critical shift of the mean difference, either sign, at which a "
                                           "study with the observed scatter rejects (about 50% power, not the "
                                           "conventional 80%): the exact sign-flip test at alpha / m (alpha "
                                           f"{ALPHA}, Holm's first step over m comparisons) and the bootstrap "
                                           "interval excluding 0; rounded up when printed",
                             "seed": spec.analysis_seed}}
    result["lifts"] = lift_tests(spec, values)
    result["curves"] = {arm: {name: _mean_curve(by_seed) for name, by_seed in by_name.items()}
                        for arm, by_name in curves.items()}
    result["charts"] = make_charts(spec, values, arms, out, result["curves"]) if charts else []
    atomic_write_json(out / ANALYSIS, result, overwrite=True)
    atomic_write_text(out / REPORT, report_text(spec, result), overwrite=True)
    return result


def lift_tests(spec: SweepSpec, values: dict) -> list[dict]:
    """Each arm's `*_lift` metrics (after - before within a job) tested against zero over its seeds: mean, exact
    sign-flip p, bootstrap interval, seeds up and down; Holm across the arm's lift metrics at each checkpoint."""
    rows = []
    for arm in spec.arms:
        for label in spec.labels:
            family = []
            for metric in (m for m in spec.metrics if m.endswith("_lift")):
                per_seed = values[arm][label][metric]
                kept = [s for s, v in per_seed.items() if np.isfinite(v)]  # a NaN lift is left out, and said so
                d = np.array([per_seed[s] for s in kept], dtype=float)
                row = {"arm": arm, "checkpoint": label, "metric": metric, "n": len(d), "seeds": kept,
                       "lifts": d.tolist(), **_left_out(list(per_seed), kept)}
                if len(d):
                    test = sign_flip_test(d, seed=spec.analysis_seed)
                    row.update(mean=float(d.mean()), p=test["p"], test=test["method"], up=int((d > 0).sum()),
                               down=int((d < 0).sum()), bootstrap95=list(bootstrap_interval(d, spec.analysis_seed)))
                family.append(row)
            tested = [r for r in family if r["n"]]
            for r, p in zip(tested, holm([r["p"] for r in tested])):
                r["holm_p"] = p
                r["detectable"] = detectable_effects(r["lifts"], len(tested), spec.analysis_seed)
            rows += family
    return rows


def _summary(per_seed: dict[int, float], seed: int) -> dict:
    kept = [s for s, v in per_seed.items() if np.isfinite(v)]  # a NaN metric is left out, and said so
    xs = np.array([per_seed[s] for s in kept], dtype=float)
    return {**_left_out(list(per_seed), kept), "n": len(xs), "mean": float(xs.mean()) if len(xs) else None,
            "sd": float(xs.std(ddof=1)) if len(xs) > 1 else None,
            "interval95": list(bootstrap_interval(xs, seed)) if len(xs) > 1 else None,
            "per_seed": {str(s): v for s, v in per_seed.items()}}


def _mean_curve(by_seed: dict[int, list]) -> list[list[float]]:
    """[[x, mean y over the seeds that reached x, seeds], ...]."""
    at: dict[float, list[float]] = {}
    for points in by_seed.values():
        for x, y in points:
            at.setdefault(float(x), []).append(float(y))
    return [[x, float(np.mean(ys)), len(ys)] for x, ys in sorted(at.items())]


def _compare(values: dict, arm: str, against: str, label: str, metric: str, seed: int) -> dict:
    a, b = values[arm][label][metric], values[against][label][metric]
    paired = [s for s in a if s in b]
    seeds = [s for s in paired if np.isfinite(a[s] - b[s])]  # a NaN metric is left out, and said so
    d = np.array([a[s] - b[s] for s in seeds], dtype=float)
    row = {"arm": arm, "against": against, "checkpoint": label, "metric": metric, "n": len(seeds), "seeds": seeds,
           "differences": d.tolist(), **_left_out(paired, seeds)}
    if not seeds:
        return {**row, "mean_difference": None, "p": None, "holm_p": None}
    better = -d if lower_is_better(metric) else d
    test = sign_flip_test(d, seed=seed)
    return {**row, "mean_difference": float(d.mean()), "p": test["p"], "test": test["method"],
            "bootstrap95": list(bootstrap_interval(d, seed)), "wins": int((better > 0).sum()),
            "losses": int((better < 0).sum()), "ties": int((better == 0).sum())}


def _left_out(seeds: list, kept: list) -> dict:
    return {"not_finite_seeds": [s for s in seeds if s not in kept]} if len(kept) < len(seeds) else {}


def _fmt(metric: str, value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    if is_fraction(metric):
        return f"{100 * value:+.1f} pp" if signed else f"{100 * value:.1f}%"
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def report_text(spec: SweepSpec, result: dict) -> str:
    head = spec.metrics[0]
    lines = [f"# Sweep `{spec.name}`", "", spec.description, "",
             f"Job `{spec.job}`, {len(spec.arms)} arms x {len(spec.seeds)} seeds ({', '.join(map(str, spec.seeds))}); "
             f"baseline `{spec.baseline}`. Settings shared by every arm: "
             + (", ".join(f"`{k} = {v}`" for k, v in spec.base.items()) or "the job's defaults") + ".", ""]
    if result["missing_jobs"]:
        lines += [f"**Incomplete:** {len(result['missing_jobs'])} jobs have no receipt "
                  f"({', '.join(result['missing_jobs'][:8])}{' ...' if len(result['missing_jobs']) > 8 else ''}); "
                  "comparisons pair only the seeds both arms finished.", ""]
    lines += [f"## {head}: mean over seeds", "", "| arm | " + " | ".join(f"@{c}" for c in spec.labels) + " |",
              "|---|" + "---|" * len(spec.labels)]
    for arm in spec.arms:
        cells = []
        for label in spec.labels:
            s = result["arms"][arm][label][head]
            cells.append(f"{_fmt(head, s['mean'])} (n={s['n']})")
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    last = spec.labels[-1]
    lines += ["", f"Per seed at {last}:", "", "| arm | " + " | ".join(str(seed) for seed in spec.seeds) + " |",
              "|---|" + "---|" * len(spec.seeds)]
    for arm in spec.arms:
        per_seed = result["arms"][arm][last][head]["per_seed"]
        lines.append(f"| {arm} | " + " | ".join(_fmt(head, per_seed.get(str(seed))) for seed in spec.seeds) + " |")
    two_level = any("seed_task_bootstrap95" in c for c in result["comparisons"])
    lines += ["", "## Comparisons", "",
              "| checkpoint | metric | comparison | mean difference | 95% bootstrap (seeds) |"
              + (" 95% bootstrap (seeds, tasks) |" if two_level else "")
              + " wins | p (exact) | Holm p | smallest detectable |",
              "|---|---|---|---|---|" + ("---|" if two_level else "") + "---|---|---|---|"]
    for c in result["comparisons"]:
        if c["n"] == 0:
            continue
        ci, m = c["bootstrap95"], c["metric"]
        cell = ""
        if two_level:
            st = c.get("seed_task_bootstrap95")
            cell = (f" {_fmt(m, st[0], True)} .. {_fmt(m, st[1], True)} |" if st else " - |")
        lines.append(f"| {c['checkpoint']} | {m} | {c['arm']} - {c['against']} | "
                     f"{_fmt(m, c['mean_difference'], True)} | {_fmt(m, ci[0], True)} .. "
                     f"{_fmt(m, ci[1], True)} |{cell} {c['wins']}/{c['n']} | {c['p']:.4g} | {c['holm_p']:.4g} | "
                     f"{detectable_text(m, c)} |")
    stats_text = result["statistics"]
    lines += ["", "Wins: seeds on which the first arm was better (lower for losses and perplexity). "
              + stats_text["test"] + "; " + stats_text["interval"] + "; "
              + (stats_text["seed_task_interval"] + "; " if two_level else "")
              + stats_text["multiple_comparisons"] + ". Smallest detectable: the "
              + stats_text["detectable"] + " (see docs/studies/index.md, Power).", ""]
    if any(r["n"] for r in result.get("lifts", [])):
        lines += ["## Lifts (after - before within each job), tested against zero", "",
                  "| arm | checkpoint | metric | mean | 95% bootstrap (seeds) | up / down of n | p (exact) | Holm p | "
                  "smallest detectable |", "|---|---|---|---|---|---|---|---|---|"]
        for r in (r for r in result["lifts"] if r["n"]):
            m, (lo, hi) = r["metric"], r["bootstrap95"]
            lines.append(f"| {r['arm']} | {r['checkpoint']} | {m} | {_fmt(m, r['mean'], True)} | "
                         f"{_fmt(m, lo, True)} .. "
                         f"{_fmt(m, hi, True)} | {r['up']} / {r['down']} of {r['n']} | {r['p']:.4g} | "
                         f"{r['holm_p']:.4g} | "
                         f"{detectable_text(m, r)} |")
        lines.append("")
    for chart in result["charts"]:
        lines.append(f"![{Path(chart).stem}]({chart})")
    return "\n".join(lines) + "\n"


def _per_seed_chart(plt, spec: SweepSpec, values: dict, arms: dict, names: list[str], metric: str, label: str,
                    charts_dir: Path) -> str:
    scale = 100.0 if is_fraction(metric) else 1.0
    unit = " (%)" if is_fraction(metric) else ""
    fig, ax = plt.subplots(figsize=(min(14.0, 1.9 * len(names) + 2), 4.6))
    for seed in spec.seeds:  # one faint line a seed joins its arms: the pairing the tests use
        ys = [values[a][label][metric].get(seed) for a in names]
        xs = [i for i, y in enumerate(ys) if y is not None]
        ax.plot(xs, [ys[i] * scale for i in xs], color="0.8", lw=0.8, zorder=1)
        ax.scatter(xs, [ys[i] * scale for i in xs], color="0.45", s=14, zorder=2)
    for i, arm in enumerate(names):
        s = arms[arm][label][metric]
        if s["mean"] is None:
            continue
        low, high = s["interval95"] or (s["mean"], s["mean"])
        ax.errorbar([i + 0.12], [s["mean"] * scale], yerr=[[(s["mean"] - low) * scale], [(high - s["mean"]) * scale]],
                    fmt="D", color="C3", capsize=4, zorder=3)
    base = arms[spec.baseline][label][metric]["mean"]
    if base is not None:
        ax.axhline(base * scale, color="C3", lw=0.8, ls=":", zorder=0)
    ax.set_xticks(range(len(names)), names, rotation=15 if len(names) <= 6 else 35, ha="center" if len(names) <= 6
                  else "right")
    ax.set_ylabel(metric + unit)
    ax.set_title(f"{spec.name}: {metric} at {label}, per seed (grey) and arm mean with 95% interval (red; dotted: "
                 f"the baseline's mean)", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(charts_dir / f"{metric}-per-seed.png", dpi=130)
    plt.close(fig)
    return f"charts/{metric}-per-seed.png"


def make_charts(spec: SweepSpec, values: dict, arms: dict, out: Path, curves: dict | None = None) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    head = spec.metrics[0]
    scale = 100.0 if is_fraction(head) else 1.0
    unit = " (%)" if is_fraction(head) else ""
    charts_dir = out / "charts"
    charts_dir.mkdir(exist_ok=True)
    names = list(spec.arms)
    written = []

    # the first two metrics per seed and arm, each at the last checkpoint where it was scored
    for metric in spec.metrics[:2]:
        scored = [c for c in spec.labels if any(arms[a][c][metric]["mean"] is not None for a in names)]
        if scored:
            written.append(_per_seed_chart(plt, spec, values, arms, names, metric, scored[-1], charts_dir))

    if len(spec.labels) > 1:
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        xs = [float(c) if c.replace(".", "").isdigit() else i for i, c in enumerate(spec.labels)]
        for i, arm in enumerate(names):
            for seed in spec.seeds:
                ys = [values[arm][c][head].get(seed) for c in spec.labels]
                if all(y is not None for y in ys):
                    ax.plot(xs, [y * scale for y in ys], color=f"C{i}", alpha=0.15, lw=0.8)
            means = [arms[arm][c][head]["mean"] for c in spec.labels]
            if all(m is not None for m in means):
                ax.plot(xs, [m * scale for m in means], color=f"C{i}", lw=2.2, marker="o", label=arm)
        ax.set_xlabel("updates")
        ax.set_ylabel(head + unit)
        ax.set_title(f"{spec.name}: {head} over training (thin: seeds, thick: mean)", fontsize=9)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(charts_dir / f"{head}-curves.png", dpi=130)
        plt.close(fig)
        written.append(f"charts/{head}-curves.png")

    names_of_curves = sorted({n for by_name in (curves or {}).values() for n in by_name})
    if names_of_curves:  # training curves from the receipts (rl-eval: reward and zero-variance per arm)
        fig, axes = plt.subplots(1, len(names_of_curves), figsize=(6.2 * len(names_of_curves), 4.4), squeeze=False)
        for ax, name in zip(axes[0], names_of_curves):
            for i, arm in enumerate(names):
                points = curves.get(arm, {}).get(name)
                if points:
                    ax.plot([p[0] for p in points], [p[1] for p in points], color=f"C{i % 10}",
                            ls="-" if i < 10 else "--", lw=1.6, marker=".", label=arm)
            ax.set_xlabel("rollouts (scheduled groups x group size)")
            ax.set_ylabel(name.replace("_", " "))
            ax.set_title(f"{spec.name}: {name.replace('_', ' ')} per update (mean over seeds)", fontsize=9)
            ax.grid(alpha=0.3)
        axes[0][-1].legend(fontsize=7, ncol=2)
        fig.tight_layout()
        fig.savefig(charts_dir / "training-curves.png", dpi=130)
        plt.close(fig)
        written.append("charts/training-curves.png")
    return written
