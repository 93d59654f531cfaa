"""The charts (matplotlib PNG, Agg) and Markdown tables the reports draw with: `glm53 report` (folder_report.py)
and the main job's REPORT.md (run_report.py, run_suite_report.py). matplotlib is imported when the first chart is
drawn, so the modules that import this one load without it."""

from __future__ import annotations

import html
from pathlib import Path

from .escape import Markdown

COLORS = {"before": "#9aa5b1", "after": "#2f6fdf", "line": "#2f6fdf", "accent": "#e8743b"}
SERIES_COLORS = ("#2f6fdf", "#e8743b", "#3a9d5d", "#9b59b6", "#c0392b", "#7f8c8d")


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def style(ax, title: str, xlabel: str, ylabel: str) -> None:
    ax.set_title(title, loc="left", fontsize=12, fontweight="bold")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(alpha=0.25)


def save(fig, charts: Path, name: str) -> str:
    """Write the figure as charts/NAME (140 dpi) and close it; returns the path relative to the report."""
    fig.tight_layout()
    fig.savefig(charts / name, dpi=140)
    pyplot().close(fig)
    return f"charts/{name}"


def loss_chart(charts: Path, curve: list[dict], checkpoints: list[dict], name: str = "training_loss.png",
               title: str = "Pretraining loss") -> str:
    """The training loss per step with the validation loss (the log's rows that carry one, and step 0's, which
    only its checkpoint record holds), log scale."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([r["step"] for r in curve], [r["loss"] for r in curve], color=COLORS["line"], lw=1.5, label="training")
    val = sorted({**{c["step"]: c["val_loss"] for c in checkpoints if "val_loss" in c},
                  **{r["step"]: r["val_loss"] for r in curve if "val_loss" in r}}.items())
    if val:
        ax.plot([s for s, _ in val], [v for _, v in val], marker="o", ms=4, color=COLORS["accent"], lw=1.5,
                label="validation (held out)")
        ax.legend(frameon=False)
    ax.set_yscale("log")
    style(ax, title, "step", "next-token cross-entropy (log scale; a token is a byte unless --tokenizer)")
    return save(fig, charts, name)


def line_chart(charts: Path, name: str, title: str, xlabel: str, ylabel: str,
               series: list[tuple[str, list, list]], log: bool = False) -> str:
    """One line per (label, xs, ys), markers where a series has few points; a legend when there are several."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (label, xs, ys) in enumerate(series):
        ax.plot(xs, ys, color=SERIES_COLORS[i % len(SERIES_COLORS)], lw=1.5, label=label,
                marker="o" if len(xs) <= 20 else None, ms=4)
    if len(series) > 1:
        ax.legend(frameon=False, fontsize=8)
    if log:
        ax.set_yscale("log")
    style(ax, title, xlabel, ylabel)
    return save(fig, charts, name)


def table(header: list[str], rows: list[list]) -> list[str]:
    """A Markdown table's lines; cells are written with str(), floats to 4 significant digits, `|` and `&<>`
    escaped (no HTML in a cell is live), line breaks as spaces; a cell made by escape.code_span is written as it is."""
    def cell(v) -> str:
        if isinstance(v, Markdown):
            return v
        text = f"{v:.4g}" if isinstance(v, float) else str(v)
        return html.escape(text, quote=False).replace("|", "\\|").replace("\r", " ").replace("\n", " ")

    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + \
        ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
