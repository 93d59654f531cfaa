import json

import pytest
import torch

from glm53.cli import main
from glm53.recipes.book import RECORD, pretraining, recipe_chain
from glm53.speed.speedrun_config import speedrun_recipes
from glm53.train.muon import newton_schulz_precision

TINY_FLAGS = ["--pretrain.dim", "32", "--pretrain.layers", "2", "--pretrain.heads", "4", "--pretrain.expert-hidden",
              "32", "--pretrain.batch-size", "2", "--device", "cpu", "--no-progress", "--pretrain.kernels", "config",
              "--pretrain.warmup-steps", "0"]


@pytest.mark.slow
def test_speedrun_stops_at_the_target_and_writes_a_loadable_model(tmp_path, capsys):
    out = tmp_path / "sr"
    # a target every model meets: the first check (due at once, every 0 s) stops the run
    assert main(["speedrun", "--out", str(out), "--pretrain.steps", "50", "--target", "100",
                 "--check-every-seconds", "1e-9", *TINY_FLAGS]) == 0
    result = json.loads((out / "speedrun.json").read_text())
    assert result["target_reached"] and result["steps"] == 1 and result["checks"] == 1
    assert result["seconds_to_target"] == result["seconds"] > 0
    assert result["body_loss"] <= 100 and result["target_tasks"] == 64
    assert 0 <= result["dev_passed"] <= 32 and result["recipe"] == RECORD and result["seed"] == 42
    assert {"cpu", "torch_version", "threads", "check_seconds", "settings"} <= set(result)
    # the record trains with Muon: the receipt names its Newton-Schulz precision, by the hardware's rule
    assert result["muon_newton_schulz"] == newton_schulz_precision(torch.device("cpu"))
    assert result["settings"]["pretrain"]["model"]["dim"] == 32  # the resolved settings, flags over the recipe
    capsys.readouterr()
    assert main(["eval", "--checkpoint", str(out / "final"), "--suite", "broad", "--split", "dev", "--count", "1",
                 "--max-new-tokens", "4", "--out", str(tmp_path / "eval.json")]) == 0
    assert main(["speedrun", "--out", str(out), *TINY_FLAGS]) == 2  # never overwritten
    assert "already exists" in capsys.readouterr().err


@pytest.mark.slow
def test_speedrun_exits_nonzero_when_the_schedule_or_the_budget_ends_first(tmp_path):
    out = tmp_path / "short"
    assert main(["speedrun", "--out", str(out), "--pretrain.steps", "2", "--target", "0.001", *TINY_FLAGS]) == 1
    result = json.loads((out / "speedrun.json").read_text())
    assert not result["target_reached"] and result["seconds_to_target"] is None
    assert result["steps"] == 2 and result["best_body_loss"] > 0.001 and not (out / "final").exists()
    out = tmp_path / "budget"
    assert main(["speedrun", "--out", str(out), "--budget-minutes", "1e-6", "--target", "0.001", *TINY_FLAGS]) == 1
    result = json.loads((out / "speedrun.json").read_text())
    assert not result["target_reached"] and result["steps"] == 0


def test_the_speedruns_recipes_are_its_rows_in_the_book():
    """The rows of docs/speedrun.md, first to record (the book's own tests hold each row's chain and settings)."""
    assert speedrun_recipes() == tuple(recipe_chain(RECORD)) == ("e4", "muon", "muon-qk", "muon-qk-bpe",
                                                                 "muon-qk-bpe-dense")


@pytest.mark.slow
def test_a_screen_checks_every_n_steps_whatever_the_clock(tmp_path):
    out = tmp_path / "screen"
    assert main(["speedrun", "--out", str(out), "--pretrain.steps", "5", "--target", "0.001",
                 "--check-every-steps", "2", "--check-every-seconds", "1e9", *TINY_FLAGS]) == 1
    steps = [json.loads(line)["step"] for line in (out / "speedrun_log.jsonl").read_text().splitlines()]
    assert steps == [2, 4, 5]  # every 2 steps, and the schedule's last


@pytest.mark.parametrize("name", [None, *speedrun_recipes()])
def test_each_recipe_runs_its_own_settings_whatever_the_default(name, monkeypatch, tmp_path):
    """The command puts a recipe's whole chain over the first row: an earlier recipe named by --recipe gets none of
    the default (the record's) settings, such as its tokenizer. Without --recipe it runs the record."""
    from glm53.speed import commands as speedrun_module

    seen = {}
    monkeypatch.setattr(speedrun_module, "speedrun", lambda cfg, started: seen.update(cfg=cfg) or
                        {"target_reached": True})
    assert main(["speedrun", "--out", str(tmp_path / "x"), *(["--recipe", name] if name else [])]) == 0
    name = name or RECORD
    cfg = seen["cfg"]
    pretrain = cfg.pretrain
    assert cfg.recipe == pretrain.recipe == cfg.to_dict()["pretrain"]["recipe"] == name  # recorded with the run
    for key, value in pretraining(name).items():
        owner = next(x for x in (pretrain, pretrain.optimization, pretrain.model) if hasattr(x, key))
        got = getattr(owner, key)
        assert got == value, (key, got, value)
    if "tokenizer" not in pretraining(name):
        assert pretrain.model.tokenizer == "byte"
