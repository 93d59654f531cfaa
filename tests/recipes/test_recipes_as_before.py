"""The book gives every recipe it took over what its old tables gave: recipes_before_the_book.json holds, from the
code before the book (run_config.PRESETS, train/speedrun_config.RECIPES), each run preset's RunConfig.to_dict(),
each speedrun row's settings and PretrainConfig(**settings, out="X", suite="broad").to_dict(), less the settings
issue 60 retires (their own tests hold them). `recipe`, new with the book, is the one key added."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from glm53.cli import main
from glm53.recipes.book import pretraining, suite_of
from glm53.run_config import RunConfig
from glm53.train.pretrain_config import PretrainConfig

BEFORE = json.loads((Path(__file__).parent / "recipes_before_the_book.json").read_text())


def plain(value):
    """As JSON holds it (tuples as lists)."""
    return json.loads(json.dumps(value))


@pytest.mark.parametrize("name", sorted(BEFORE["run_presets"]))
def test_each_run_preset_is_as_before_from_python_and_from_the_command(name, monkeypatch, tmp_path):
    assert plain(RunConfig.from_preset("RUN", name).to_dict()) == BEFORE["run_presets"][name]
    seen = {}
    monkeypatch.setattr("glm53.run.run_pipeline", lambda cfg: seen.update(cfg=cfg))
    assert main(["run", "--preset", name, "--out", "RUN", "--accept-partial-isolation"]) == 0
    assert plain(seen["cfg"].to_dict()) == BEFORE["run_presets"][name]  # (the isolation policy is not recorded)


@pytest.mark.parametrize("name", sorted(BEFORE["speedrun_recipes"]))
def test_each_speedrun_row_is_as_before(name):
    assert plain(pretraining(name)) == BEFORE["speedrun_recipes"][name]
    assert suite_of(name) == "broad"
    made = PretrainConfig(**pretraining(name), out="X", suite="broad", recipe=name)
    assert plain(made.to_dict()) == {**BEFORE["pretrain_from_recipe"][name], "recipe": name}


@pytest.mark.parametrize("name", sorted(BEFORE["speedrun_recipes"]))
def test_glm53_pretrain_recipe_runs_the_rows_settings_on_its_suite(name, monkeypatch):
    seen = {}
    monkeypatch.setattr("glm53.train.commands.run_as_rank", lambda train, cfg, **_: seen.update(cfg=cfg) or 0)
    assert main(["pretrain", "--recipe", name, "--out", "X"]) == 0
    cfg = plain(seen["cfg"].to_dict())
    assert (cfg["recipe"], cfg["suite"], cfg["dev_max_new_tokens"]) == (name, "broad", 192)  # the suite's default
    flat = {**cfg, **cfg.pop("model")}
    assert {k: flat[k] for k in BEFORE["speedrun_recipes"][name]} == BEFORE["speedrun_recipes"][name]
    seen.clear()
    assert main(["pretrain", "--recipe", name, "--out", "X", "--steps", "70", "--suite", "broad"]) == 0
    assert seen["cfg"].steps == 70  # the flags go over the recipe


@pytest.mark.slow
def test_a_pretraining_run_records_its_recipe_and_a_run_from_before_the_book_resumes(tmp_path):
    from glm53.data.suites import get_suite
    from glm53.data.tasks import write_tasks

    out, tasks = tmp_path / "run", tmp_path / "dev.jsonl"
    write_tasks(get_suite("broad").pretrain_dev_tasks()[:1], tasks)  # one dev prompt a checkpoint, not 32
    flags = ["pretrain", "--recipe", "e4", "--out", str(out), "--tasks", str(tasks), "--steps", "2",
             "--lr-schedule", "constant", "--warmup-steps", "0", "--dim", "32", "--layers", "2", "--heads", "4",
             "--expert-hidden", "32", "--batch-size", "2", "--dev-max-new-tokens", "2", "--validation-rows", "0",
             "--device", "cpu", "--kernels", "config", "--no-progress"]
    assert main(flags) == 0
    receipt = json.loads((out / "training-receipt.json").read_text())
    assert receipt["run"]["recipe"] == "e4" and receipt["run"]["suite"] == "broad"
    settings = json.loads((out / "run.json").read_text())
    assert settings["recipe"] == "e4"
    (out / "training-receipt.json").unlink()  # as if it had stopped after step 2
    del settings["recipe"]  # and had been started before the book, which names no recipe
    (out / "run.json").write_text(json.dumps(settings))
    assert main([*flags, "--steps", "3", "--resume"]) == 0  # the settings are compared, not the name
    assert json.loads((out / "training-receipt.json").read_text())["run"]["steps"] == 3
