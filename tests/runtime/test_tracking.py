"""--report-to: a tiny run's per-step figures, read back from the TensorBoard event files it wrote."""

import json
import sys
from dataclasses import replace

import pytest

from glm53.cli import main
from glm53.model.config import ModelConfig
from glm53.runtime.tracking import scalars, tracker_problem
from glm53.train.pretrain import pretrain
from glm53.train.pretrain_config import PretrainConfig
from glm53.train.rl_config import RLConfig
from tests.tiny import TINY

NO_TENSORBOARD = "the tensorboard extra is not installed: pip install -e \".[tensorboard]\""

def read_events(folder) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


@pytest.mark.slow
def test_pretraining_figures_reach_tensorboard(tmp_path):
    pytest.importorskip("tensorboard", reason=NO_TENSORBOARD)
    cfg = PretrainConfig(out=str(tmp_path / "run"), steps=3, batch_size=2, sequence_length=128, checkpoints=(3,),
                         progress=False, device="cpu", kernels="config", precision="fp32", report_to="tensorboard",
                         model=ModelConfig(**{**TINY, "max_sequence_length": 192}))
    pretrain(cfg, dev_tasks=[], log=lambda *_: None)
    rows = [json.loads(line) for line in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    events = read_events(tmp_path / "run" / "tensorboard")
    assert set(events) == set().union(*(scalars(r) for r in rows)) | {"val_loss"}  # every number of the log
    assert [s for s, _ in events["val_loss"]] == [0, 3]  # the validation loss at each checkpoint, step 0 included
    for key in ("loss", "grad_norm", "balance_loss", "tokens_seen"):
        assert [s for s, _ in events[key]] == [1, 2, 3]
        assert [v for _, v in events[key]] == pytest.approx([r[key] for r in rows], rel=1e-6)


def test_a_missing_tracker_package_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "wandb", None)
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "wandb" else object())
    assert "pip install" in tracker_problem("wandb")
    out = tmp_path / "run"
    assert main(["pretrain", "--out", str(out), "--steps", "1", "--report-to", "wandb"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--report-to wandb needs the wandb package" in err[0]
    assert not out.exists()


def test_scalars_keep_numbers_only():
    assert scalars({"step": 3, "loss": 1.5, "updated": True, "kl": None, "name": "x", "tokens": 7}) == \
        {"loss": 1.5, "tokens": 7.0}


@pytest.mark.slow
def test_a_sweep_reports_one_run_per_arm_and_seed(tmp_path):
    pytest.importorskip("tensorboard", reason=NO_TENSORBOARD)
    from glm53.sweep.runner import run_sweep
    from glm53.sweep.spec import load_spec

    tiny = "".join(f"{k} = {v}\n" for k, v in TINY.items() if k != "max_sequence_length")
    (tmp_path / "p.toml").write_text(
        'name = "tracked"\njob = "pretrain"\nseeds = [1]\ncheckpoints = [2]\nmetrics = ["train_loss"]\n'
        'baseline = "a"\n[base]\nsteps = 2\nbatch_size = 2\nsequence_length = 128\nmax_sequence_length = 160\n'
        'dev_max_new_tokens = 2\nprecision = "fp32"\n' + tiny + '[arms.a]\nlr = 1e-3\n[arms.b]\nlr = 2e-3\n')
    out = tmp_path / "s"
    summary = run_sweep(load_spec(tmp_path / "p.toml"), out, workers=2, progress=False, log=lambda *_: None,
                        report_to="tensorboard")
    assert summary["done"] == 2
    for arm in ("a", "b"):
        run = out / "runs" / arm / "seed-1" / "run"
        assert [s for s, _ in read_events(run / "tensorboard")["loss"]] == [1, 2]
        receipt = json.loads((run / "training-receipt.json").read_text())["run"]
        assert (receipt["report_to"], receipt["report_name"], receipt["report_group"]) == \
            ("tensorboard", f"{arm}/seed-1", "tracked")


@pytest.mark.slow
def test_the_expression_study_job_reports_its_loss_curve_and_held_out_scores(tmp_path):
    pytest.importorskip("tensorboard", reason=NO_TENSORBOARD)
    from glm53.train.expression_pretrain import ExpressionPretrainConfig, expression_pretrain

    cfg = ExpressionPretrainConfig(steps=3, eval_at=(2, 3), batch_size=4, report_to="tensorboard",
                                   report_name="a/seed-1", report_group="study")
    said = []
    receipt = expression_pretrain(cfg, log=said.append, out=tmp_path / "run")
    assert [line.split(":")[0] for line in said] == ["update 2", "update 3"]
    events = read_events(tmp_path / "run" / "tensorboard")
    assert [s for s, _ in events["loss"]] == [1, 2, 3]
    assert [v for _, v in events["loss"]] == pytest.approx(receipt["loss_curve"], rel=1e-6)
    accuracy = events["heldout_target_byte_accuracy"]
    assert [s for s, _ in accuracy] == [2, 3]
    assert [v for _, v in accuracy] == pytest.approx([receipt["metrics"][k]["target_byte_accuracy"]
                                                      for k in ("2", "3")])
    with pytest.raises(ValueError, match="needs an output folder"):
        expression_pretrain(cfg)



class RecordingTracker:
    def __init__(self):
        self.steps, self.closed = [], False

    def log(self, row, step):
        self.steps.append(step)

    def close(self):
        self.closed = True


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["pretrain", "rl"])
def test_a_run_that_stops_on_an_error_still_closes_its_tracker(tmp_path, monkeypatch, stage):
    """Closing is what flushes a TensorBoard file and finishes a W&B run."""
    import glm53.train.pretrain as pretraining
    import glm53.train.rl as rl

    tracker = RecordingTracker()
    base = dict(progress=False, device="cpu", precision="fp32")
    start = PretrainConfig(out=str(tmp_path / "start"), steps=1, batch_size=2, sequence_length=128, checkpoints=(1,),
                           kernels="config", model=ModelConfig(**{**TINY, "max_sequence_length": 192}), **base)
    if stage == "pretrain":
        real_step = pretraining.train_step

        def third_step_fails(cfg, step, *args, **kwargs):
            if step == 2:
                raise FloatingPointError("loss is nan")
            return real_step(cfg, step, *args, **kwargs)

        monkeypatch.setattr(pretraining, "train_step", third_step_fails)
        monkeypatch.setattr("glm53.runtime.tracking.open_tracker", lambda *a, **k: tracker)
        with pytest.raises(FloatingPointError):
            pretrain(replace(start, steps=4, checkpoints=(4,)), dev_tasks=[], log=lambda *_: None)
    else:
        pretrain(start, dev_tasks=[], log=lambda *_: None)
        real_update = rl.update_policy

        def third_update_fails(*args):
            if args[-2] == 2:  # (..., step, dp)
                raise FloatingPointError("loss is nan")
            return real_update(*args)

        monkeypatch.setattr(rl, "update_policy", third_update_fails)
        # after the start's pretraining
        monkeypatch.setattr("glm53.runtime.tracking.open_tracker", lambda *a, **k: tracker)
        cfg = RLConfig(init=str(tmp_path / "start" / "checkpoint-0001"), out=str(tmp_path / "rl"), groups=4,
                       group_size=2, groups_per_step=1, tasks_per_family=1, families="all", max_new_tokens=4,
                       dev_per_family=0, checkpoints=(4,), **base)
        with pytest.raises(FloatingPointError):
            rl.rl_train(cfg, log=lambda *_: None)
    # pretraining logs its step-0 validation loss too; RL's steps start at 1
    assert tracker.steps == ([0, 1, 2] if stage == "pretrain" else [1, 2]) and tracker.closed
