"""The main job pretrains only up to its RL start: that is safe because under a constant rate the weights at step
k do not depend on how many steps the run was given, so the job's step-100 checkpoint is the one a 400-step
reference run writes at step 100 (docs/main-job.md)."""

import pytest

from glm53.run_config import RunConfig
from glm53.train.pretrain import pretrain

from .test_pretrain import tiny_run


def test_the_full_preset_stops_pretraining_at_its_rl_start():
    cfg = RunConfig.from_preset("o", "full")
    assert cfg.pretrain.steps == cfg.rl_start == 100 and cfg.pretrain.checkpoints == (100,)
    assert cfg.pretrain.optimization.lr_schedule == "constant"  # the equality below needs a rate that ignores steps
    assert (cfg.pretrain.batch_size, cfg.pretrain.optimization.lr, cfg.pretrain.optimization.warmup_steps) == (32, 1e-3,
                                                                                                                20)


@pytest.mark.slow
def test_a_shorter_constant_run_writes_the_longer_runs_checkpoint(tmp_path):
    quiet = lambda *_: None  # noqa: E731
    short = pretrain(tiny_run(tmp_path / "short", steps=2, checkpoints=(2,), warmup_steps=1), log=quiet)
    long = pretrain(tiny_run(tmp_path / "long", steps=4, checkpoints=(2, 4), warmup_steps=1), log=quiet)
    sha = {r["step"]: r["weights_sha256"] for r in long["checkpoints"]}
    assert [r["weights_sha256"] for r in short["checkpoints"] if r["step"] == 2] == [sha[2]]
    assert sha[2] != sha[4]
    # a cosine schedule depends on the total, so there the shorter run's step 3 differs (the test can fail)
    at_3 = [[r["weights_sha256"] for r in pretrain(tiny_run(tmp_path / f"cosine-{steps}", steps=steps, checkpoints=(3,),
                                                             warmup_steps=1, lr_schedule="cosine"),
                                                    log=quiet)["checkpoints"] if r["step"] == 3] for steps in (3, 5)]
    assert at_3[0] != at_3[1]
