"""`glm53 report RUN_DIR`: the curves, a summary table and example completions of any run folder, as REPORT.md with
PNG charts, drawn from the JSON Lines logs and receipts the commands write (charts.py draws them):

    pretrain  train_log.jsonl: training and validation loss, lr, gradient norm, tokens/s; the receipt's checkpoints:
              dev pass@1 and the last checkpoint's dev completions (or, in a corpus run, its held-out samples)
    rl        rl_log.jsonl: reward, groups without signal, loss, gradient norm; the receipt's dev scores; the last
              rollouts.jsonl rows as examples
    run       its pretrain/ and rl/ stages, each as above (the job's own REPORT.md is left as it is)
    sweep     sweep-log.jsonl: each job's status and wall time; the training loss of each job that logged one
    vision    and any other folder holding one of these logs or a training-receipt.json: what of the above it has

Where it is written: --out (default RUN_DIR/report), a folder this command owns: made whole in a temporary folder
beside it and put in place in one rename, so a reader never sees half a report. It is derived from the run folder,
so a report folder this command wrote (it holds .glm53-report) is regenerated; any other existing --out is refused,
as is a folder that is not a run folder, each with one line. Simplification: the charts are those of the figures
the logs hold; a figure that is missing (an older log, a stage not run) is left out, not reconstructed.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from ..runtime.files import read_jsonl
from . import charts as draw
from .escape import code_span

MARKER = ".glm53-report"
LOGS = ("train_log.jsonl", "rl_log.jsonl", "sweep-log.jsonl", "training-receipt.json")
EXAMPLES = 4


def _receipt(folder: Path) -> dict:
    path = folder / "training-receipt.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def stages(run: Path) -> list[tuple[str, Path]]:
    """(name, folder) of each stage the report draws: the folder itself, or a main job's pretrain/ and rl/."""
    if any((run / name).is_file() for name in LOGS):
        return [(run.name, run)]
    return [(name, run / name) for name in ("pretrain", "rl") if any((run / name / n).is_file() for n in LOGS)]


def check_folders(run: Path, out: Path) -> None:
    """One-line ValueErrors, before anything is written: not a run folder, or an --out that is not ours."""
    if not run.is_dir() or not stages(run):
        raise ValueError(f"{run} is not a glm53 run folder (no {', '.join(LOGS)}, nor pretrain/ or rl/ holding one); "
                         "give a folder that pretrain, rl, run, vision or sweep wrote")
    if out.exists() and not (out / MARKER).is_file():
        raise ValueError(f"--out {out} exists and is not a report this command wrote; glm53 never overwrites "
                         "results: give another --out or remove it")


def _pretrain_section(folder: Path, charts: Path, prefix: str) -> list[str]:
    curve, receipt = read_jsonl(folder / "train_log.jsonl"), _receipt(folder)
    checkpoints = receipt.get("checkpoints", [])
    lines, images = [], []
    if curve:
        images.append(draw.loss_chart(charts, curve, checkpoints, f"{prefix}loss.png", "Training loss"))
        for key, title, log in (("lr", "Learning rate", False), ("grad_norm", "Gradient norm (before clipping)", True),
                                ("tokens_per_second", "Training tokens per second", False)):
            if any(key in r for r in curve):
                rows = [r for r in curve if key in r]
                images.append(draw.line_chart(charts, f"{prefix}{key}.png", title, "step", key,
                                              [(key, [r["step"] for r in rows], [r[key] for r in rows])], log))
    dev = [c for c in checkpoints if c.get("dev_tasks")]
    if dev:
        images.append(draw.line_chart(charts, f"{prefix}dev.png", "Dev greedy pass@1 at the checkpoints", "step",
                                      "pass@1", [("dev", [c["step"] for c in dev],
                                                  [c["dev_passed"] / c["dev_tasks"] for c in dev])]))
    lines += [f"![{Path(i).stem}]({i})" for i in images]
    last = checkpoints[-1] if checkpoints else {}
    if last.get("corpus_samples"):
        lines += ["", f"Held-out corpus text completed at step {last['step']} (validation loss "
                      f"{last.get('val_loss', float('nan')):.4f}):", ""]
        lines += draw.table(["prompt", "completion"], [[code_span(repr(s["prompt"])), code_span(repr(s["completion"]))]
                                                        for s in last["corpus_samples"][:EXAMPLES]])
    elif last.get("dev_completions"):
        lines += ["", f"Dev completions at step {last['step']}:", ""]
        lines += draw.table(["task", "status", "completion"],
                            [[s["task_id"], s["status"], code_span(repr(s["completion"]))]
                             for s in last["dev_completions"][:EXAMPLES]])
    return lines


def _rl_section(folder: Path, charts: Path, prefix: str) -> list[str]:
    steps, receipt = read_jsonl(folder / "rl_log.jsonl"), _receipt(folder)
    images, lines = [], []
    if steps:
        x = [s["groups_done"] for s in steps]
        images.append(draw.line_chart(charts, f"{prefix}reward.png", "RL reward", "groups", "per update",
                                      [("mean reward", x, [s["reward_mean"] for s in steps]),
                                       ("groups without signal", x, [s["zero_variance_fraction"] for s in steps])]))
        images.append(draw.line_chart(charts, f"{prefix}update.png", "RL update", "groups", "per update",
                                      [(k, x, [s.get(k) or 0.0 for s in steps]) for k in ("loss", "grad_norm")]))
    dev = [c for c in receipt.get("checkpoints", []) if c.get("dev")]
    if dev:
        images.append(draw.line_chart(charts, f"{prefix}dev.png", "Dev exact rollouts during RL", "groups",
                                      "fraction passing", [("dev", [c["group"] for c in dev],
                                                            [c["dev"]["exact_rollouts"] / c["dev"]["rollouts"]
                                                             for c in dev])]))
    lines += [f"![{Path(i).stem}]({i})" for i in images]
    rollouts = read_jsonl(folder / "rollouts.jsonl")[-EXAMPLES:]
    if rollouts:
        lines += ["", "The last rollouts:", ""]
        lines += draw.table(["task", "status", "reward", "completion"],
                            [[r.get("task_id", ""), r.get("verdict", {}).get("status", ""), float(r.get("reward", 0)),
                              code_span(repr(r.get("completion", "")))] for r in rollouts])
    return lines


def _sweep_section(run: Path, charts: Path) -> list[str]:
    log = read_jsonl(run / "sweep-log.jsonl")
    lines = draw.table(["job", "status", "seconds"], [[r.get("job", r.get("name", "")), r.get("status", ""),
                                                       float(r.get("seconds", r.get("wall_seconds", 0.0)))]
                                                      for r in log]) if log else []
    series = []
    for job in sorted(p for p in run.glob("runs/*/*") if p.is_dir()):
        name = f"{job.parent.name}/{job.name}"
        logs = [log for log in (job / "train_log.jsonl", job / "run" / "train_log.jsonl") if log.is_file()]
        if logs:  # a pretraining job's own log
            curve = read_jsonl(logs[0])
            series.append((name, [r["step"] for r in curve], [r["loss"] for r in curve]))
        elif (job / "receipt.json").is_file():  # an expression-data job keeps its curve in its receipt
            losses = json.loads((job / "receipt.json").read_text()).get("loss_curve") or []
            if losses:
                series.append((name, list(range(1, len(losses) + 1)), losses))
    if series:
        image = draw.line_chart(charts, "sweep_loss.png", "Training loss per job", "step", "loss", series, log=True)
        lines = [f"![sweep_loss]({image})", ""] + lines
    return lines


def _summary(folder: Path) -> list[str]:
    """The receipt's scalar figures, one row each."""
    receipt = _receipt(folder)
    rows = [[k, v] for k, v in receipt.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)
            and len(str(v)) < 80]
    return draw.table(["figure", "value"], rows) if rows else []


def write_folder_report(run_dir: str | os.PathLike, out: str | os.PathLike | None = None) -> Path:
    """Write OUT/REPORT.md and OUT/charts/*.png for `run_dir` (module docstring); returns OUT."""
    run = Path(run_dir)
    out = Path(out) if out else run / "report"
    check_folders(run, out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        charts = tmp / "charts"
        charts.mkdir()
        lines = [f"# glm53 report: {run.resolve().name}", "",
                 f"Drawn by `glm53 report` from {code_span(str(run))}.", ""]
        if (run / "sweep-log.jsonl").is_file():
            lines += ["## Sweep", ""] + _sweep_section(run, charts) + [""]
        for name, folder in stages(run):
            lines += [f"## {name}", ""] + _summary(folder) + [""]
            rl = (folder / "rl_log.jsonl").is_file()
            if (folder / "train_log.jsonl").is_file() or (not rl and (folder / "training-receipt.json").is_file()):
                lines += _pretrain_section(folder, charts, f"{name}_") + [""]
            if rl:
                lines += _rl_section(folder, charts, f"{name}_") + [""]
        (tmp / "REPORT.md").write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
        (tmp / MARKER).write_text("written by glm53 report; regenerated by it\n")
        old = None
        if out.exists():
            old = out.parent / f".{out.name}.old.tmp"
            os.replace(out, old)
        os.replace(tmp, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out
