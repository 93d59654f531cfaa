"""The checkpoints a server holds: each loaded and checked as `glm53 eval` loads it (weights' and config's sha256
against metadata.json; a folder without it refused unless --trust-unverified), with the task suite it was trained
for, whose language level judges its programs and whose stop rule and token cap end its completions."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..data.suites import Suite, get_suite
from ..checkpoints.format import load_model  # the one place glm53 serve loads weights
from ..checkpoints.names import RUN_CONFIG_NAME


@dataclass
class ServedCheckpoint:
    name: str  # as the page shows it: the folder with its run's name
    path: Path
    model: object  # GLM53, in eval mode on the CPU
    suite: Suite
    weights_sha256: str  # of its model.safetensors, as load_model read it
    verified: bool  # checked against metadata.json (False only under --trust-unverified)

    def describe(self) -> dict:
        return {"name": self.name, "path": str(self.path), "suite": self.suite.name, "language": self.suite.language,
                "sha256": self.weights_sha256, "verified": self.verified,
                "layer_pattern": self.model.config.layer_pattern, "experts": self.model.config.experts,
                "top_k": self.model.config.top_k, "context": self.model.config.max_sequence_length,
                "stop": self.suite.stop, "max_new_tokens": self.suite.max_new_tokens}


def checkpoint_suite(path: Path) -> Suite:
    """The suite the run that wrote `path` named in its run.json (a `glm53 run` folder's receipt for its final/
    export); the reference suite when neither records one, as every run before suites were added."""
    for record in (path.parent / RUN_CONFIG_NAME, path.parent / "run-receipt.json"):
        try:
            suite = json.loads(record.read_text()).get("suite")
        except (OSError, ValueError, AttributeError):
            continue
        if suite:
            return get_suite(suite)
    return get_suite(None)


def open_checkpoints(paths: list[str], trust_unverified: bool) -> list[ServedCheckpoint]:
    served = []
    for given in paths:
        path = Path(given)
        loaded = load_model(path, "cpu", trust_unverified=trust_unverified)
        model = loaded.model.eval()
        suite = checkpoint_suite(path)
        problem = suite.model_problem(model.config)
        if problem:
            raise ValueError(f"{path}: {problem}")
        name = "/".join(path.resolve().parts[-2:])
        if any(s.name == name for s in served):
            name = f"{name} ({len(served) + 1})"
        served.append(ServedCheckpoint(name, path, model, suite, loaded.weights_sha256, loaded.verified))
    return served
