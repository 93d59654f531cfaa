"""glm53: a CPU-first laboratory for a tiny GLM-5.3-Flash-style language model.

The face of the package (`from glm53 import GLM53, ModelConfig, ByteTokenizer`) loads lazily: importing glm53
loads no torch, so the command line answers --help at once; the model's module loads on first use of GLM53. Python
runs this module before any other of the package, so it also provides what a lower floor asks for by role
(runtime/providers.py): the decoding that GLM53.generate runs, from decode/, a floor above model/; and from interop/
the datasets forms of task files and corpora that data/ reads and writes, and the transformers export that
`glm53 export` (checkpoints/) writes.

The house, a floor at a time from the ground up (tests/test_layout.py holds each room to importing only rooms
below it). Read in this order:

    runtime/       what every stage runs on: settings, files, devices, memory, the roles provided from above
    model/         the architecture, one concept a file
    verify/        the verifier, and the rewards built from its verdicts
    checkpoints/   checkpoint folders: format, retention, export
    data/          tokenizers, the task suites, pretraining batches, corpora
    recipes/       the recipe book: every named recipe (speedrun rows, run presets, RL arms), one TOML each
    decode/        completions from a model: plain, cached, speculative, streamed
    evaluate/      scores with receipts, and paired comparisons of them
    serve/         `glm53 serve`: the playground in the browser
    train/         pretraining, then RL with the verifier's reward
    report/        REPORT.md and charts of run folders, the main job's among them
    interop/       the Hugging Face ecosystem (the hf extra): transformers, TRL, datasets
    speed/         what a step costs here: bench, profile, calibrate
    vision/        the vision miniature
    run_config.py  the main job's settings (RunConfig)
    run.py         `glm53 run`, the main job: pretrain, RL, confirm, charts, REPORT.md
    sweep/         studies across arms and seeds: `glm53 sweep` and `glm53 analyze`
    cli.py         the `glm53` command and its subcommands
    __main__.py    `python -m glm53`
"""

import os

# OpenMP threads that finish early spin before they sleep; with another busy process on one of two cores they
# spin against it and a training step slowed 16x (1.33 -> 21.5 s, bf16, 2-core Xeon with AMX). A short spin keeps
# the quiet training speed: busy/quiet was 2.5-2.7x at 10,000 (Xeon; 2.8-2.9x on an AMD Zen 4) and 2.1-2.3x at
# 3,000 (Zen 4), at a cost of up to ~10% in quiet cached decoding there. Set before torch loads its OpenMP runtime
# (libgomp reads it once; KMP_BLOCKTIME is the Intel runtime's equivalent, in ms); a value already in the
# environment wins, and importing torch before glm53 leaves the runtime's default. `python
# scripts/bench_sharing.py` measures it.
os.environ.setdefault("GOMP_SPINCOUNT", "3000")
os.environ.setdefault("KMP_BLOCKTIME", "1")

from .runtime.providers import provide as _provide  # noqa: E402 - after the OpenMP settings, as every import here

__all__ = ["ByteTokenizer", "ModelConfig", "GLM53", "ModelAux"]
__version__ = "0.1.0"
_HOMES = {"ByteTokenizer": "glm53.data.tokenizer", "ModelConfig": "glm53.model.config", "GLM53": "glm53.model.model",
          "ModelAux": "glm53.model.model"}


def _text_generation():
    """GLM53.generate's body, from decode/ (a floor above model/): the package face runs before any submodule, so
    it composes the floors downward and the model asks runtime/providers.py for this by role, never by module."""
    from .decode.text_generation import model_generate

    return model_generate


_provide("text generation", _text_generation)


def _interop(module: str, name: str):
    """A loader of interop/MODULE.py's `name`: data/ reads task files and corpora and writes task files, and
    checkpoints/ exports, floors below interop/, so they ask for the Hugging Face forms by role."""
    def load():
        from importlib import import_module

        return getattr(import_module(f".interop.{module}", __name__), name)

    return load


_provide("tasks from a dataset", _interop("datasets_io", "read_dataset_tasks"))
_provide("texts from a dataset", _interop("datasets_io", "read_dataset_texts"))
_provide("tasks as a dataset", _interop("datasets_io", "write_dataset_tasks"))
_provide("transformers export", _interop("transformers_export", "export_transformers"))


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'glm53' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value  # once loaded, an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
