"""runtime/providers.py: the model reaches decoding by role, provided from above by the package face, so model/
imports no higher floor and `GLM53.generate` works however the model was imported."""

import json
import subprocess
import sys

import pytest
import torch

from glm53 import GLM53, ModelConfig
from glm53.decode.text_generation import generate_text
from glm53.runtime import providers

from ..tiny import TINY

FRESH = f"""
import json, sys, torch
from glm53.model.model import GLM53
from glm53.model.config import ModelConfig
before = "glm53.decode.text_generation" in sys.modules
torch.manual_seed(0)
out = GLM53(ModelConfig(**{TINY!r})).generate("def f(x):", max_new_tokens=5)
print(json.dumps([before, "glm53.decode.text_generation" in sys.modules, out[0].token_ids]))
"""


def test_the_model_module_imported_alone_generates_as_the_command_does():
    """In a fresh interpreter, `from glm53.model.model import GLM53` loads no decoder; its generate then loads one
    and gives the tokens generate_text gives here for the same weights."""
    done = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded_before, loaded_after, token_ids = json.loads(done.stdout)
    torch.manual_seed(0)
    expected = generate_text(GLM53(ModelConfig(**TINY)), "def f(x):", max_new_tokens=5)[0].token_ids
    assert (loaded_before, loaded_after, token_ids) == (False, True, expected)


def test_generate_runs_what_is_provided_for_text_generation(monkeypatch):
    calls = []
    monkeypatch.setitem(providers._LOADERS, "text generation", lambda: lambda *args, **options: calls.append(
        (args[1:], options)) or "provided")
    model = GLM53(ModelConfig(**TINY))
    assert model.generate("def f(x):", seed=3) == "provided"
    assert calls == [(("def f(x):", None, None, "function", False), {"seed": 3})]


def test_a_role_nobody_provides_is_one_line_naming_those_provided():
    with pytest.raises(LookupError, match=r"no provider of 'beam search' is registered \(the roles provided: tasks as "
                                          r"a dataset, tasks from a dataset, text generation, texts from a dataset, "
                                          r"transformers export\)") as err:
        providers.provider("beam search")
    assert "\n" not in str(err.value)
