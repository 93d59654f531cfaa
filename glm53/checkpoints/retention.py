"""What a run folder keeps of its checkpoints: `--keep-last N` and `--save-optimizer/--no-save-optimizer`.

A checkpoint of the reference model is 103 MB of weights and 206 MB of trainer state (AdamW's two moments per
parameter, and the RNG states), and a run keeps every checkpoint whole unless told otherwise. With --keep-last N,
after each checkpoint is written, every older checkpoint beyond the newest N loses its trainer state and its
weights; its metadata.json (the weights' sha256, the dev scores) and config.json stay, so receipts, charts and
reports still list it. A caller may name checkpoints whose weights must stay (the main job: the RL start, and the
checkpoint dev prefers so far); those lose only their trainer state. The newest N keep everything, so the newest
checkpoint always holds what --resume needs. With --no-save-optimizer no trainer state is written at all, and
the run cannot be resumed.

Simplified: pruning deletes files in place once the newer checkpoint is complete, the trainer state before the
weights, so no folder is left with a trainer state but no weights (resume takes the newest folder with a
trainer state); a prune cut short leaves files behind that the next one (or the run's end) deletes. Folders
without metadata.json are never touched: nothing would record what they held.

Light: no torch at import (the configs that nest `Retention` are read by `glm53 --help`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from ..runtime.composition import record
from ..runtime.settings import Checks, setting
from .names import TRAINER_STATE_NAME, WEIGHTS_NAME

# Settings a resumed run may change: they decide what stays on disk, never what is computed.
RETENTION_CHANGES = frozenset({"keep_last", "keep_checkpoints"})


@dataclass
class Retention:
    """Which checkpoint files a training run writes and keeps (flattened into pretraining's and RL's settings)."""

    keep_last: int = setting(0, "after each checkpoint, delete the weights and trainer state of all but the newest N "
                                "(their metadata.json stays, so receipts and reports still list them); 0 keeps every "
                                "checkpoint whole", at_least=0)
    save_optimizer: bool = setting(True, "save the optimizer and RNG states with each checkpoint, which --resume needs "
                                         "(--no-save-optimizer: weights only, a third of the disk, no resume)")

    def __post_init__(self) -> None:
        check = Checks("retention")
        check.declared(self)
        check.done()

    def check(self, check: Checks, resume: bool) -> None:
        """Add what depends on the enclosing config (its --resume) to its `check`."""
        check.require(self.save_optimizer or not resume,
                      "--resume needs the optimizer state that --no-save-optimizer leaves out of every checkpoint: "
                      "drop --no-save-optimizer (a run started with it cannot be resumed)")

    def to_dict(self) -> dict:
        return record(self)


def prune_checkpoints(out: str | Path, whole: int, keep_weights: Iterable[str] = ()) -> list[str]:
    """Every checkpoint in `out` but the newest `whole` (0: none) loses its trainer state, and its weights unless
    its folder name is in `keep_weights`. Returns the names of the folders that lost a file now."""
    from .format import checkpoint_folders

    keep_weights = set(keep_weights)
    folders = checkpoint_folders(out)
    changed = []
    for folder in folders[:max(0, len(folders) - whole)]:
        names = [TRAINER_STATE_NAME] + ([] if folder.name in keep_weights else [WEIGHTS_NAME])  # state first
        present = [folder / name for name in names if (folder / name).is_file()]
        for file in present:
            file.unlink()
        if present:
            changed.append(folder.name)
    return changed


def retention_record(out: str | Path) -> dict:
    """What the checkpoints in `out` hold now, for a receipt: those pruned to their metadata, and those that kept
    their weights but no trainer state; every other one is whole."""
    from .format import checkpoint_folders

    folders = checkpoint_folders(out)
    return {"pruned": [f.name for f in folders if not (f / WEIGHTS_NAME).is_file()],
            "weights_only": [f.name for f in folders
                             if (f / WEIGHTS_NAME).is_file() and not (f / TRAINER_STATE_NAME).is_file()]}


def apply_retention(out: str | Path, retention: Retention, records: list[dict],
                    keep: Callable[[list[dict]], Iterable[str]] | None = None) -> dict:
    """After a checkpoint is written (and when the run ends, for what an interrupted prune left): prune what
    --keep-last lets go, sparing the weights of the checkpoints `keep(records)` names. Returns `retention_record`."""
    if retention.keep_last:
        prune_checkpoints(out, retention.keep_last, keep(records) if keep else ())
    return retention_record(out)
