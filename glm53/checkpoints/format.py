"""The checkpoint format: a directory written atomically and never overwritten, loaded with its hashes checked.

    checkpoint-0100/
        model.safetensors   weights (the tied head is the embedding; stored once)
        config.json         ModelConfig
        metadata.json       step, tokens seen, seed, stage, sha256 of model.safetensors (and of the state), ...
        trainer_state.pt    optimizer state and RNG states, for exact resume (absent in exported models, and
                            after --no-save-optimizer; retention.py prunes old checkpoints to their metadata)

What a training run does with its folder of checkpoints (resume, the RNG states) is train/run_folder.py's.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from ..model.config import ModelConfig
from ..model.model import GLM53
from ..model.saved import read_metadata, unchecked_problem, verify_saved  # noqa: F401 - read_metadata re-exported
from ..runtime.files import AtomicDirectory, atomic_write_json, sha256_file
from .names import METADATA_NAME, TRAINER_STATE_NAME, WEIGHTS_NAME


def checkpoint_folders(out: str | os.PathLike, complete: bool = True) -> list[Path]:
    """A run folder's checkpoint folders, oldest first by step (checkpoint-10000 after checkpoint-9999); with
    `complete`, only those with metadata.json."""
    found = [p for p in Path(out).glob("checkpoint-*") if p.is_dir() and p.name[len("checkpoint-"):].isdigit()]
    return sorted((p for p in found if not complete or (p / METADATA_NAME).is_file()),
                  key=lambda p: int(p.name[len("checkpoint-"):]))


def save_checkpoint(path: str | os.PathLike, model: GLM53, metadata: dict, trainer_state: dict | None = None) -> str:
    """Write a checkpoint directory atomically; returns the sha256 of its weights."""
    with AtomicDirectory(path) as tmp:
        model.save_pretrained(tmp)
        (tmp / "README.md").unlink(missing_ok=True)  # the hub mixin's model card; our metadata says more
        sha = sha256_file(tmp / WEIGHTS_NAME)
        state_sha = {}
        if trainer_state is not None:  # its hash is checked before --resume loads it (run_folder.py)
            torch.save(trainer_state, tmp / TRAINER_STATE_NAME)
            state_sha = {"trainer_state_sha256": sha256_file(tmp / TRAINER_STATE_NAME)}
        # config.json's hash too: some switches (position, hc_double_residual) leave every weight's shape alone,
        # so an edited config would load the same weights as another model
        atomic_write_json(tmp / METADATA_NAME, {**metadata, "weights_sha256": sha,  # replaces save_pretrained's
                                                "config_sha256": sha256_file(tmp / "config.json"), **state_sha,
                                                "parameter_counts": model.parameter_counts()}, overwrite=True)
    return sha


def check_switches(path: Path, saved: ModelConfig, asked: ModelConfig) -> None:
    """Refuse a checkpoint whose architecture (switches and sizes) differs from the config that asks for it; some
    switches (position) leave every weight's shape alone, so loading would silently compute another model."""
    differences = saved.architecture_differences(asked)
    if differences:
        raise ValueError(f"{path} was saved with other model settings than asked (saved != asked): "
                         + "; ".join(differences) + ". Ask for the checkpoint's settings, or start a new run")


def check_loadable(path: Path, trust_unverified: bool = False) -> None:
    """Refuse, in one line, a folder `load_model` cannot load: missing, without weights or config, or without
    metadata.json (unless `trust_unverified`). Cheap: commands call it before they write anything."""
    if not path.is_dir():
        raise FileNotFoundError(f"{path} is not a glm53 checkpoint: no such folder")
    if not (path / WEIGHTS_NAME).is_file() and (path / METADATA_NAME).is_file():
        raise FileNotFoundError(f"{path} holds only the metadata of a checkpoint: {WEIGHTS_NAME} is missing (pruned by "
                                "--keep-last, or by `glm53 run`, which keeps the weights of the RL start and the "
                                "chosen RL checkpoint only); load a checkpoint that kept its weights")
    for name in (WEIGHTS_NAME, "config.json"):
        if not (path / name).is_file():
            raise FileNotFoundError(f"{path} is not a glm53 checkpoint: {name} is missing")
    if unchecked_problem(path) and not trust_unverified:
        raise ValueError(unchecked_problem(path))


@dataclass(frozen=True)
class LoadedModel:
    """A checkpoint's model with what a receipt records beside it: the sha256 of its model.safetensors, and
    whether that was checked against metadata.json (False only under --trust-unverified)."""

    model: GLM53
    weights_sha256: str
    verified: bool


def load_model(path: str | os.PathLike, device: str | torch.device = "cpu", expect: ModelConfig | None = None,
               trust_unverified: bool = False) -> LoadedModel:
    """Load a checkpoint's model: the weights' and the config's sha256 checked against metadata.json, the config
    checked (against `expect` too, when given: see `check_switches`), every weight present and of the right shape.
    Any problem is a ValueError that names the file. A folder without metadata.json cannot be checked and is
    refused unless `trust_unverified` (--trust-unverified). Returns the model with its weights' sha256 and
    whether it was checked, for receipts."""
    path = Path(path)
    check_loadable(path, trust_unverified)
    checked = (path / METADATA_NAME).is_file()
    sha = verify_checkpoint(path) if checked else sha256_file(path / WEIGHTS_NAME)
    try:
        config = ModelConfig.from_dict(json.loads((path / "config.json").read_text()))
    except (ValueError, TypeError) as err:
        raise ValueError(f"{path / 'config.json'} is not a valid model config: {err}") from None
    if expect is not None:
        check_switches(path, config, expect)
    try:
        from safetensors.torch import load_file

        weights = load_file(str(path / WEIGHTS_NAME), device=str(device))
    except Exception as err:  # noqa: BLE001 - safetensors raises several types for a damaged file
        raise ValueError(f"{path / WEIGHTS_NAME} cannot be read ({type(err).__name__}: {err}); "
                         "the file is damaged or not a safetensors file") from None
    model = GLM53(config)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(weights))
    unexpected = sorted(set(weights) - set(expected))
    misshapen = sorted(k for k in set(expected) & set(weights) if expected[k].shape != weights[k].shape)
    if missing or unexpected or misshapen:
        parts = [f"{len(keys)} {what} (e.g. {keys[0]})" for what, keys in
                 (("missing", missing), ("unexpected", unexpected), ("of another shape", misshapen)) if keys]
        raise ValueError(f"{path / 'config.json'} does not match the weights in {path / WEIGHTS_NAME}: "
                         + ", ".join(parts) + " tensors")
    model.load_state_dict(weights, strict=True)
    if not checked:  # said once the load succeeded, so that a failing load stays one line
        print(f"glm53: {path}: its weights and config were loaded unchecked, as --trust-unverified asked",
              file=sys.stderr)
    return LoadedModel(model.to(device), sha, checked)


verify_checkpoint = verify_saved  # the name train/ and the tests use


def weights_sha256(model: torch.nn.Module) -> str:
    """sha256 over the state dict's names, shapes, dtypes and bytes (in order): the identity of an unsaved model's
    weights (a checkpoint's own hash is that of its model.safetensors file, which this does not reproduce)."""
    h = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        h.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}".encode())
        h.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())  # bf16 too
    return h.hexdigest()
