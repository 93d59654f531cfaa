"""The recipe book (glm53/recipes/): recorded recipes never change (each file's sha256 below; a changed, removed or
unrecorded file fails), the resolver follows parent chains and says in one line what is wrong, and every recipe's
settings build the configs that take them."""

from __future__ import annotations

import hashlib

import pytest

from glm53.model.config import MODEL_PRESETS
from glm53.recipes.book import (BOOK, RECORD, pretraining, read_recipe, recipe_chain, recipe_names, resolved,
                                run_recipe_names, run_settings, suite_of)
from glm53.run_config import RunConfig
from glm53.runtime.config import RuntimeConfig
from glm53.runtime.settings import setting_names
from glm53.train.pretrain_config import PretrainConfig
from glm53.train.rl_config import RLConfig

# Append-only: a new recipe is added here with its hash; a recorded one is never edited (a new result is a new
# recipe whose parent is the old one) and never removed.
RECORDED = {
    "broad": "377934098351afa5c65112cd7296eaf7e0aebd1f22b9a01c19dd940d2bc0dcae",
    "broad-rl-budget-4x": "ccb07665968454edf8337b813051573e0d3c7f8a34603146e055593bd8cb8c7b",
    "broad-rl-last-block-head": "41860cc7d8b452fe9fd1be4c2a8d27d0d216cc83ad7aebd158c90156706c4475",
    "code": "2e63d92362b1db366a2006799338a0dc979f28146d17b252c9669a4bfdb88fca",
    "code-stream": "db7046d59a18d5a9a90f40e7cce8a0ec2d057acf63eb9e80c151bc4355731ec8",
    "e4": "a42ecbd57e9c36b1247f93f6fb95a4228e8abcd3ebba254763de7c3f00865d10",
    "full": "25fc40ed1019dd8bd32db8530d689901dafb5cedb91c8248c85bca9ede1fd462",
    "full-rl-groups-of-16": "471a49b27b6867d34f0cf890024bda4016f5fba8625de4dd1e584b51b3cc0b34",
    "muon": "f48ab07e40fe862bc174875c3b8d4d175089f56a10b2dea94f938ea14c696dc4",
    "muon-qk": "2f46923e6a86a1fd163d181324123e14271adf330b2437b68644e380c3dcf906",
    "muon-qk-bpe": "8d3ed58356d81fea2d08e2f117db1a72c6443f0060fd64a9f329ec4743a1f920",
    "muon-qk-bpe-dense": "7bd156b08383b7d7b8f0d429e60219ac4ced683a2c92bb8b9b9da15c5a7e17d8",
    "quick": "0649d7ab542337e1600622ebaee537c39ec0a9005ed745ea8bab8491a4d13aff",
}
# a run's own settings a recipe may hold at its top: what the run does (its suite, its RL start, its corpus, its
# evaluations), not where or how it runs (the folder, the recipe itself, the runtime, what it keeps, the stages)
RUN_KEYS = set(setting_names(RunConfig)) - set(setting_names(RuntimeConfig)) - {"out", "preset", "keep_checkpoints",
                                                                                "pretrain", "rl"}


def test_recorded_recipes_never_change():
    held = {path.stem: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(BOOK.glob("*.toml"))}
    changed = sorted(name for name in held.keys() & RECORDED.keys() if held[name] != RECORDED[name])
    assert not changed, f"recorded recipes changed: {changed}; restore them and write the change as a new recipe"
    assert not RECORDED.keys() - held.keys(), f"recorded recipes removed: {sorted(RECORDED.keys() - held.keys())}"
    new = sorted(held.keys() - RECORDED.keys())
    assert not new, "new recipes: record their sha256 in RECORDED: " + ", ".join(f"{n}: {held[n]}" for n in new)


def test_every_recipe_says_its_change_and_changes_something_over_its_parent():
    for name in recipe_names():
        recipe = read_recipe(name)
        assert recipe.change.strip() and recipe.settings, name
        if recipe.parent is not None:
            assert resolved(name) != resolved(recipe.parent), name


def test_every_recipe_holds_only_settings_of_the_configs_that_take_them(tmp_path):
    pretrain_names = set(setting_names(PretrainConfig)) | {"architecture"}
    for name in recipe_names():
        own = read_recipe(name).settings
        assert set(own) <= RUN_KEYS | {"pretrain", "rl"}, name
        assert set(own.get("pretrain", {})) <= pretrain_names, name
        assert set(own.get("rl", {})) <= set(setting_names(RLConfig)), name
        PretrainConfig(**pretraining(name), out=str(tmp_path / name), suite=suite_of(name) or "reference",
                       recipe=name)  # its checks pass
    for name in run_recipe_names():
        assert RunConfig.from_preset(str(tmp_path / name), name).preset == name


def test_the_speedruns_rows_chain_to_the_record_one_change_at_a_time():
    assert recipe_chain(RECORD) == ["e4", "muon", "muon-qk", "muon-qk-bpe", "muon-qk-bpe-dense"]
    assert recipe_chain("e4") == ["e4"] and pretraining("e4")["steps"] == 3600
    assert {k: pretraining("e4")[k] for k in MODEL_PRESETS["broad"]} == MODEL_PRESETS["broad"]  # its architecture
    assert recipe_chain("broad") == ["e4", "muon", "muon-qk", "muon-qk-bpe", "broad"]
    assert set(run_recipe_names()) == {"full", "quick", "broad", "broad-rl-budget-4x", "broad-rl-last-block-head",
                                       "full-rl-groups-of-16", "code", "code-stream"}
    assert recipe_chain("code") == ["e4", "muon", "muon-qk", "muon-qk-bpe", "broad", "code"]
    assert recipe_chain("code-stream")[-2:] == ["code", "code-stream"]
    assert run_settings("code-stream")["corpus_mix"] == 0.0 and run_settings("code")["corpus_mix"] == 0.25


def test_a_later_row_goes_over_its_parents_and_an_architecture_over_what_came_before(tmp_path):
    write(tmp_path, "a", 'change = "first"\nsuite = "broad"\n[pretrain]\ndim = 64\nsteps = 10\n')
    write(tmp_path, "b", 'parent = "a"\nchange = "the broad model"\n[pretrain]\narchitecture = "broad"\n'
                         "layers = 2\n[rl]\ngroups = 4\ncheckpoints = [2, 4]\n")
    write(tmp_path, "c", 'parent = "b"\nchange = "longer"\n[pretrain]\nsteps = 20\n')
    assert recipe_chain("c", tmp_path) == ["a", "b", "c"]
    got = resolved("c", tmp_path)
    assert got["suite"] == "broad" and got["rl"] == {"groups": 4, "checkpoints": [2, 4]}
    assert got["pretrain"] == {**MODEL_PRESETS["broad"], "layers": 2, "steps": 20}  # dim 64 gave way to the preset's
    assert run_settings("c", tmp_path)["rl"]["checkpoints"] == (2, 4)  # as the configs take it
    assert resolved("a", tmp_path) == {"suite": "broad", "pretrain": {"dim": 64, "steps": 10}}  # the file as read


@pytest.mark.parametrize("files, name, message", [
    ({"a": 'change = "x"\n'}, "nope", "unknown recipe 'nope'; the recipe book ({book}) holds a"),
    ({"a": 'parent = "b"\nchange = "x"\n', "b": 'parent = "a"\nchange = "y"\n'}, "a",
     "recipe 'a': its parents run in a circle (a -> b -> a); each parent must be another recipe; the recipe book "
     "({book}) holds a, b"),
    ({"a": 'parent = "a"\nchange = "x"\n'}, "a", "recipe 'a': its parents run in a circle (a -> a)"),
    ({"a": 'parent = "gone"\nchange = "x"\n'}, "a",
     "recipe 'a' names parent 'gone', which is not in the recipe book ({book}); it holds a"),
    ({"a": '[pretrain]\nsteps = 1\n'}, "a", "recipe 'a' ({book}/a.toml) needs `change`"),
    ({"a": 'change = "x"\n[pretrain]\narchitecture = "huge"\n'}, "a", "architecture 'huge' is not a model preset"),
    ({"a": 'change = "x"\n[eval]\ncount = 1\n'}, "a", "unknown table eval; a recipe's tables are pretrain, rl"),
    ({"a": 'change = "x"\nsteps = \n'}, "a", "is not valid TOML"),
])
def test_a_bad_book_is_one_line_naming_what_is_wrong(tmp_path, files, name, message):
    for file, text in files.items():
        write(tmp_path, file, text)
    with pytest.raises(ValueError) as err:
        resolved(name, tmp_path)
    assert message.format(book=tmp_path) in str(err.value) and "\n" not in str(err.value)


def test_an_unknown_recipe_is_refused_before_anything_is_written(tmp_path, capsys):
    from glm53.cli import main

    for command, known in ((["pretrain", "--recipe", "nope"], "muon-qk-bpe-dense"),
                           (["run", "--preset", "nope"], "broad-rl-budget-4x"),
                           (["speedrun", "--recipe", "nope"], "muon-qk-bpe-dense")):
        assert main([*command, "--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert "'nope'" in err and known in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x").exists()


def write(folder, name: str, text: str) -> None:
    (folder / f"{name}.toml").write_text(text)
