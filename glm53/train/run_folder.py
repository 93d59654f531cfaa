"""A training run's folder over its life: started, refused or resumed, and restored exactly from its newest
checkpoint (model, optimizer and RNG states). The checkpoint format itself is checkpoints/format.py's.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import torch

from ..checkpoints.format import check_switches, checkpoint_folders, verify_checkpoint
from ..checkpoints.names import METADATA_NAME, RECEIPT_NAME, RUN_CONFIG_NAME, TRAINER_STATE_NAME, WEIGHTS_NAME
from ..model.config import ModelConfig
from ..model.model import GLM53
from ..model.saved import read_metadata
from ..runtime.config_file import run_kind
from ..runtime.files import atomic_write_json, is_housekeeping, refuse_nonempty_dir, sha256_file
from ..runtime.setting_history import read_as_today, with_added


def rng_state() -> dict:
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def load_trainer_state(path: str | os.PathLike) -> dict:
    """A checkpoint's optimizer and RNG states, checked against the sha256 in its metadata.json, and loaded as
    tensors and plain values only (weights_only): a pickle in it never runs. A checkpoint written before the hash
    was recorded has none to check; weights_only still refuses anything but plain data in it."""
    file = Path(path) / TRAINER_STATE_NAME
    if not file.is_file():
        raise FileNotFoundError(f"{file} is missing: this checkpoint cannot be resumed")
    recorded = read_metadata(path).get("trainer_state_sha256") if (Path(path) / METADATA_NAME).is_file() else None
    if recorded is not None and recorded != sha256_file(file):
        raise ValueError(f"{file}: its sha256 does not match the one recorded in {METADATA_NAME}; the trainer state "
                         "is damaged or was changed since it was saved. Delete this checkpoint folder to resume from "
                         "the one before it, or start a new --out")
    try:
        state = torch.load(file, weights_only=True)
    except Exception as err:  # noqa: BLE001 - a truncated, foreign or code-carrying file fails in many ways
        raise ValueError(f"{file} cannot be read as tensors and plain values ({type(err).__name__}); the trainer "
                         "state is damaged, or holds objects that loading would run as code. Delete this checkpoint "
                         "folder to resume from the one before it") from None
    if not isinstance(state, dict) or "optimizer" not in state or "rng" not in state:
        raise ValueError(f"{file} is not a glm53 trainer state; delete this checkpoint folder to resume from the one "
                         "before it")
    return state


def setting_differences(recorded: dict, now: dict, may_change, prefix: str = "") -> list[str]:
    """The settings in `now` that differ from `recorded`, a nested config's by their dotted names ("model.dim",
    "pretrain.lr"); those named in `may_change` (at any depth) do not count."""
    diffs = []
    for key, value in now.items():
        if key in may_change:
            continue
        if isinstance(value, dict) and isinstance(recorded.get(key), dict):
            diffs += setting_differences(recorded[key], value, may_change, f"{prefix}{key}.")
        elif recorded.get(key) != value:
            diffs.append(prefix + key)
    return diffs


MOVABLE_PATHS = ("init",)  # path settings that name a place relative to the run (the main job's RL start)


def _follow_moved_folder(recorded: dict, now: dict) -> None:
    """A run folder moved whole (or its parent renamed) keeps its meaning: a recorded path setting that lies where
    the given one lies relative to the run folder (`out`), such as the main job's rl.init, run/pretrain/checkpoint-N,
    is taken as the same setting (compared by meaning, not by its text). Rewrites `recorded` in place."""
    old_out, new_out = recorded.get("out"), now.get("out")
    if not isinstance(old_out, str) or not isinstance(new_out, str):
        return
    for held, given in [(recorded, now), *((recorded.get(k), v) for k, v in now.items() if isinstance(v, dict))]:
        if not isinstance(held, dict):
            continue
        for key in MOVABLE_PATHS:
            before, after = held.get(key), given.get(key)
            if isinstance(before, str) and isinstance(after, str) and before and after and before != after \
                    and os.path.relpath(before, old_out) == os.path.relpath(after, new_out):
                held[key] = after


def check_resume_settings(out: Path, now: dict, may_change) -> None:
    """Refuse to resume when a setting that shaped the earlier steps differs from the recorded run. The record is
    read as today's code reads it (runtime/setting_history.py): a setting added since at the value the run ran, a
    retired one dropped where it holds today's value and refused otherwise."""
    where = f"--resume: {Path(out) / RUN_CONFIG_NAME}"
    recorded = read_as_today(json.loads((Path(out) / RUN_CONFIG_NAME).read_text()), where)
    # runs started before the plain/fast kernel names or a model field added since (tokenizer, qk_norm, ...): the
    # model of a pretraining run, or of a stage (the main job's pretrain.model)
    for held in (recorded, *(v for v in recorded.values() if isinstance(v, dict))):
        if isinstance(held.get("model"), dict):
            held["model"] = ModelConfig.from_dict(held["model"]).to_dict()
    now = json.loads(json.dumps(now))
    recorded = with_added(recorded, now)
    _follow_moved_folder(recorded, now)
    diffs = setting_differences(recorded, now, may_change)
    threads = [d for d in diffs if d.split(".")[-1] == "threads"]
    if threads:  # a change that looks like how a run runs, not what it computes: say why it counts, and the fix
        stage = threads[0].rpartition(".")[0]
        before, after = ((held.get(stage) or {}) if stage else held for held in (recorded, now))
        flag = f"--{stage + '.' if stage else ''}threads"
        raise ValueError(f"--resume: the run in {out} was started with {flag} {before.get('threads')}, not "
                         f"{after.get('threads')}; torch's thread count changes how its sums are split, so the "
                         f"weights: resume with {flag} {before.get('threads')}, or start a new --out")
    if diffs and all(d.split(".")[-1] == "init" for d in diffs):  # only where it started from: say which
        stage = diffs[0].rpartition(".")[0]
        before, after = (((held.get(stage) or {}) if stage else held).get("init") for held in (recorded, now))
        raise ValueError(f"--resume: the run in {out} started from the checkpoint {before} ({diffs[0]}), not "
                         f"{after}; give that one (put it back there if it moved), or start a new --out")
    if diffs:
        raise ValueError(f"--resume: settings differ from the run in {out}: {', '.join(diffs)}. "
                         "Resume with the original settings, or start a new --out")


def started(out: str | os.PathLike) -> bool:
    """Whether a run folder holds more than the settings of a start that never reached its first checkpoint."""
    out = Path(out)
    if not out.exists():
        return False
    return not out.is_dir() or any(not is_housekeeping(p.name) and p.name != RUN_CONFIG_NAME for p in out.iterdir())


def check_run_folder(out: str | os.PathLike, settings: dict, resume: bool, may_change) -> None:
    """Before anything is written: a new run needs an empty or absent folder; a resumed one an unfinished run
    there whose settings equal these, except those in `may_change`."""
    out = Path(out)
    if not resume:
        if not started(out):  # a start that failed before its first checkpoint may simply be retried
            return
        refuse_nonempty_dir(out, "Pass --resume to continue it, or choose another --out.")
        return
    if not (out / RUN_CONFIG_NAME).is_file():
        raise FileNotFoundError(f"--resume: {out} holds no run to resume ({RUN_CONFIG_NAME} is missing)")
    recorded = json.loads((out / RUN_CONFIG_NAME).read_text())
    if any(isinstance(held, dict) and held.get("save_optimizer") is False
           for held in [recorded, *recorded.values()]):  # the run's own settings, or a stage's in the main job
        raise ValueError(f"--resume: the run in {out} was started with --no-save-optimizer, so its checkpoints hold no "
                         "optimizer state to continue from; start it again in a new --out")
    held, wanted = run_kind(recorded), run_kind(settings)
    if held != wanted:  # not twenty "differing" settings: the folder holds another command's run
        raise ValueError(f"--resume: {out} holds {held}, not {wanted}; resume it with the command that started it, or "
                         "give the folder of the run to continue")
    check_resume_settings(out, settings, may_change)
    if (out / RECEIPT_NAME).exists():
        raise FileExistsError(f"--resume: the run in {out} already finished ({RECEIPT_NAME} exists)")


def start_run_folder(out: str | os.PathLike, settings: dict) -> None:
    """Create the run folder and record the settings (once everything that could refuse to start has run)."""
    Path(out).mkdir(parents=True, exist_ok=True)
    # check_run_folder let a new run start here, so a run.json already here is a start that stopped before its
    # first checkpoint (started() ignores it): this retry replaces it
    atomic_write_json(Path(out) / RUN_CONFIG_NAME, settings, overwrite=True)


def restore_latest(out: str | os.PathLike, model: GLM53, optimizer, device) -> tuple[Path, dict]:
    """Load the newest checkpoint with trainer state in `out` into model, optimizer and the RNGs.
    Returns (its path, its trainer state)."""
    from safetensors.torch import load_model as load_weights

    found = [p for p in checkpoint_folders(out, complete=False) if (p / TRAINER_STATE_NAME).is_file()]
    if not found:
        raise FileNotFoundError(f"--resume: no checkpoint with trainer state in {out}")
    latest = found[-1]
    check_switches(latest, ModelConfig.from_dict(json.loads((latest / "config.json").read_text())), model.config)
    sha = verify_checkpoint(latest)
    state = load_trainer_state(latest)
    load_weights(model, str(latest / WEIGHTS_NAME), strict=True, device=str(device))
    state["resumed_from"] = {"path": latest.name, "weights_sha256": sha}
    optimizer.load_state_dict(state["optimizer"])
    set_rng_state(state["rng"])
    return latest, state
