"""`GLM53.generate` (decode/text_generation.py): the function `glm53 generate --prompt` calls, so Python and the
command print the same completion for the same prompt and seed; streaming yields the non-streaming text."""

import json

import pytest
import torch

from glm53 import GLM53, ModelConfig
from glm53.checkpoints.format import load_model, save_checkpoint
from glm53.cli import main
from glm53.data.tasks import frozen_tasks
from glm53.decode.sampling import Sampling
from glm53.decode.text_generation import Generation, TextStream

from ..tiny import TINY


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("generate") / "ckpt"
    torch.manual_seed(0)
    save_checkpoint(folder, GLM53(ModelConfig(**{**TINY, "max_sequence_length": 128})), {"step": 0})
    return folder


PROMPT = frozen_tasks("confirm", 1, "double")[0].prompt


@pytest.mark.parametrize("flags, kwargs", [
    ([], {}),  # greedy, the first complete statement
    (["--temperature", "1.0", "--seed", "5", "--samples", "3", "--stop", "end", "--max-new-tokens", "20"],
     {"sampling": Sampling(temperature=1.0), "seed": 5, "samples": 3, "stop": "end", "max_new_tokens": 20}),
    (["--temperature", "1.0", "--seed", "2", "--no-cache", "--stop", "eos", "--max-new-tokens", "10"],
     {"sampling": Sampling(temperature=1.0), "seed": 2, "cache": False, "stop": "eos", "max_new_tokens": 10}),
], ids=["greedy", "sampled", "uncached"])
def test_python_generate_equals_the_command(checkpoint, capsys, flags, kwargs):
    assert main(["generate", "--checkpoint", str(checkpoint), "--prompt", PROMPT, "--json", "--device", "cpu",
                 *flags]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    generations = load_model(checkpoint).model.generate(PROMPT, **kwargs)
    assert all(isinstance(g, Generation) for g in generations)
    assert [g.to_json() for g in generations] == printed and len(printed) == kwargs.get("samples", 1)
    assert all(g.text == PROMPT + g.completion and g.token_ids for g in generations)


@pytest.mark.parametrize("stop", ["function", "end", "eos"])
def test_streaming_yields_the_text_it_returns_without_streaming(checkpoint, stop):
    model = load_model(checkpoint).model
    sampling = Sampling(temperature=1.0, max_new_tokens=24)
    plain = model.generate(PROMPT, sampling, stop=stop, seed=3)
    stream = model.generate(PROMPT, sampling, stop=stop, seed=3, stream=True)
    assert isinstance(stream, TextStream)
    pieces = list(stream)
    assert "".join(pieces) == plain[0].completion and len(pieces) > 1
    assert stream.generations == plain
    # several prompts, greedy: one stream, prompt after prompt, equal to the batch
    prompts = [PROMPT, "def f(x):"]
    stream = model.generate(prompts, max_new_tokens=12, stream=True)
    assert "".join(stream) == "".join(g.completion for g in model.generate(prompts, max_new_tokens=12))
    assert [g.prompt for g in stream.generations] == prompts


@pytest.mark.parametrize("call, message", [
    (lambda m: m.generate([]), "non-empty list of strings"),
    (lambda m: m.generate("x", stop="never"), "stop must be one of function, end, eos"),
    (lambda m: m.generate("x", max_new_tokens=0), "--max-new-tokens must be >= 1"),
    (lambda m: m.generate("x", stream=True, samples=2), "stream=True decodes one sample"),
    (lambda m: m.generate("x" * 200), "exceeds max_sequence_length 128"),
])
def test_bad_input_is_one_line(checkpoint, call, message):
    with pytest.raises(ValueError, match=message) as err:
        call(load_model(checkpoint).model)
    assert "\n" not in str(err.value)
