"""`--compile`: torch.compile of the model's forward (inductor on the CPU). A speedrun lever tried and dropped
(docs/speedrun.md); what it trains must still be what the plain forward trains."""

import pytest
import torch

from glm53 import ModelConfig
from glm53.checkpoints.format import load_model
from glm53.train.pretrain import pretrain

from ..tiny import TINY
from .test_pretrain import losses, tiny_run


@pytest.mark.slow
def test_the_compiled_step_equals_the_plain_one_to_rounding(tmp_path):
    """--compile (torch.compile of the model's forward, inductor on the CPU) trains the same weights as the plain
    forward, to rounding: two fp32 steps of a two-layer tiny model (a linear and a sparse layer: compiling takes
    most of this test's time), the losses and the final weights compared."""
    model = ModelConfig(**{**TINY, "layers": 2, "sparse_every": 2, "max_sequence_length": 160})
    runs = {}
    for compiled in (False, True):
        out = tmp_path / ("compiled" if compiled else "plain")
        pretrain(tiny_run(out, steps=2, checkpoints=(2,), compile=compiled, precision="fp32",
                          model=model), dev_tasks=[], log=lambda *_: None)
        runs[compiled] = (losses(out), load_model(out / "checkpoint-0002", "cpu").model.state_dict())
    torch.testing.assert_close(runs[True][0], runs[False][0], rtol=1e-4, atol=1e-5)
    for name, weight in runs[False][1].items():
        torch.testing.assert_close(runs[True][1][name], weight, rtol=1e-4, atol=1e-5, msg=name)
