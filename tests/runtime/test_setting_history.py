"""Settings over time (runtime/setting_history.py): a record written before a setting was added reads it at the
value its run ran; one written before a lever was retired loads, resumes and replays when it holds the value
today's code runs, and is refused in one line naming the setting, the value and the last commit that had it
otherwise. The records are written here as commit dd08160 wrote them: today's settings plus the retired ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from glm53 import GLM53, ModelConfig
from glm53.checkpoints.format import load_model, save_checkpoint
from glm53.cli import main
from glm53.run_config import RunConfig
from glm53.runtime.composition import leaves
from glm53.runtime.config import RESUMABLE_CHANGES
from glm53.runtime.setting_history import (ADDED, ANY_VALUE, RETIRED, SETTING_HISTORY, read_as_today,
                                           retired_problem)
from glm53.runtime.settings import config_from_settings
from glm53.sweep.spec import spec_from_dict
from glm53.train.pretrain import pretrain
from glm53.train.pretrain_config import PretrainConfig
from glm53.train.rl_config import RLConfig
from glm53.train.run_folder import check_resume_settings
from glm53.vision.training_config import DigitTraining

from ..tiny import TINY
from ..train.test_pretrain import losses, tiny_run

DOCS = Path(__file__).resolve().parents[2] / "docs"
# what dd08160, the last commit with the five screened levers, recorded of them at their defaults
RETIRED_RUN = {"width_multiple": 0, "decay_fraction": 0.2}
RETIRED_MODEL = {"expert_activation": "silu", "value_embeddings": 0, "zero_init_projections": False}
# each lever on, as a record of a screen holds it: (where in the record, setting, value)
LEVERS_ON = [("run", "width_multiple", 64), ("run", "lr_schedule", "wsd"), ("model", "expert_activation", "relu2"),
             ("model", "value_embeddings", 2), ("model", "zero_init_projections", True)]
TINY_MODEL = {**TINY, "max_sequence_length": 160}


def as_dd08160_wrote(settings: dict) -> dict:
    """A pretraining run's settings (PretrainConfig.to_dict()) with the retired ones dd08160 recorded beside them."""
    return {**settings, **RETIRED_RUN, "model": {**settings["model"], **RETIRED_MODEL}}


def with_lever(record: dict, where: str, name: str, value) -> dict:
    if where == "model":
        return {**record, "model": {**record["model"], name: value}}
    return {**record, name: value}


def rewrite_config(checkpoint: Path, config: dict) -> None:
    """config.json as an older commit wrote it, with the sha256 that commit recorded of it in metadata.json."""
    from glm53.runtime.files import sha256_file

    (checkpoint / "config.json").write_text(json.dumps(config))
    metadata = json.loads((checkpoint / "metadata.json").read_text())
    metadata["config_sha256"] = sha256_file(checkpoint / "config.json")
    (checkpoint / "metadata.json").write_text(json.dumps(metadata))


def assert_refused_line(text: str, name: str, value) -> None:
    assert f"{name} = {value!r} was retired" in text and "dd08160" in text and len(text.strip().splitlines()) == 1


# ---------------------------------------------------------------- the table

def test_today_reads_a_retired_setting_at_its_value_and_refuses_any_other():
    record = {"steps": 4, **RETIRED_RUN, "lr_schedule": "cosine", "model": {"dim": 32, **RETIRED_MODEL}}
    assert read_as_today(record, "r") == {"steps": 4, "lr_schedule": "cosine", "model": {"dim": 32}}
    assert read_as_today({"decay_fraction": 0.5}, "r") == {}  # read by wsd alone, itself refused
    for _, name, value in LEVERS_ON:
        with pytest.raises(ValueError) as err:
            read_as_today({"model": {name: value}}, "old/run.json")
        assert str(err.value).startswith("old/run.json: ")
        assert_refused_line(str(err.value), name, value)
    assert retired_problem("lr_schedule", "constant") is None and retired_problem("suite", "broad") is None


def test_the_table_agrees_with_the_configs_and_the_docs():
    """A retired setting is no setting of today's configs (a retired choice's setting stays), reads as nothing at
    the value that runs as today, and its flag with its last commit is in the docs' Retired levers; an added one is
    a setting today."""
    names = {f.name for f in ModelConfig.__dataclass_fields__.values()}
    for cls in (PretrainConfig, RLConfig, RunConfig, DigitTraining):
        names |= {leaf.name.rsplit(".", 1)[-1] for leaf in leaves(cls)}
    docs = (DOCS / "speedrun.md").read_text()
    retired = docs[docs.index("### Retired levers"):]
    for name, change in SETTING_HISTORY.items():
        if change.kind == ADDED:
            assert name in names, name
            continue
        assert (name in names) == (change.kind != RETIRED), name  # a retired choice's setting stays
        flag = f"--pretrain.{name.replace('_', '-')}"
        assert flag in retired and f"last in {change.commit}" in retired, name
        assert change.kind != RETIRED or change.value == ANY_VALUE or read_as_today({name: change.value}, "") == {}


# ---------------------------------------------------------------- checkpoints

@pytest.fixture
def old_checkpoint(tmp_path):
    """A checkpoint whose config.json holds the retired model fields at today's values, as dd08160 saved it."""
    path = tmp_path / "checkpoint-0001"
    model = GLM53(ModelConfig(**TINY_MODEL))
    save_checkpoint(path, model, {"step": 1})
    rewrite_config(path, {**json.loads((path / "config.json").read_text()), **RETIRED_MODEL})
    return path, model


def test_an_old_checkpoint_loads_and_one_with_a_lever_on_is_refused(old_checkpoint, tmp_path, capsys):
    path, model = old_checkpoint
    loaded = load_model(path).model
    assert loaded.config == model.config and all((a == b).all() for a, b in zip(
        loaded.state_dict().values(), model.state_dict().values()))
    assert GLM53.from_pretrained(path).config == model.config
    for _, name, value in LEVERS_ON[2:]:  # the model's levers
        rewrite_config(path, {**json.loads((path / "config.json").read_text()), name: value})
        with pytest.raises(ValueError) as err:
            load_model(path)
        assert_refused_line(str(err.value), name, value)
        # glm53 rl --init reads the start checkpoint's config before anything is written
        assert main(["rl", "--init", str(path), "--out", str(tmp_path / "rl"), "--groups", "1"]) == 2
        assert_refused_line(capsys.readouterr().err, name, value)
        assert not (tmp_path / "rl").exists()
        rewrite_config(path, {**json.loads((path / "config.json").read_text()), **RETIRED_MODEL})


# ---------------------------------------------------------------- run folders

@pytest.mark.slow
def test_an_old_run_folder_resumes_exactly(tmp_path):
    """A pretraining folder as dd08160 left it (the retired settings in run.json and config.json, and none of
    the settings added to pretraining since --corpus) resumes to the uninterrupted run's losses."""
    whole, part = tmp_path / "whole", tmp_path / "part"
    quiet = lambda *_: None  # noqa: E731
    pretrain(tiny_run(whole, steps=2, checkpoints=(1, 2), batch_size=2), dev_tasks=[], log=quiet)
    pretrain(tiny_run(part, steps=1, checkpoints=(1,), batch_size=2), dev_tasks=[], log=quiet)
    (part / "training-receipt.json").unlink()
    recorded = as_dd08160_wrote(json.loads((part / "run.json").read_text()))
    for name in ("corpus", "corpus_mix", "loss_on", "data_order", "grad_accumulation", "suite", "docstring_share"):
        del recorded[name]
    (part / "run.json").write_text(json.dumps(recorded))
    checkpoint = part / "checkpoint-0001"
    rewrite_config(checkpoint, {**json.loads((checkpoint / "config.json").read_text()), **RETIRED_MODEL})
    pretrain(tiny_run(part, steps=2, checkpoints=(1, 2), batch_size=2, resume=True), dev_tasks=[], log=quiet)
    assert losses(part) == losses(whole)


@pytest.mark.parametrize("where,name,value", LEVERS_ON)
def test_a_run_folder_with_a_lever_on_is_refused_in_one_line(tmp_path, where, name, value):
    now = PretrainConfig(out=str(tmp_path), model=ModelConfig(**TINY_MODEL)).to_dict()
    (tmp_path / "run.json").write_text(json.dumps(as_dd08160_wrote(now)))
    check_resume_settings(tmp_path, now, RESUMABLE_CHANGES)  # at today's values: no difference
    (tmp_path / "run.json").write_text(json.dumps(with_lever(as_dd08160_wrote(now), where, name, value)))
    with pytest.raises(ValueError) as err:
        check_resume_settings(tmp_path, now, RESUMABLE_CHANGES)
    assert str(err.value).startswith(f"--resume: {tmp_path / 'run.json'}: ")
    assert_refused_line(str(err.value), name, value)


def test_a_main_job_folder_reads_its_stages_alike(tmp_path):
    now = RunConfig.from_preset(str(tmp_path), "quick").folder_settings()
    old = json.loads(json.dumps(now))
    old["pretrain"] = as_dd08160_wrote(old["pretrain"])
    del old["pretrain"]["corpus"], old["rl"]["objective"]  # added since --corpus and the RL arms
    (tmp_path / "run.json").write_text(json.dumps(old))
    check_resume_settings(tmp_path, now, RESUMABLE_CHANGES)
    with pytest.raises(ValueError, match="settings differ .*: rl.objective"):
        check_resume_settings(tmp_path, {**now, "rl": {**now["rl"], "objective": "rejection-sampling"}},
                              RESUMABLE_CHANGES)
    old["pretrain"]["model"]["value_embeddings"] = 6
    (tmp_path / "run.json").write_text(json.dumps(old))
    with pytest.raises(ValueError, match="value_embeddings = 6 was retired"):
        check_resume_settings(tmp_path, now, RESUMABLE_CHANGES)


# ---------------------------------------------------------------- replays

def test_an_old_receipt_replays_as_it_ran_and_one_with_a_lever_on_is_refused(tmp_path, capsys):
    settings = PretrainConfig(out="old", model=ModelConfig(**TINY_MODEL)).to_dict()
    (tmp_path / "receipt.json").write_text(json.dumps({"run": as_dd08160_wrote(settings)}))
    (tmp_path / "today.json").write_text(json.dumps({"run": settings}))
    printed = {}
    for name in ("receipt", "today"):
        assert main(["pretrain", "--config", str(tmp_path / f"{name}.json"), "--out", "new", "--print-config"]) == 0
        printed[name] = capsys.readouterr().out
    assert printed["receipt"] == printed["today"] and "width_multiple" not in printed["receipt"]
    for where, name, value in LEVERS_ON:
        (tmp_path / "receipt.json").write_text(json.dumps({"run": with_lever(as_dd08160_wrote(settings), where,
                                                                             name, value)}))
        assert main(["pretrain", "--config", str(tmp_path / "receipt.json"), "--out", str(tmp_path / "new")]) == 2
        assert_refused_line(capsys.readouterr().err, name, value)
        assert not (tmp_path / "new").exists()


def test_a_replayed_record_reads_a_setting_it_lacks_at_the_value_its_run_ran(tmp_path, capsys):
    """A main job recorded before --loss-on replays with every byte a target, although its preset (broad) now
    takes the loss on completions."""
    old = RunConfig.from_preset("old", "broad").folder_settings()
    del old["pretrain"]["loss_on"]
    (tmp_path / "run.json").write_text(json.dumps(old))
    assert main(["run", "--config", str(tmp_path / "run.json"), "--out", "new", "--print-config"]) == 0
    assert 'loss_on = "all"' in capsys.readouterr().out


def test_a_sweep_spec_with_a_retired_setting(tmp_path):
    spec = {"name": "old", "job": "pretrain", "seeds": [1], "checkpoints": [2], "baseline": "a",
            "base": {"steps": 2, "width_multiple": 0, "expert_activation": "silu"}, "arms": {"a": {}}}
    assert spec_from_dict(spec, "old.toml").settings("a")["width_multiple"] == 0  # kept as written: its identity
    assert not hasattr(config_from_settings(PretrainConfig, {"out": "o", "width_multiple": 0}, "s"), "width_multiple")
    with pytest.raises(ValueError) as err:
        spec_from_dict({**spec, "arms": {"a": {"expert_activation": "relu2"}}}, "old.toml")
    assert str(err.value).startswith("sweep spec old.toml: arm 'a': ")
    assert_refused_line(str(err.value), "expert_activation", "relu2")
