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
from ..checkpoints.names import RECEIPT_NAME, RUN_CONFIG_NAME, TRAINER_STATE_NAME, WEIGHTS_NAME
from ..model.config import ModelConfig
from ..model.model import GLM53
from ..runtime.files import atomic_write_json, is_housekeeping, refuse_nonempty_dir


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
    file = Path(path) / TRAINER_STATE_NAME
    if not file.is_file():
        raise FileNotFoundError(f"{file} is missing: this checkpoint cannot be resumed")
    try:
        state = torch.load(file, weights_only=False)
    except Exception as err:  # noqa: BLE001 - a truncated or foreign file fails in many ways
        raise ValueError(f"{file} cannot be read ({type(err).__name__}); the trainer state is damaged. "
                         "Delete this checkpoint folder to resume from the one before it") from None
    if not isinstance(state, dict) or "optimizer" not in state or "rng" not in state:
        raise ValueError(f"{file} is not a glm53 trainer state; delete this checkpoint folder to resume from the one before it")
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


# Settings added after runs were started, with what those runs did: the reference suite, and every checkpoint
# with its trainer state.
ADDED_SETTINGS = {"suite": "reference", "save_optimizer": True}


def check_resume_settings(out: Path, now: dict, may_change) -> None:
    """Refuse to resume when a setting that shaped the earlier steps differs from the recorded run."""
    recorded = json.loads((Path(out) / RUN_CONFIG_NAME).read_text())
    if isinstance(recorded.get("model"), dict):  # runs started before the plain/fast kernel names
        recorded["model"] = ModelConfig.from_dict(recorded["model"]).to_dict()
    now = json.loads(json.dumps(now))
    for key, value in [(None, now), *((k, v) for k, v in now.items() if isinstance(v, dict))]:
        held = recorded if key is None else recorded.get(key)
        for name, before in ADDED_SETTINGS.items():
            if isinstance(held, dict) and name in value:
                held.setdefault(name, before)
    diffs = setting_differences(recorded, now, may_change)
    if diffs:
        raise ValueError(f"--resume: settings differ from the run in {out}: {', '.join(diffs)}. "
                         "Resume with the original settings, or start a new --out")


def started(out: str | os.PathLike) -> bool:
    """Whether a run folder holds more than the settings of a start that never reached its first checkpoint."""
    out = Path(out)
    if not out.exists():
        return False
    return not out.is_dir() or any(not is_housekeeping(p.name) and p.name != RUN_CONFIG_NAME for p in out.iterdir())


def run_kind(settings: dict) -> str:
    """Which command's run recorded these settings, by a setting only it has."""
    for key, kind in (("rl_start", "a main job (glm53 run)"), ("group_size", "an RL run (glm53 rl)"),
                      ("sequence_length", "a pretraining run (glm53 pretrain)")):
        if key in settings:
            return kind
    return "another kind of run"


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
    atomic_write_json(Path(out) / RUN_CONFIG_NAME, settings)


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
