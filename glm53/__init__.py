"""glm53: a CPU-first laboratory for a tiny GLM-5.3-Flash-style language model.

The face of the package (`from glm53 import GLM53, ModelConfig, ByteTokenizer`) loads lazily: importing glm53
loads no torch, so the command line answers --help at once; the model's module loads on first use of GLM53."""

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

__all__ = ["ByteTokenizer", "ModelConfig", "GLM53", "ModelAux"]
__version__ = "0.1.0"
_HOMES = {"ByteTokenizer": "glm53.data.tokenizer", "ModelConfig": "glm53.model.config", "GLM53": "glm53.model.model",
          "ModelAux": "glm53.model.model"}


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'glm53' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value  # once loaded, an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
