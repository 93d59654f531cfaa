"""The calibration cache, read: what `glm53 calibrate` (speed/calibrate.py) measured on this machine, and what
`--precision auto` and `--kernels auto` take from it.

The cache is `$GLM53_CACHE_DIR/calibration.json` (default `~/.cache/glm53`), one entry per machine key: the CPU
model (name, family/model/stepping numbers and relevant flags), its core and thread counts and torch's version.
The device code and pretraining read it here; calibrate writes it, and sits above both.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from .config import KERNEL_CHOICES
from .cpu import cpu_description


def cache_file() -> Path:
    return Path(os.environ.get("GLM53_CACHE_DIR") or Path.home() / ".cache" / "glm53") / "calibration.json"


def machine_key() -> str:
    """The CPU (its name, family/model/stepping and relevant flags), its core and thread counts and torch's version:
    a measurement carries over to a machine only when all of them agree."""
    cpu = cpu_description()
    name = " | ".join(part for part in (cpu["model"], cpu["family"], " ".join(cpu["flags"])) if part)
    return f"{name} | {cpu['cores']} cores | {cpu['threads']} threads | torch {torch.__version__}"


def cached() -> dict | None:
    """This machine's calibration, or None."""
    try:
        return json.loads(cache_file().read_text()).get(machine_key())
    except (OSError, ValueError, AttributeError):
        return None


def resolve_kernels(name: str, precision: str, device: torch.device) -> dict:
    """The kernel settings `--kernels auto` applies: this machine's calibrated choice for `precision`, or
    nothing (the model config's own values) when there is none, on other devices, or with `--kernels config`."""
    if name not in KERNEL_CHOICES:
        raise ValueError(f"unknown --kernels {name!r}; choose one of {', '.join(KERNEL_CHOICES)}")
    entry = cached() if name == "auto" and device.type == "cpu" else None
    kernels = (entry or {}).get("kernels")
    return dict(kernels["choice"]) if kernels and kernels["precision"] == precision else {}


def explain_kernels() -> str:
    entry = cached()
    kernels = (entry or {}).get("kernels")
    if not kernels:
        return "the model config's (no calibration cached: `glm53 calibrate` times the candidates)"
    return (", ".join(f"{k} {v}" for k, v in kernels["choice"].items())
            + f" (for {kernels['precision']} training; measured by glm53 calibrate on {entry['measured']})")
