"""Paired comparison of evaluation receipts on the same tasks.

Each task scores s = fraction of its samples that passed (0 or 1 for greedy receipts) and is "solved" when any
sample passed. Between a baseline A and an arm B: gains (solved by B only), losses (by A only), the exact
McNemar test on those discordant tasks (a two-sided binomial test, scipy.stats.binomtest), and a paired
bootstrap percentile interval of the mean per-task difference in s. With several arms against one baseline
the McNemar p-values are also Holm-corrected.

Simplification: tasks are treated as independent, although tasks of one family share templates and tests.
"""

from __future__ import annotations

import numpy as np

from .stats import BOOTSTRAP_RESAMPLES, bootstrap_interval, holm, mcnemar_exact

__all__ = ["compare", "format_comparison", "holm", "mcnemar_exact"]


def check_receipt(receipt, name: str) -> None:
    """An eval receipt (`glm53 eval --out`), or a ValueError that says what the file is not."""
    rows = receipt.get("tasks") if isinstance(receipt, dict) else None
    ok = isinstance(rows, list) and isinstance(receipt.get("settings"), dict) and all(
        isinstance(r, dict) and {"task_id", "family", "samples", "passed"} <= set(r) and r["samples"] for r in rows)
    if not ok:
        raise ValueError(f"{name} is not an eval receipt (it needs 'settings' and 'tasks' with task_id, family, "
                         "samples and passed per task); write one with `glm53 eval --out`")


def sampling_of(receipt: dict) -> str:
    s = receipt["settings"]
    return "greedy" if s.get("greedy") else f"{s.get('samples')} samples at temperature {s.get('temperature')}"


def task_scores(receipt: dict) -> dict[str, tuple[str, float, bool]]:
    """task_id -> (family, fraction of samples passed, solved by any sample)."""
    out = {}
    for row in receipt["tasks"]:
        n = len(row["samples"])
        out[row["task_id"]] = (row["family"], row["passed"] / n, row["passed"] > 0)
    return out


def _paired(a: dict, b: dict, ids: list[str], seed: int) -> dict:
    solved_a = np.array([a[i][2] for i in ids], dtype=bool)
    solved_b = np.array([b[i][2] for i in ids], dtype=bool)
    diff = np.array([b[i][1] - a[i][1] for i in ids], dtype=float)
    gains, losses = int((~solved_a & solved_b).sum()), int((solved_a & ~solved_b).sum())
    low, high = bootstrap_interval(diff, seed)
    return {"tasks": len(ids), "solved_a": int(solved_a.sum()), "solved_b": int(solved_b.sum()), "gains": gains,
            "losses": losses, "mcnemar_p": mcnemar_exact(gains, losses),
            "mean_difference": float(diff.mean()) if len(ids) else 0.0, "bootstrap_95": [low, high]}


def compare(baseline: dict, arms: list[dict], names: list[str] | None = None, seed: int = 20260827) -> dict:
    """names: the baseline's name first, then one per arm. Receipts must be eval receipts made the same way
    (greedy against greedy, or the same number of samples at the same temperature)."""
    names = names or ["baseline"] + [f"arm{n + 1}" for n in range(len(arms))]
    for receipt, name in zip([baseline, *arms], names):
        check_receipt(receipt, name)
    kinds = {name: sampling_of(r) for r, name in zip([baseline, *arms], names)}
    if len(set(kinds.values())) > 1:
        raise ValueError("receipts were sampled differently (" + "; ".join(f"{k}: {v}" for k, v in kinds.items())
                         + "); compare receipts made the same way")
    a = task_scores(baseline)
    comparisons = []
    for n, receipt in enumerate(arms):
        b = task_scores(receipt)
        shared = [i for i in a if i in b]
        if not shared:
            raise ValueError(f"arm {n + 1} shares no task_id with the baseline; compare receipts of the same tasks")
        missing = sorted(set(a) ^ set(b))
        overall = _paired(a, b, shared, seed)
        families = sorted({a[i][0] for i in shared})
        by_family = {fam: _paired(a, b, [i for i in shared if a[i][0] == fam], seed) for fam in families}
        comparisons.append({"name": names[n + 1] if names and n + 1 < len(names) else f"arm{n + 1}",
                            "overall": overall, "by_family": by_family, "unpaired_tasks": len(missing)})
    if len(comparisons) > 1:
        for c, p in zip(comparisons, holm([c["overall"]["mcnemar_p"] for c in comparisons])):
            c["overall"]["holm_p"] = p
    return {"baseline": names[0] if names else "baseline", "comparisons": comparisons,
            "bootstrap_resamples": BOOTSTRAP_RESAMPLES, "seed": seed}


def format_comparison(result: dict) -> str:
    lines = []
    for c in result["comparisons"]:
        o = c["overall"]
        holm_text = f", Holm p = {o['holm_p']:.4g}" if "holm_p" in o else ""
        lines.append(f"{c['name']} vs {result['baseline']}: solved {o['solved_a']} -> {o['solved_b']} of {o['tasks']}, "
                     f"{o['gains']} gains, {o['losses']} losses, McNemar p = {o['mcnemar_p']:.4g}{holm_text}, "
                     f"mean difference {o['mean_difference']:+.3f} (95% bootstrap {o['bootstrap_95'][0]:+.3f} .. "
                     f"{o['bootstrap_95'][1]:+.3f})")
        for fam, f in c["by_family"].items():
            lines.append(f"    {fam:14s} {f['solved_a']:>3d} -> {f['solved_b']:<3d} of {f['tasks']:<3d} "
                         f"+{f['gains']} -{f['losses']}  p = {f['mcnemar_p']:.4g}")
        if c["unpaired_tasks"]:
            lines.append(f"    ({c['unpaired_tasks']} tasks present in only one receipt were left out)")
    return "\n".join(lines)
