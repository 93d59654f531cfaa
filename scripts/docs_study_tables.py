"""The study pages' tables, generated from each study's kept record (no training, no torch, offline).

    python scripts/docs_study_tables.py docs/studies/released-attention
    python scripts/docs_study_tables.py docs/studies/released-streams --table summary \
        --columns parameters,train_loss@100,greedy_pass_at_1@100

A study's record is the folder `glm53 sweep SPEC --out DIR` wrote, kept with `python scripts/keep_study.py`:
analysis.json (what `glm53 analyze` computed), spec.json and runs/ARM/seed-S/receipt.json. Two tables:

    summary      one row per arm: its parameters (from the receipts) and, per column METRIC@CHECKPOINT, the mean
                 over seeds with the per-seed values (a pass rate also as tasks solved of the tasks scored)
    comparisons  the analysis's paired comparisons against the baseline: mean difference, bootstrap intervals,
                 wins, the exact sign-flip p, Holm's p and the smallest effect the exact test could detect
                 (--metrics keeps some metrics)
    lifts        each arm's lifts (after - before within a job: rl-splits) against zero, the same columns

The docs site runs the same code at build time (docs/hooks/study_tables.py): a page holds a marker line

    <!-- study-table released-attention summary columns=parameters,train_loss@100 -->

and the built page holds the table, so the numbers on a page are always the record's.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

# how `glm53 analyze` reads these metrics (glm53/sweep/analysis.py): fractions print as % and differ in pp
FRACTIONS = {"target_byte_accuracy", "exact_match", "dev_pass_rate", "pass_rate", "tasks_solved", "greedy_pass_at_1",
             "sampled_pass_at_1", "sampled_pass_at_k", "train_exact_rate", "zero_variance_fraction",
             "mtp_acceptance_rate"}
FRACTION_SUFFIXES = ("_pass_at_1", "_pass_at_1_before", "_lift")  # per-split metrics of rl-splits, pretrain-splits
RATES = {"train_tokens_per_second", "decode_tokens_per_second"}
RATIOS = {"speculative_speedup"}
THREE_DIGITS = {"expert_load_cv"}

LABELS = {
    "parameters": "parameters",
    "train_loss": "loss, steps {window}",
    "greedy_pass_at_1": "confirm greedy pass@1 at step {c} (seeds {seeds})",
    "train_tokens_per_second": "training tokens/s",
    "decode_tokens_per_second": "decoding tokens/s",
    "expert_load_cv": "expert-load CV at step {c}",
    "mtp_acceptance_rate": "MTP draft accepted at step {c}",
    "speculative_speedup": "self-speculative speed-up at step {c} (seeds {seeds})",
    "indexer_loss": "indexer KL term at step {c}",
}

MARKER = re.compile(r"^<!--\s*study-table\s+(?P<study>[\w.-]+)\s+(?P<table>summary|comparisons|lifts)"
                    r"(?P<options>[^>]*?)\s*-->[ \t]*$", re.MULTILINE)


class Record:
    """A kept study: its analysis, spec and receipts."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        analysis = self.folder / "analysis.json"
        if not analysis.is_file():
            raise FileNotFoundError(f"{self.folder} holds no analysis.json (run `glm53 analyze {self.folder}`)")
        self.analysis = json.loads(analysis.read_text())
        self.spec = json.loads((self.folder / "spec.json").read_text())
        self.arms = [a["name"] for a in self.spec["arms"]]
        self.seeds = [str(s) for s in self.analysis["seeds"]]
        self.receipts = {}
        for arm in self.arms:
            for seed in self.seeds:
                path = self.folder / "runs" / arm / f"seed-{seed}" / "receipt.json"
                if path.is_file():
                    self.receipts[arm, seed] = json.loads(path.read_text())

    def parameters(self, arm: str) -> str:
        totals = sorted({r["parameter_counts"]["total"] for (a, _), r in self.receipts.items()
                         if a == arm and r.get("parameter_counts")})
        return " / ".join(f"{t:,}" for t in totals) or "-"

    def tasks_scored(self, arm: str, metric: str) -> int | None:
        counts = {len(r.get("task_outcomes", {}).get(metric) or {}) for (a, _), r in self.receipts.items() if a == arm}
        return counts.pop() if len(counts) == 1 and 0 not in counts else None

    def loss_window(self) -> int | None:
        windows = {r.get("settings", {}).get("loss_window") for r in self.receipts.values()}
        return windows.pop() if len(windows) == 1 else None


def is_fraction(metric: str) -> bool:
    return metric in FRACTIONS or metric.endswith(FRACTION_SUFFIXES)


def fmt(metric: str, value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    if is_fraction(metric):
        return f"{100 * value:+.1f} pp" if signed else f"{100 * value:.1f}%"
    if metric in RATES:
        return f"{value:+,.0f}" if signed else f"{value:,.0f}"
    if metric in RATIOS:
        return f"{value:+.2f}x" if signed else f"{value:.2f}x"
    if metric in THREE_DIGITS:
        return f"{value:+.3f}" if signed else f"{value:.3f}"
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def column_label(record: Record, column: str) -> str:
    if column == "parameters":
        return "parameters"
    metric, _, c = column.partition("@")
    window = record.loss_window()
    label = LABELS.get(metric, f"{metric} at step {{c}}" if c != "eval" else metric)
    if metric == "train_loss" and window:
        return label.format(window=f"{int(c) - window + 1}-{c}")
    if metric == "train_loss":
        return f"loss at step {c}"
    return label.format(c=c, seeds=", ".join(record.seeds))


def cell(record: Record, arm: str, column: str) -> str:
    if column == "parameters":
        return record.parameters(arm)
    metric, _, c = column.partition("@")
    summary = record.analysis["arms"][arm].get(c, {}).get(metric)
    if not summary or summary["mean"] is None:
        return "-"
    per_seed = [summary["per_seed"].get(s) for s in record.seeds]
    text = fmt(metric, summary["mean"])
    if is_fraction(metric) and metric != "mtp_acceptance_rate":
        tasks = record.tasks_scored(arm, metric.removesuffix("_before"))  # a start's score: the same tasks
        if tasks:
            solved = ", ".join("-" if v is None else f"{round(v * tasks)}" for v in per_seed)
            return f"{text} ({solved} of {tasks})"
        return text + " (" + ", ".join(fmt(metric, v) for v in per_seed) + ")"
    if metric in RATIOS:
        return text + " (" + ", ".join(fmt(metric, v).rstrip("x") for v in per_seed) + ")"
    return text


def summary_table(record: Record, columns: list[str]) -> str:
    for column in columns:
        if column != "parameters":
            metric, _, c = column.partition("@")
            if metric not in record.analysis["metrics"] or c not in record.analysis["checkpoints"]:
                raise ValueError(f"{record.folder.name}: no {column} in analysis.json (metrics "
                                 f"{record.analysis['metrics']}, checkpoints {record.analysis['checkpoints']})")
    n = len(record.seeds)
    lines = [f"| arm ({n} seed{'s' if n != 1 else ''}) | "
             + " | ".join(column_label(record, c) for c in columns) + " |",
             "|---|" + "---|" * len(columns)]
    for arm in record.arms:
        lines.append(f"| {arm} | " + " | ".join(cell(record, arm, c) for c in columns) + " |")
    return "\n".join(lines)


def detectable(metric: str, row: dict) -> str:
    """The smallest effect the exact test could detect (analysis.json's "detectable"), rounded up, or why none."""
    det = row.get("detectable")
    if not det:
        return "-"
    if det["sign_flip"] is None:
        return f"none: {row['n']} seeds cannot reach p <= {det['sign_flip_threshold']:.3g}"
    value = det["sign_flip"]
    if is_fraction(metric):
        return f"{math.ceil(1000 * value - 1e-6) / 10:.1f} pp"
    return f"{value:.4f}" if value == 0 else f"{math.ceil(value * 1e4 - 1e-6) / 1e4:.4f}"


def comparisons_table(record: Record, metrics: list[str] | None = None) -> str:
    rows = [c for c in record.analysis["comparisons"] if c["n"] and (not metrics or c["metric"] in metrics)]
    two_level = any("seed_task_bootstrap95" in c for c in rows)
    with_power = any("detectable" in c for c in rows)
    lines = ["| checkpoint | metric | comparison | mean difference | 95% bootstrap (seeds) |"
             + (" 95% bootstrap (seeds, tasks) |" if two_level else "") + " wins | p (exact) | Holm p |"
             + (" smallest detectable (exact, Holm) |" if with_power else ""),
             "|---|---|---|---|---|" + ("---|" if two_level else "") + "---|---|---|" + ("---|" if with_power else "")]
    for c in rows:
        m, ci = c["metric"], c["bootstrap95"]
        extra = ""
        if two_level:
            st = c.get("seed_task_bootstrap95")
            extra = f" {fmt(m, st[0], True)} .. {fmt(m, st[1], True)} |" if st else " - |"
        lines.append(f"| {c['checkpoint']} | {m} | {c['arm']} - {c['against']} | {fmt(m, c['mean_difference'], True)}"
                     f" | {fmt(m, ci[0], True)} .. {fmt(m, ci[1], True)} |{extra} {c['wins']}/{c['n']} | "
                     f"{c['p']:.4g} | {c['holm_p']:.4g} |" + (f" {detectable(m, c)} |" if with_power else ""))
    return "\n".join(lines)


def lifts_table(record: Record, metrics: list[str] | None = None) -> str:
    """Each arm's lifts (after - before within a job) tested against zero: analysis.json's "lifts"."""
    rows = [r for r in record.analysis.get("lifts", []) if r["n"] and (not metrics or r["metric"] in metrics)]
    if not rows:
        raise ValueError(f"{record.folder.name}: analysis.json holds no lift tests (metrics named *_lift)")
    lines = ["| arm | metric | mean lift | 95% bootstrap (seeds) | up / down | p (exact) | Holm p | smallest "
             "detectable (exact, Holm) |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        m, ci = r["metric"], r["bootstrap95"]
        lines.append(f"| {r['arm']} | {m} | {fmt(m, r['mean'], True)} | {fmt(m, ci[0], True)} .. "
                     f"{fmt(m, ci[1], True)} | {r['up']} / {r['down']} of {r['n']} | {r['p']:.4g} | "
                     f"{r['holm_p']:.4g} | {detectable(m, r)} |")
    return "\n".join(lines)


def parse_options(text: str) -> dict[str, list[str]]:
    options = {}
    for word in text.split():
        key, _, value = word.partition("=")
        options[key] = [v for v in value.split(",") if v]
    return options


def table(studies: Path, study: str, kind: str, options: dict[str, list[str]]) -> str:
    record = Record(studies / study)
    if kind == "summary":
        columns = options.get("columns") or ["parameters"] + [f"{m}@{c}" for c in record.analysis["checkpoints"]
                                                             for m in record.analysis["metrics"][:2]]
        return summary_table(record, columns)
    if kind == "lifts":
        return lifts_table(record, options.get("metrics"))
    return comparisons_table(record, options.get("metrics"))


def expand_markers(markdown: str, studies: Path) -> str:
    """Replace every `<!-- study-table STUDY summary|comparisons [columns=...] [metrics=...] -->` line by its table,
    outside fenced code blocks (where a marker is shown, not meant)."""
    parts = re.split(r"(^(?:```|~~~)[^\n]*\n.*?^(?:```|~~~)[ \t]*$)", markdown, flags=re.MULTILINE | re.DOTALL)
    return "".join(part if i % 2 else MARKER.sub(
        lambda m: table(studies, m["study"], m["table"], parse_options(m["options"])), part)
        for i, part in enumerate(parts))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", help="a study's kept record (docs/studies/NAME)")
    p.add_argument("--table", choices=["summary", "comparisons", "lifts", "both"], default="both")
    p.add_argument("--columns", help="summary columns: parameters and METRIC@CHECKPOINT, comma-separated "
                                     "(default: parameters and the first two metrics at every checkpoint)")
    p.add_argument("--metrics", help="comparisons of these metrics only, comma-separated (default: all)")
    args = p.parse_args()
    folder = Path(args.folder)
    options = {"columns": (args.columns or "").split(","), "metrics": (args.metrics or "").split(",")}
    options = {k: [v for v in vs if v] for k, vs in options.items()}
    out = []
    if args.table in ("summary", "both"):
        out.append(table(folder.parent, folder.name, "summary", options))
    if args.table in ("comparisons", "both"):
        out.append(table(folder.parent, folder.name, "comparisons", options))
    if args.table == "lifts":
        out.append(table(folder.parent, folder.name, "lifts", options))
    print("\n\n".join(out))


if __name__ == "__main__":
    main()
