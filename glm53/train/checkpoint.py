"""Checkpoints: a directory written atomically and never overwritten.

    checkpoint-0100/
        model.safetensors   weights (the tied head is the embedding; stored once)
        config.json         ModelConfig
        metadata.json       step, tokens seen, seed, stage, sha256 of model.safetensors, ...
        trainer_state.pt    optimizer state and RNG states, for exact resume (absent in exported models, and
                            after --no-save-optimizer; retention.py prunes old checkpoints to their metadata)
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import torch

from ..model.config import ModelConfig
from ..model.model import GLM53
from ..model.saved import read_metadata, unchecked_problem, verify_saved
from ..runtime.config_file import run_kind  # noqa: F401 - also imported from here
from ..runtime.files import AtomicDirectory, atomic_write_json, is_housekeeping, refuse_nonempty_dir, sha256_file
from .names import (METADATA_NAME, RECEIPT_NAME, RUN_CONFIG_NAME, TRAINER_STATE_NAME,  # noqa: F401 (re-exported)
                    WEIGHTS_NAME, checkpoint_name)


def checkpoint_folders(out: str | os.PathLike, complete: bool = True) -> list[Path]:
    """A run folder's checkpoint folders, oldest first by step (checkpoint-10000 after checkpoint-9999); with
    `complete`, only those with metadata.json."""
    found = [p for p in Path(out).glob("checkpoint-*") if p.is_dir() and p.name[len("checkpoint-"):].isdigit()]
    return sorted((p for p in found if not complete or (p / METADATA_NAME).is_file()),
                  key=lambda p: int(p.name[len("checkpoint-"):]))


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
        # config.json's hash too: some switches (position, hc_double_residual) leave every weight's shape alone,
        # so an edited config would load the same weights as another model
        atomic_write_json(tmp / METADATA_NAME, {**metadata, "weights_sha256": sha,  # replaces save_pretrained's
                                                "config_sha256": sha256_file(tmp / "config.json"),
                                                "parameter_counts": model.parameter_counts()}, overwrite=True)
        if trainer_state is not None:
            torch.save(trainer_state, tmp / TRAINER_STATE_NAME)
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
                                "--keep-last, or by `glm53 run`, which keeps the weights of the RL start and the chosen "
                                "RL checkpoint only); load a checkpoint that kept its weights")
    for name in (WEIGHTS_NAME, "config.json"):
        if not (path / name).is_file():
            raise FileNotFoundError(f"{path} is not a glm53 checkpoint: {name} is missing")
    if unchecked_problem(path) and not trust_unverified:
        raise ValueError(unchecked_problem(path))


def load_model(path: str | os.PathLike, device: str | torch.device = "cpu", expect: ModelConfig | None = None,
               trust_unverified: bool = False) -> GLM53:
    """Load a checkpoint's model: the weights' and the config's sha256 checked against metadata.json, the config
    checked (against `expect` too, when given: see `check_switches`), every weight present and of the right shape.
    Any problem is a ValueError that names the file. A folder without metadata.json cannot be checked and is
    refused unless `trust_unverified` (--trust-unverified). The sha256 is kept on the model as `weights_sha256`,
    and whether it was checked as `verified`, for receipts."""
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
    model.weights_sha256, model.verified = sha, checked
    if not checked:  # said once the load succeeded, so that a failing load stays one line
        print(f"glm53: {path}: its weights and config were loaded unchecked, as --trust-unverified asked",
              file=sys.stderr)
    return model.to(device)


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


verify_checkpoint = verify_saved  # the name train/ and the tests use


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
