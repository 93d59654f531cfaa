"""`--report-to`: the per-step figures of the JSON Lines logs, also sent to an experiment tracker.

- tensorboard: event files in RUN/tensorboard (`tensorboard --logdir DIR` shows every run below DIR: a sweep's
  runs by arm and seed). Needs the `tensorboard` package (`pip install -e ".[tensorboard]"`).
- wandb: a Weights & Biases run in RUN/wandb, offline unless WANDB_MODE says otherwise (`wandb sync` uploads it
  later); project = the group (a sweep's name) or "glm53".
- trackio: a local Trackio project (its SQLite store in TRACKIO_DIR, by default in the user's cache); nothing
  leaves the machine unless TRACKIO_SPACE_ID names a Space.

The JSON Lines logs stay the record; a tracker is a view of them. Only numbers are sent (lists, strings and
missing values are left out).
"""

from __future__ import annotations

import importlib.util
import numbers
import os
from contextlib import contextmanager
from pathlib import Path

TRACKERS = ("none", "tensorboard", "wandb", "trackio")
PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio"}


def tracker_problem(kind: str) -> str | None:
    """What stops `--report-to kind` here (a missing package, named with its install command), or None."""
    package = PACKAGES.get(kind)
    if package is None or importlib.util.find_spec(package) is not None:
        return None
    return f"--report-to {kind} needs the {package} package: pip install -e \".[{kind}]\" (or pip install {package})"


def scalars(row: dict) -> dict[str, float]:
    return {k: float(v) for k, v in row.items()
            if isinstance(v, numbers.Real) and not isinstance(v, bool) and k != "step"}


class TensorBoardTracker:
    def __init__(self, out: Path, name: str, config: dict):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(out / "tensorboard"))
        self.writer.add_text("config", "\n".join(f"    {k}: {v}" for k, v in sorted(config.items())), 0)

    def log(self, row: dict, step: int) -> None:
        for key, value in scalars(row).items():
            self.writer.add_scalar(key, value, step)

    def close(self) -> None:
        self.writer.close()


class WandbTracker:
    def __init__(self, out: Path, name: str, group: str, config: dict):
        import wandb

        self.run = wandb.init(project=group or "glm53", name=name, group=group or None, config=config,
                              dir=str(out), mode=os.environ.get("WANDB_MODE", "offline"), reinit="finish_previous")

    def log(self, row: dict, step: int) -> None:
        self.run.log(scalars(row), step=step)

    def close(self) -> None:
        self.run.finish()


class TrackioTracker:
    def __init__(self, name: str, group: str, config: dict):
        import trackio

        self.trackio = trackio
        trackio.init(project=group or "glm53", name=name, group=group or None, config=config)

    def log(self, row: dict, step: int) -> None:
        self.trackio.log(scalars(row), step=step)

    def close(self) -> None:
        self.trackio.finish()


def open_tracker(kind: str, out: str | os.PathLike, name: str = "", group: str = "", config: dict | None = None):
    """A tracker with log(row, step) and close(), or None for "none". `name` defaults to the run folder's path."""
    if kind == "none":
        return None
    problem = tracker_problem(kind)
    if problem:
        raise ValueError(problem)
    out, config = Path(out), config or {}
    name = name or str(out)
    if kind == "tensorboard":
        return TensorBoardTracker(out, name, config)
    if kind == "wandb":
        return WandbTracker(out, name, group, config)
    if kind == "trackio":
        return TrackioTracker(name, group, config)
    raise ValueError(f"--report-to must be one of {', '.join(TRACKERS)}, got {kind!r}")


@contextmanager
def reporting(kind: str, out: str | os.PathLike, name: str = "", group: str = "", config: dict | None = None):
    """`open_tracker` for a `with` block: the tracker (None for "none") is closed however the block ends, so a run
    stopped by an error still flushes a TensorBoard file and finishes a W&B run."""
    tracker = open_tracker(kind, out, name, group, config)
    try:
        yield tracker
    finally:
        if tracker is not None:
            tracker.close()
