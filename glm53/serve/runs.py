"""The runs view: the run folders under --runs, read-only. A run folder is a direct child of --runs holding what
glm53 writes: a `glm53 run` folder (REPORT.md, run-receipt.json, pretrain/ and rl/ beside them) or a single
`glm53 pretrain` or `glm53 rl` folder (run.json, train_log.jsonl or rl_log.jsonl, training-receipt.json).

Each run gives its REPORT.md as HTML (Markdown's tables and fenced code; its charts are served from the folder),
its receipt, and its curves: the training loss and validation loss of pretraining, RL's mean reward. Every path is
resolved and must stay inside: a run folder inside --runs, a file inside its run folder (a symlink out of them is
as good as absent). Files are served only of the kinds a report links (images). A report's raw HTML is shown as
text, and what Markdown makes of it is sanitised (nh3): a run folder may come from anyone, the page must not run it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

REPORT = "REPORT.md"
RECEIPTS = ("run-receipt.json", "training-receipt.json")
LOGS = {"train_log.jsonl": ("loss", "val_loss"), "rl_log.jsonl": ("reward_mean",)}
STAGES = ("", "pretrain", "rl")  # where a run's logs lie: the folder itself, or a `glm53 run` folder's stages
SERVED_SUFFIXES = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
MAX_CURVE_POINTS = 2000  # a long log is thinned to about this many points a curve
NAME = re.compile(r"[A-Za-z0-9._-]{1,200}")


def inside(folder: Path, *parts: str, kind: str = "file") -> Path | None:
    """folder/parts resolved, if it is a file (or a folder) inside folder; None for one that is not there, that a
    symlink takes outside, or whose path the system refuses (a NUL, too long)."""
    try:
        path = folder.joinpath(*parts).resolve()
        found = path.is_file() if kind == "file" else path.is_dir()
        return path if found and path.is_relative_to(folder.resolve()) else None
    except (OSError, ValueError):
        return None


def is_run(folder: Path) -> bool:
    return any(inside(folder, stage, name) for stage in STAGES for name in (REPORT, *RECEIPTS, *LOGS))


def list_runs(root: Path) -> list[dict]:
    runs = []
    for name in sorted(p.name for p in root.iterdir() if NAME.fullmatch(p.name)):
        folder = inside(root, name, kind="folder")
        if folder is None or not is_run(folder):
            continue
        receipt = next((r for r in RECEIPTS if inside(folder, r)), None)
        runs.append({"name": name, "report": inside(folder, REPORT) is not None, "receipt": receipt,
                     "finished": receipt is not None})
    return runs


def run_folder(root: Path, name: str) -> Path:
    """The run folder called `name` under root, or a LookupError (a name that is not a plain folder name, or no
    such run)."""
    if not NAME.fullmatch(name) or name in (".", ".."):
        raise LookupError(f"no run called {name[:60]!r}")
    folder = inside(root, name, kind="folder")
    if folder is None or not is_run(folder):
        raise LookupError(f"no run called {name!r} under --runs")
    return folder


def report_html(folder: Path, file_url: str) -> str | None:
    """REPORT.md as sanitised HTML, its relative links to images pointed at `file_url` + path; None without a
    report. Raw HTML in it is shown as text, never as markup."""
    import markdown
    import nh3

    path = inside(folder, REPORT)
    if path is None:
        return None
    md = markdown.Markdown(extensions=["tables", "fenced_code"])
    md.preprocessors.deregister("html_block")
    md.inlinePatterns.deregister("html")
    html = md.convert(path.read_text(errors="replace"))
    html = re.sub(r'(<img[^>]*src=")(?!https?:|/|data:)([^"]+)"', lambda m: f'{m[1]}{file_url}{m[2]}"', html)
    return nh3.clean(html, url_schemes={"http", "https", "mailto"})


def receipt(folder: Path) -> dict | None:
    for name in RECEIPTS:
        path = inside(folder, name)
        try:
            if path:
                return {"file": name, "receipt": json.loads(path.read_text())}
        except (OSError, ValueError):
            continue
    return None


def curves(folder: Path) -> list[dict]:
    """[{"name": "pretrain loss", "points": [[step, value], ...]}, ...] from the run's logs (a line that is not
    JSON, the last one of a run still writing, is skipped)."""
    found = []
    for stage in STAGES:
        for log, keys in LOGS.items():
            path = inside(folder, stage, log)
            if path is None:
                continue
            series: dict[str, list] = {k: [] for k in keys}
            with path.open(errors="replace") as lines:
                for line in lines:
                    try:
                        row = json.loads(line)
                    except ValueError:
                        continue
                    for k in keys:
                        if isinstance(row, dict) and isinstance(row.get(k), (int, float)) and "step" in row:
                            series[k].append([row["step"], row[k]])
            label = stage or ("rl" if log.startswith("rl") else "pretrain")
            for k, points in series.items():
                if points:
                    stride = max(1, len(points) // MAX_CURVE_POINTS)
                    found.append({"name": f"{label} {k}", "points": points[::stride]})
    return found


def run_file(folder: Path, relative: str) -> tuple[Path, str]:
    """A file a report links, by its path inside the run folder: (path, media type), or a LookupError for one
    outside the folder, of another kind, or absent."""
    path = inside(folder, relative)
    media = SERVED_SUFFIXES.get(path.suffix.lower()) if path else None
    if media is None:
        raise LookupError(f"no image {relative[:80]!r} in this run")
    return path, media
