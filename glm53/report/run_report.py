"""Charts (matplotlib PNG) and REPORT.md for a `glm53 run` folder, drawn with charts.py, as `glm53 report`'s
are."""

from __future__ import annotations

from pathlib import Path

import matplotlib

from ..runtime.files import atomic_write_text, read_jsonl
from .charts import COLORS, loss_chart, pyplot
from .charts import save as _save, style as _style
from .escape import code_span

plt = pyplot()
import matplotlib.ticker  # noqa: E402

REFERENCE_RL_FAMILIES = ("increment", "double", "even")


def make_charts(run: Path, before: dict, after: dict, pretrain_receipt: dict, rl_receipt: dict) -> list[str]:
    written = training_charts(run, pretrain_receipt, rl_receipt)
    written.append(family_chart(run / "charts", before, after))
    return written


def training_charts(run: Path, pretrain_receipt: dict, rl_receipt: dict,
                    dev_label: str = "pass@1 (one task per family)") -> list[str]:
    """The pretraining loss, the dev scores while pretraining and during RL, and RL's reward per update."""
    charts = run / "charts"
    charts.mkdir(exist_ok=True)
    written = []

    curve = read_jsonl(run / "pretrain" / "train_log.jsonl")
    if curve:  # the same chart `glm53 report` draws of a pretraining folder (report/charts.py)
        written.append(loss_chart(charts, curve, pretrain_receipt["checkpoints"]))

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    pts = [(c["step"], c["dev_passed"] / max(1, c["dev_tasks"])) for c in pretrain_receipt["checkpoints"]]
    axes[0].plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=COLORS["line"])
    axes[0].set_ylim(-0.05, 1.05)
    _style(axes[0], "Dev greedy pass@1 while pretraining", "step", dev_label)
    rl_pts = [(c["group"], c["dev"]["exact_rollouts"] / c["dev"]["rollouts"]) for c in rl_receipt["checkpoints"]
              if c["dev"]]
    axes[1].plot([p[0] for p in rl_pts], [p[1] for p in rl_pts], marker="o", color=COLORS["accent"])
    axes[1].set_ylim(-0.05, 1.05)
    _style(axes[1], "Dev exact rollouts during RL", "groups", "fraction of sampled rollouts passing")
    written.append(_save(fig, charts, "dev_curve.png"))

    steps = rl_receipt["steps"]
    if steps:
        fig, ax = plt.subplots(figsize=(7, 4))
        x = [s["groups_done"] for s in steps]
        ax.plot(x, [s["reward_mean"] for s in steps], marker="o", color=COLORS["line"], label="mean reward")
        ax.plot(x, [s["zero_variance_fraction"] for s in steps], marker="s", color=COLORS["accent"],
                label="groups without signal")
        ax.legend(frameon=False)
        _style(ax, "RL reward", "groups", "per update")
        written.append(_save(fig, charts, "reward_curve.png"))
    return written


def family_chart(charts: Path, before: dict, after: dict) -> str:
    families = list(before["by_family"])
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.38
    idx = range(len(families))
    b = [before["by_family"][f]["tasks_solved_any"] for f in families]
    a = [after["by_family"][f]["tasks_solved_any"] for f in families]
    ax.bar([i - width / 2 for i in idx], b, width, color=COLORS["before"], label="RL start")
    ax.bar([i + width / 2 for i in idx], a, width, color=COLORS["after"], label="after RL")
    ax.set_xticks(list(idx), families, rotation=20)
    ax.set_ylim(0, max(before["by_family"][f]["tasks"] for f in families) + 0.5)
    ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.legend(frameon=False)
    _style(ax, "Confirm split, greedy pass@1 by family", "", "tasks solved")
    return _save(fig, charts, "before_after_by_family.png")


def write_report(run: Path, info: dict, before: dict, after: dict, comparison: dict, charts: list[str]) -> str:
    rl_families = info["rl_families"]
    lines = [f"# glm53 run: {run.name}", "",
             f"Seed {info['seed']}, preset `{info['preset']}`, device {info['device']}; "
             f"total {info['seconds']['total']:.0f} s "
             f"(" + ", ".join(f"{k} {v:.0f} s" for k, v in info["seconds"].items() if k != "total") + ").", "",
             "## Before and after RL (confirm split, greedy pass@1)", "",
             "| family | RL start | after RL | trained by RL |", "|---|---|---|---|"]
    for fam in before["by_family"]:
        b, a = before["by_family"][fam], after["by_family"][fam]
        lines.append(f"| {fam} | {b['tasks_solved_any']}/{b['tasks']} | {a['tasks_solved_any']}/{a['tasks']} | "
                     f"{'yes' if fam in rl_families else ''} |")
    for label, fams in (("reference's RL families (increment, double, even)", REFERENCE_RL_FAMILIES),
                        ("RL-trained families", rl_families)):
        fams = [f for f in fams if f in before["by_family"]]
        sub_b = sum(before["by_family"][f]["tasks_solved_any"] for f in fams)
        sub_a = sum(after["by_family"][f]["tasks_solved_any"] for f in fams)
        sub_n = sum(before["by_family"][f]["tasks"] for f in fams)
        lines.append(f"| **{label}** | **{sub_b}/{sub_n}** | **{sub_a}/{sub_n}** | |")
    lines += [
              f"| **all families** | **{before['summary']['tasks_solved_any']}/{before['summary']['tasks']}** | "
              f"**{after['summary']['tasks_solved_any']}/{after['summary']['tasks']}** | |", ""]
    o = comparison["comparisons"][0]["overall"]
    lines += [f"Paired on the same {o['tasks']} tasks: {o['gains']} gains, {o['losses']} losses, exact McNemar "
              f"p = {o['mcnemar_p']:.4g}; mean difference {o['mean_difference']:+.3f}, 95% paired bootstrap interval "
              f"[{o['bootstrap_95'][0]:+.3f}, {o['bootstrap_95'][1]:+.3f}]. The confirm split was opened once, after "
              f"the RL checkpoint (group {info['selected_rl_group']}) was chosen on dev.", ""]
    if info.get("tasks_file_check"):
        lines += [f"Re-evaluated from the exported task file `{info['tasks_file_check']['file']}`: "
                  f"{info['tasks_file_check']['solved']}/{info['tasks_file_check']['tasks']} "
                  f"({'identical' if info['tasks_file_check']['identical'] else 'DIFFERENT'} completions).", ""]
    lines += ["## Charts", ""] + [f"![{Path(c).stem}]({c})" for c in charts] + [""]
    lines += ["## Example generations", "", "| task | RL start | after RL |", "|---|---|---|"]
    shown = 0
    after_rows = {r["task_id"]: r for r in after["tasks"]}
    for row in before["tasks"]:
        other = after_rows.get(row["task_id"])
        if other is None:
            continue
        b, a = row["samples"][0], other["samples"][0]
        if b["completion"] != a["completion"] or shown < 2:
            fmt = lambda s: (code_span(s["completion"].strip() or "(empty)")  # noqa: E731
                             + f" ({s['verdict']['status']})")
            lines.append(f"| {row['task_id']} | {fmt(b)} | {fmt(a)} |")
            shown += 1
        if shown >= 10:
            break
    lines += ["", "## Receipts", "",
              "- pretraining: `pretrain/training-receipt.json`, curve `pretrain/train_log.jsonl`",
              "- RL: `rl/training-receipt.json` (every rollout, reward and advantage), `rl/schedule.json`",
              "- evaluation: `eval/before-confirm.json`, `eval/after-confirm.json`, comparison `eval/comparison.json`",
              "- the chosen model: `final/` (save_pretrained format: `GLM53.from_pretrained`, "
              "`glm53 eval --checkpoint`)",
              "- this run: `run-receipt.json`", ""]
    text = "\n".join(lines)
    atomic_write_text(run / "REPORT.md", text, overwrite=True)  # a resumed run writes it again, whole
    return text
