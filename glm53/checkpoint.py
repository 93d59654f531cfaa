"""Checkpoints: a directory written atomically and never overwritten.

    checkpoint-0100/
        model.safetensors   weights (the tied head is the embedding; stored once)
        config.json         ModelConfig
        metadata.json       step, tokens seen, seed, stage, sha256 of model.safetensors, ...
        trainer_state.pt    optimizer state and RNG states, for exact resume (absent in exported models)
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
from pathlib import Path

import torch

from .io import AtomicDirectory, atomic_write_json, refuse_nonempty_dir, sha256_file
from .model.config import ModelConfig
from .model.model import GLM53

WEIGHTS_NAME = "model.safetensors"
METADATA_NAME = "metadata.json"
TRAINER_STATE_NAME = "trainer_state.pt"
RUN_CONFIG_NAME = "run.json"  # a training run's settings, written when it starts
RECEIPT_NAME = "training-receipt.json"  # written when it finishes


def checkpoint_name(step: int) -> str:
    return f"checkpoint-{step:04d}"


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


def save_checkpoint(path: str | os.PathLike, model: GLM53, metadata: dict, trainer_state: dict | None = None) -> str:
    """Write a checkpoint directory atomically; returns the sha256 of its weights."""
    with AtomicDirectory(path) as tmp:
        model.save_pretrained(tmp)
        (tmp / "README.md").unlink(missing_ok=True)  # the hub mixin's model card; our metadata says more
        sha = sha256_file(tmp / WEIGHTS_NAME)
        atomic_write_json(tmp / METADATA_NAME, {**metadata, "weights_sha256": sha,
                                                "parameter_counts": model.parameter_counts()})
        if trainer_state is not None:
            torch.save(trainer_state, tmp / TRAINER_STATE_NAME)
    return sha


def load_model(path: str | os.PathLike, device: str | torch.device = "cpu") -> GLM53:
    """Load a checkpoint's model (strict: every weight must be present and match)."""
    path = Path(path)
    for name in (WEIGHTS_NAME, "config.json"):
        if not (path / name).is_file():
            raise FileNotFoundError(f"{path} is not a glm53 checkpoint: {name} is missing")
    with contextlib.redirect_stdout(io.StringIO()):  # the mixin prints a line on every local load
        model = GLM53.from_pretrained(str(path), strict=True, map_location=str(device))
    return model.to(device)


def read_metadata(path: str | os.PathLike) -> dict:
    return json.loads((Path(path) / METADATA_NAME).read_text())


def load_trainer_state(path: str | os.PathLike) -> dict:
    file = Path(path) / TRAINER_STATE_NAME
    if not file.is_file():
        raise FileNotFoundError(f"{file} is missing: this checkpoint cannot be resumed")
    return torch.load(file, weights_only=False)


def verify_checkpoint(path: str | os.PathLike) -> str:
    """Recompute the weights' sha256 and compare with metadata; returns it or raises."""
    sha = sha256_file(Path(path) / WEIGHTS_NAME)
    recorded = read_metadata(path).get("weights_sha256")
    if recorded != sha:
        raise ValueError(f"{path}: weights sha256 {sha} does not match metadata ({recorded}); the checkpoint is damaged")
    return sha


def check_resume_settings(out: Path, now: dict, may_change: set[str]) -> None:
    """Refuse to resume when a setting that shaped the earlier steps differs from the recorded run."""
    recorded = json.loads((Path(out) / RUN_CONFIG_NAME).read_text())
    if isinstance(recorded.get("model"), dict):  # runs started before the plain/fast kernel names
        recorded["model"] = ModelConfig.from_dict(recorded["model"]).to_dict()
    now = json.loads(json.dumps(now))
    diffs = [k for k in now if k not in may_change and recorded.get(k) != now[k]]
    if diffs:
        raise ValueError(f"--resume: settings differ from the run in {out}: {', '.join(diffs)}. "
                         "Resume with the original settings, or start a new --out")


def check_run_folder(out: str | os.PathLike, settings: dict, resume: bool, may_change: set[str]) -> None:
    """Before anything is written: a new run needs an empty or absent folder; a resumed one an unfinished run
    there whose settings equal these, except those in `may_change`."""
    out = Path(out)
    if not resume:
        refuse_nonempty_dir(out, "Pass --resume to continue it, or choose another --out.")
        return
    if not (out / RUN_CONFIG_NAME).is_file():
        raise FileNotFoundError(f"--resume: {out} holds no run to resume ({RUN_CONFIG_NAME} is missing)")
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

    found = sorted(p for p in Path(out).glob("checkpoint-*") if (p / TRAINER_STATE_NAME).is_file())
    if not found:
        raise FileNotFoundError(f"--resume: no checkpoint with trainer state in {out}")
    latest = found[-1]
    verify_checkpoint(latest)
    state = load_trainer_state(latest)
    load_weights(model, str(latest / WEIGHTS_NAME), strict=True, device=str(device))
    optimizer.load_state_dict(state["optimizer"])
    set_rng_state(state["rng"])
    return latest, state
