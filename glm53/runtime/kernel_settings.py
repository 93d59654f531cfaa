"""The calibration cache, read: what `glm53 calibrate` (speed/calibrate.py) measured on this machine, and what
`--precision auto` and `--kernels auto` take from it.

The cache is `$GLM53_CACHE_DIR/calibration.json` (default `~/.cache/glm53`), one entry per machine key: the CPU
model (name, family/model/stepping numbers and relevant flags), its core and thread counts and torch's version.
The device code and pretraining read it here; calibrate writes it, and sits above both.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

from .config import KERNEL_CHOICES
from .cpu import cpu_description


def cache_folder() -> Path:
    """glm53's cache folder: $GLM53_CACHE_DIR, default ~/.cache/glm53 (the calibration, Inductor's compiled code)."""
    return Path(os.environ.get("GLM53_CACHE_DIR") or Path.home() / ".cache" / "glm53")


def cache_file() -> Path:
    return cache_folder() / "calibration.json"


def machine_key() -> str:
    """The CPU (its name, family/model/stepping and relevant flags), its core and thread counts and torch's version:
    a measurement carries over to a machine only when all of them agree."""
    cpu = cpu_description()
    name = " | ".join(part for part in (cpu["model"], cpu["family"], " ".join(cpu["flags"])) if part)
    return f"{name} | {cpu['cores']} cores | {cpu['threads']} threads | torch {torch.__version__}"


def read_cache(path: Path | None = None) -> dict:
    """The whole cache, {machine key: entry}; {} when there is none. A damaged cache (not JSON, or not a table of
    entries) is ignored with one warning a process naming it, since `glm53 calibrate` rewrites it whole."""
    path = path or cache_file()
    try:
        table = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        _warn_damaged(path, f"{type(err).__name__}: {err}")
        return {}
    if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
        _warn_damaged(path, "not a table of calibrations")
        return {}
    return table


_warned: set[str] = set()


def _warn_damaged(path: Path, why: str) -> None:
    if str(path) not in _warned:
        _warned.add(str(path))
        print(f"glm53: warning: the calibration cache {path} cannot be used ({' '.join(why.split())}); it is ignored, "
              "and the next `glm53 calibrate` rebuilds it", file=sys.stderr)


def cached() -> dict | None:
    """This machine's calibration, or None."""
    return read_cache().get(machine_key())


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
