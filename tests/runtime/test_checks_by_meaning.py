"""Checks by meaning, generated from the config fields themselves: every number field of every config declares
which values it takes (runtime/settings.py `setting(at_least=..., above=..., at_most=..., below=...)` or
`unbounded=True`), and a table of bad values made from those declarations (NaN, infinities, the first value past
each bound) is refused with one line naming the flag. A new field cannot skip it: it fails the first test."""

from __future__ import annotations

import dataclasses
import importlib
import math
import pkgutil

import pytest

import glm53
from glm53.runtime.composition import flag_name, type_hints
from glm53.runtime.settings import _base_type

# what a config needs besides the value under test (its required settings, and a task source for eval)
REQUIRED = {"out": "/nonexistent/glm53-checks", "init": "/nonexistent/init", "checkpoint": "/nonexistent/ckpt",
            "split": "dev"}
GOOD = {"RolloutSampling": {"temperature": 0.35}}  # a class whose defaults need a value to be good


# packages of the optional extras (pyproject.toml): a module that imports one is left out of the walk where its
# extra is not installed, as a user's first `bash scripts/install.sh --dev --extras` leaves out `--serve` and `--hf`
OPTIONAL = {"fastapi", "starlette", "uvicorn", "markdown", "nh3", "httpx", "ray", "tensorboard", "wandb", "trackio",
            "transformers", "trl", "datasets", "accelerate"}
LEFT_OUT: dict[str, str] = {}  # module -> the missing optional package


def _configs() -> list[type]:
    """Every dataclass in the package with a field made by `setting` (a help text in its metadata)."""
    found = {}
    for info in pkgutil.walk_packages(glm53.__path__, "glm53."):
        if info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ModuleNotFoundError as e:
            if (e.name or "").split(".")[0] not in OPTIONAL:
                raise
            LEFT_OUT[info.name] = e.name
            continue
        for value in vars(module).values():
            if isinstance(value, type) and dataclasses.is_dataclass(value) and value.__module__ == module.__name__ \
                    and any("help" in f.metadata for f in dataclasses.fields(value)):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return [found[k] for k in sorted(found)]


CONFIGS = _configs()


def _number_fields(cls) -> list[tuple[str, type, dict]]:
    hints = type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        kind, _ = _base_type(hints[f.name])
        if kind in (int, float) and "help" in f.metadata:
            out.append((f.name, kind, f.metadata))
    return out


NUMBERS = [(cls, name, kind, meta) for cls in CONFIGS for name, kind, meta in _number_fields(cls)]


def test_the_walk_finds_the_configs():
    names = {cls.__name__ for cls in CONFIGS}
    assert {"PretrainConfig", "RLConfig", "ModelConfig", "RuntimeConfig", "Sampling", "EvalConfig", "RunConfig",
            "DigitTraining", "ServeConfig"} <= names, names
    # only the modules that import an extra's package may be left out, never a config's module
    assert all(not name.endswith("_config") for name in LEFT_OUT), LEFT_OUT


@pytest.mark.parametrize("cls, name, kind, meta", NUMBERS, ids=[f"{c.__name__}.{n}" for c, n, _, _ in NUMBERS])
def test_every_number_declares_its_values(cls, name, kind, meta):
    assert "bounds" in meta, (f"{cls.__name__}.{name}: declare which values it takes in its setting(): at_least=, "
                              "above=, at_most=, below=, or unbounded=True")


def _bad_values(kind, bounds: dict) -> list:
    bad = [math.nan, math.inf, -math.inf] if kind is float else []
    step = 1 if kind is int else 1e-9
    if "at_least" in bounds:
        bad.append(kind(bounds["at_least"]) - step)
    if "above" in bounds:
        bad.append(kind(bounds["above"]))
    if "at_most" in bounds:
        bad.append(kind(bounds["at_most"]) + step)
    if "below" in bounds:
        bad.append(kind(bounds["below"]))
    return bad


def _make(cls, **values):
    fields = {f.name for f in dataclasses.fields(cls)}
    return cls(**{**{k: v for k, v in REQUIRED.items() if k in fields}, **GOOD.get(cls.__name__, {}), **values})


BAD = [(cls, name, value) for cls, name, kind, meta in NUMBERS for value in _bad_values(kind, meta.get("bounds", {}))]


@pytest.mark.parametrize("cls, name, value", BAD, ids=[f"{c.__name__}.{n}={v}" for c, n, v in BAD])
def test_a_bad_value_is_one_line_naming_the_flag(cls, name, value):
    _make(cls)  # the defaults are good
    with pytest.raises(ValueError) as refused:
        _make(cls, **{name: value})
    message = str(refused.value)
    assert flag_name(name) in message and "\n" not in message, message
