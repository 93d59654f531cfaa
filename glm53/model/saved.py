"""A saved model folder's record of itself: metadata.json holds the sha256 of its weights and of its config.json,
and every load checks both (GLM53.from_pretrained here, the commands through checkpoints/format.py's load_model),
since some switches (position, hc_double_residual) leave every weight's shape alone and an edited config would
load the same weights as another model. Light: no torch."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..runtime.files import sha256_file

WEIGHTS_NAME = "model.safetensors"
METADATA_NAME = "metadata.json"
CONFIG_NAME = "config.json"


def saved_hashes(folder: str | os.PathLike) -> dict:
    """What metadata.json records of a saved folder: its weights' and its config's sha256."""
    return {"weights_sha256": sha256_file(Path(folder) / WEIGHTS_NAME),
            "config_sha256": sha256_file(Path(folder) / CONFIG_NAME)}


def read_metadata(path: str | os.PathLike) -> dict:
    return json.loads((Path(path) / METADATA_NAME).read_text())


def unchecked_problem(path: str | os.PathLike, trust_flag: str = "--trust-unverified") -> str | None:
    """Why a folder cannot be checked (no metadata.json), naming how to load it anyway; None when it can."""
    if (Path(path) / METADATA_NAME).is_file():
        return None
    return (f"{path} has no {METADATA_NAME}, so its weights and config cannot be checked against their recorded "
            f"hashes; load it anyway with {trust_flag} (receipts then record it as unverified), or use a folder "
            "glm53 wrote")


def verify_saved(path: str | os.PathLike) -> str:
    """Recompute the weights' and the config's sha256 and compare them with metadata.json; returns the weights'
    or raises a one-line ValueError naming the file."""
    sha = sha256_file(Path(path) / WEIGHTS_NAME)
    try:
        recorded = read_metadata(path).get("weights_sha256")
    except (ValueError, AttributeError) as err:
        raise ValueError(f"{Path(path) / METADATA_NAME} is not valid JSON metadata ({err})") from None
    if recorded != sha:
        raise ValueError(f"{Path(path) / WEIGHTS_NAME}: sha256 {sha[:16]}... does not match the "
                         f"{recorded and recorded[:16]}... recorded in {METADATA_NAME}; the checkpoint is damaged")
    config_recorded = read_metadata(path).get("config_sha256")  # absent in checkpoints written before it was kept
    if config_recorded is not None and config_recorded != sha256_file(Path(path) / CONFIG_NAME):
        raise ValueError(f"{Path(path) / CONFIG_NAME} differs from the config these weights were saved with (its "
                         f"sha256 is recorded in {METADATA_NAME}); restore it, or the same weights compute another "
                         "model")
    return sha
