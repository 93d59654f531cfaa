"""REPORT.md and charts of a `glm53 run` on a suite with several evaluation splits (the broad suite): greedy pass@1
on every split before and after RL with each split's paired test, per-depth and per-root breakdowns, and example
generations. `results` maps each split to (before, after, comparison): eval receipts of the split's tasks and
their `compare` (glm53/evaluate/compare.py); a split scored in docstring style is named <split>-doc. Where the run
built a corpus or scored HumanEval (`info["corpus"]`, `info["humaneval"]`), the report says so; otherwise it is as
it was before those stages.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from ..runtime.files import atomic_write_text
from .escape import code_block
from .humaneval_report import humaneval_section
from .run_report import COLORS, _save, _style, plt

SPLIT_NOTES = {"dev": "chose the RL start and the RL checkpoint", "rl": "RL trained on its first tasks",
               "confirm": "in distribution, unseen", "compose": "held-out primitive pairs",
               "phrase": "held-out phrasings", "human": "hand-written, evaluation only"}


DOCSTRING_SUFFIX = "-doc"  # data/broad/docstring.py's SUFFIX: a split scored in docstring style


def corpus_record(corpus: dict, file: str, pretrain_receipt: dict) -> dict:
    """The run receipt's account of the corpus it built (`corpus`: the corpus receipt, with `model_tokens`) and
    pretrained on: where from, functions found and kept, bytes, tokens, sha256, and the share of rows it gave."""
    return {"command": corpus["command"], "file": file, "functions_found": corpus["functions"]["found"],
            "functions_kept": corpus["kept"]["documents"], "bytes": corpus["kept"]["bytes"],
            "byte_tokens": corpus["kept"]["byte_tokens"], "model_tokens": corpus["model_tokens"],
            "tokenizer": pretrain_receipt["config"]["tokenizer"], "sha256": corpus["corpus"]["sha256"],
            "mix": pretrain_receipt["run"]["corpus_mix"]}


def split_note(split: str, notes: dict) -> str:
    """What a split holds (a -doc split: its comment split's note, in docstring style)."""
    if split.endswith(DOCSTRING_SUFFIX) and split.removesuffix(DOCSTRING_SUFFIX) in notes:
        return notes[split.removesuffix(DOCSTRING_SUFFIX)] + ", docstring prompts"
    return notes.get(split, "")


def split_rows(results: dict) -> dict:
    """Per split: tasks, solved before and after, gains, losses, McNemar p, mean difference and interval."""
    rows = {}
    for split, (before, after, comparison) in results.items():
        o = comparison["comparisons"][0]["overall"]
        rows[split] = {"tasks": o["tasks"], "before": o["solved_a"], "after": o["solved_b"], "gains": o["gains"],
                       "losses": o["losses"], "mcnemar_p": o["mcnemar_p"], "mean_difference": o["mean_difference"],
                       "bootstrap_95": o["bootstrap_95"],
                       "token_cap_hits_after": after["summary"]["token_cap_hits"],
                       "valid_after": after["summary"]["valid_programs"]}
    return rows


def breakdown(results: dict, key) -> dict:
    """{group: [tasks, solved before, solved after]} over every split's tasks, grouped by key(row)."""
    out: dict = defaultdict(lambda: [0, 0, 0])
    for before, after, _ in results.values():
        solved_after = {r["task_id"]: r["passed"] > 0 for r in after["tasks"]}
        for r in before["tasks"]:
            group = key(r)
            if group is None:
                continue
            out[group][0] += 1
            out[group][1] += r["passed"] > 0
            out[group][2] += solved_after.get(r["task_id"], False)
    return dict(out)


def split_chart(run: Path, rows: dict) -> str:
    charts = run / "charts"
    charts.mkdir(exist_ok=True)
    splits = list(rows)
    fig, ax = plt.subplots(figsize=(9, 4))
    width, idx = 0.38, range(len(splits))
    ax.bar([i - width / 2 for i in idx], [rows[s]["before"] / rows[s]["tasks"] for s in splits], width,
           color=COLORS["before"], label="RL start")
    ax.bar([i + width / 2 for i in idx], [rows[s]["after"] / rows[s]["tasks"] for s in splits], width,
           color=COLORS["after"], label="after RL")
    ax.set_xticks(list(idx), [f"{s}\n({rows[s]['tasks']})" for s in splits])
    ax.set_ylim(0, 1)
    ax.legend(frameon=False)
    _style(ax, "Greedy pass@1 by split", "", "fraction of tasks solved")
    return _save(fig, charts, "before_after_by_split.png")


def _pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.0f}%)" if d else "-"


def _code(text: str) -> list[str]:
    return code_block(text, "python")  # a fence longer than any run of backticks in the model's text


def write_suite_report(run: Path, info: dict, results: dict, charts: list[str]) -> str:
    rows = split_rows(results)
    from_stream = info.get("rl_task_source") == "stream"  # RL's tasks came from the stream, not the rl split
    notes = {**SPLIT_NOTES, "rl": "drawn like the stream, unseen (RL trained on other such tasks)"} if from_stream \
        else SPLIT_NOTES
    seconds = info["seconds"]
    lines = [f"# glm53 run: {run.name} ({info['suite']} suite)", "",
             f"Seed {info['seed']}, preset `{info['preset']}`, device {info['device']}, verifier level "
             f"`{info['language']}`; total {seconds['total']:.0f} s ("
             + ", ".join(f"{k} {v:.0f} s" for k, v in seconds.items() if k != "total") + "). RL started from "
             f"`{info['rl_start']}`; the RL checkpoint (group {info['selected_rl_group']}) was chosen on dev; the "
             f"chosen model is in `final/` (save_pretrained format).", ""]
    if "corpus" in info:
        c = info["corpus"]
        lines += [f"Pretraining read `{c['file']}` beside the suite's stream, {c['mix']:g} of each step's rows: "
                  f"`{c['command']}` with its defaults kept {c['functions_kept']:,} of {c['functions_found']:,} "
                  f"functions found ({c['bytes']:,} bytes, {c['model_tokens']:,} {c['tokenizer']} tokens with BOS and "
                  f"EOS), sha256 `{c['sha256']}` (counts of every stage: `corpus/receipt.json`).", ""]
    lines += ["## Before and after RL (greedy pass@1, each split paired on its own tasks)", "",
             "| split | what it holds | RL start | after RL | gains | losses | McNemar p | mean difference [95% "
             "bootstrap] |", "|---|---|---|---|---|---|---|---|"]
    for split, r in rows.items():
        lo, hi = r["bootstrap_95"]
        lines.append(f"| {split} | {split_note(split, notes)} | {_pct(r['before'], r['tasks'])} | "
                     f"{_pct(r['after'], r['tasks'])} | {r['gains']} | {r['losses']} | {r['mcnemar_p']:.3g} | "
                     f"{r['mean_difference']:+.3f} [{lo:+.3f}, {hi:+.3f}] |")
    lines += ["", "Tasks are treated as independent (tasks of one split share primitives and phrasings). "
              + (f"dev chose both checkpoints, and RL trained on the rl split's first {info['rl_tasks']} tasks, so "
                 "only confirm, compose, phrase and human are untouched by the run." if not from_stream else
                 f"dev chose both checkpoints; RL trained on {info['rl_tasks']} tasks drawn like the pretraining "
                 "stream (--task-source stream), none of the rl split's, so rl, confirm, compose, phrase and human "
                 "are untouched by the run."), ""]
    if "humaneval" in info:
        lines += humaneval_section(info["humaneval"])
    depth = breakdown(results, lambda r: r.get("depth"))
    if depth:
        lines += ["## By depth (generated splits pooled)", "", "| depth | tasks | RL start | after RL |",
                  "|---|---|---|---|"]
        lines += [f"| {d} | {n} | {_pct(b, n)} | {_pct(a, n)} |" for d, (n, b, a) in sorted(depth.items())]
        lines.append("")
    roots = breakdown(results,
                      lambda r: r["family"].removeprefix("broad/") if r["family"].startswith("broad/") else None)
    if roots:
        lines += ["## By root primitive (generated splits pooled)", "",  # plain Markdown: serve renders no raw HTML
                  "| root | tasks | RL start | after RL |", "|---|---|---|---|"]
        order = sorted(roots.items(), key=lambda kv: (-kv[1][2] / kv[1][0], -kv[1][0], kv[0]))
        lines += [f"| {root} | {n} | {b} | {a} |" for root, (n, b, a) in order]
        lines.append("")
    lines += ["## Charts", ""] + [f"![{Path(c).stem}]({c})" for c in charts] + [""]
    lines += ["## Example generations", "", "The first task of each split whose greedy completion RL changed (or the "
              "first task), before and after RL.", ""]
    for split, (before, after, _) in results.items():
        after_rows = {r["task_id"]: r for r in after["tasks"]}
        pairs = [(r, after_rows[r["task_id"]]) for r in before["tasks"] if r["task_id"] in after_rows]
        if not pairs:
            continue
        b, a = next(((x, y) for x, y in pairs if x["samples"][0]["completion"] != y["samples"][0]["completion"]),
                    pairs[0])
        lines += [f"### {split}: {b['task_id']}", "", *_code(b["prompt"]), "",
                  f"RL start ({b['samples'][0]['verdict']['status']}):", "", *_code(b["samples"][0]["completion"]), "",
                  f"after RL ({a['samples'][0]['verdict']['status']}):", "", *_code(a["samples"][0]["completion"]), ""]
    lines += ["## Receipts", "", "- pretraining: `pretrain/training-receipt.json`, curve `pretrain/train_log.jsonl`",
              "- RL: `rl/training-receipt.json` (every rollout, reward and advantage), `rl/schedule.json`",
              "- evaluation: `eval/<split>-tasks.jsonl`, `eval/before-<split>.json`, `eval/after-<split>.json`, "
              "`eval/comparison-<split>.json`",
              "- the chosen model: `final/` (`GLM53.from_pretrained`, `glm53 eval --checkpoint`)",
              *(["- HumanEval: `humaneval/<name>.json`, `humaneval/<name>-samples.jsonl`"] if "humaneval" in info
                else []),
              *(["- the corpus: `corpus/corpus.jsonl`, `corpus/receipt.json`"] if "corpus" in info else []),
              "- this run: `run-receipt.json`", ""]
    text = "\n".join(lines)
    atomic_write_text(run / "REPORT.md", text, overwrite=True)
    return text
