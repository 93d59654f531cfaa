"""The runs view: the run folders under --runs, read-only. A run folder is a direct child of --runs holding what
glm53 writes: a `glm53 run` folder (REPORT.md, run-receipt.json, pretrain/ and rl/ beside them) or a single
`glm53 pretrain` or `glm53 rl` folder (run.json, train_log.jsonl or rl_log.jsonl, training-receipt.json).

Each run gives its REPORT.md as HTML (Markdown's tables and fenced code; its charts are served from the folder),
its receipt, and its curves: the training loss and validation loss of pretraining, RL's mean reward. Files are
served only from inside the run folder, only of the kinds a report links (images), by their resolved path.
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


def is_run(folder: Path) -> bool:
    return folder.is_dir() and any((folder / stage / name).is_file() for stage in STAGES
                                   for name in (REPORT, *RECEIPTS, *LOGS))


def list_runs(root: Path) -> list[dict]:
    runs = []
    for folder in sorted(p for p in root.iterdir() if NAME.fullmatch(p.name) and is_run(p)):
        receipt = next((name for name in RECEIPTS if (folder / name).is_file()), None)
        runs.append({"name": folder.name, "report": (folder / REPORT).is_file(), "receipt": receipt,
                     "finished": receipt is not None})
    return runs


def run_folder(root: Path, name: str) -> Path:
    """The run folder called `name` under root, or a LookupError (a name that is not a plain folder name, or no
    such run)."""
    if not NAME.fullmatch(name) or name in (".", ".."):
        raise LookupError(f"no run called {name[:60]!r}")
    folder = root / name
    if not is_run(folder):
        raise LookupError(f"no run called {name!r} under --runs")
    return folder


def report_html(folder: Path, file_url: str) -> str | None:
    """REPORT.md as HTML, its relative links to images pointed at `file_url` + path; None without a report."""
    import markdown

    path = folder / REPORT
    if not path.is_file():
        return None
    html = markdown.markdown(path.read_text(errors="replace"), extensions=["tables", "fenced_code"])
    return re.sub(r'(<img[^>]*src=")(?!https?:|/|data:)([^"]+)"', lambda m: f'{m[1]}{file_url}{m[2]}"', html)


def receipt(folder: Path) -> dict | None:
    for name in RECEIPTS:
        try:
            return {"file": name, "receipt": json.loads((folder / name).read_text())}
        except (OSError, ValueError):
            continue
    return None


def curves(folder: Path) -> list[dict]:
    """[{"name": "pretrain loss", "points": [[step, value], ...]}, ...] from the run's logs (a line that is not
    JSON, the last one of a run still writing, is skipped)."""
    found = []
    for stage in STAGES:
        for log, keys in LOGS.items():
            path = folder / stage / log
            if not path.is_file():
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
    path = (folder / relative).resolve()
    media = SERVED_SUFFIXES.get(path.suffix.lower())
    if media is None or not path.is_relative_to(folder.resolve()) or not path.is_file():
        raise LookupError(f"no image {relative[:80]!r} in this run")
    return path, media
