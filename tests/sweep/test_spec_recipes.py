"""Sweep specs that name a recipe (glm53/recipes/) plan the jobs they planned when they wrote its settings out:
sweep_jobs_before_the_book.json holds, from the code before the book, every shipped spec's jobs (the setup and each
arm at its first seed): kind, seeds, the spec's flat settings (the job's identity: a sweep folder's receipts, its
--reuse-from and --setup-from match by them) and the built config, less the settings issue 60 retires (their own
tests hold them). A sweep folder written before the book continues."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from glm53.sweep.jobs import job_kind
from glm53.sweep.plan import job_lines
from glm53.sweep.runner import SPEC_FILE, check_sweep_folder
from glm53.sweep.spec import SweepSpec, load_spec, shipped_specs

BEFORE = json.loads((Path(__file__).parent / "sweep_jobs_before_the_book.json").read_text())


def plain(value):
    return json.loads(json.dumps(value))


def jobs_of(spec: SweepSpec) -> dict:
    """{arm or "setup": {kind, seeds, settings, config}} as the golden holds them."""
    kind = job_kind(spec.job)
    jobs = {arm: {"kind": kind.name, "seeds": list(spec.seeds), "settings": spec.settings(arm),
                  "config": kind.make(spec.settings(arm), spec.seeds[0], spec.checkpoints, Path("JOB")).to_dict()}
            for arm in spec.arms}
    if spec.setup:
        s = spec.setup
        made = job_kind(s["job"]).make(s["settings"], s["seed"], tuple(s["checkpoints"]), Path("JOB"))
        jobs["setup"] = {"kind": s["job"], "seed": s["seed"], "settings": s["settings"], "config": made.to_dict()}
    return plain(jobs)


# written with the book (issue 58): no before to hold them to
AFTER_THE_BOOK = {"code-mix", "code-prompts", "code-size", "code-corpus", "code-mix-confirm",
                  "code-prompts-confirm", "code-wider", "code-wider-share"}


def test_every_shipped_spec_is_in_the_record():
    assert sorted(set(shipped_specs()) - AFTER_THE_BOOK) == sorted(BEFORE)


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_every_shipped_spec_plans_the_jobs_it_planned_before_the_book(name):
    got, wanted = jobs_of(load_spec(name)), BEFORE[name]
    assert sorted(got) == sorted(wanted)
    for job in wanted:
        config = got[job]["config"]
        assert config.pop("recipe", "") == "", job  # a pretraining config's label, new with the book: none here
        assert {**got[job], "config": config} == wanted[job], (name, job)


def test_the_specs_name_their_recipes_and_state_less():
    named = {name: load_spec(name).recipes for name in shipped_specs()}
    assert named["broad-run"] == {"setup": "broad"} and named["rl-screen-broad"] == {"setup": "e4"}
    assert named["rl-run-start"] == {"setup": "full", "base": "full-rl-groups-of-16"}
    assert named["released-attention"] == {"base": "full"} and named["rl-screen"] is None
    spec = load_spec("broad-run")
    saved = spec.to_dict()
    assert saved["recipes"] == {"setup": "broad"} and SweepSpec.from_saved(plain(saved)) == spec
    assert "recipes" not in load_spec("rl-screen").to_dict()  # a spec that names none saves as before
    lines = job_lines(load_spec("rl-run-start"))
    assert "  recipes (glm53/recipes/): [setup] full, [base] full-rl-groups-of-16" in lines
    assert not any("recipes" in line for line in job_lines(load_spec("rl-screen")))


def test_a_sweep_folder_from_before_the_book_continues(tmp_path):
    spec = load_spec("broad-run")
    old = plain(spec.to_dict())
    del old["recipes"]  # what `glm53 sweep broad-run` saved before the spec named its recipe
    (tmp_path / SPEC_FILE).write_text(json.dumps(old))
    assert check_sweep_folder(spec, tmp_path) is True
    other = plain(load_spec("rl-generalize").to_dict())
    (tmp_path / SPEC_FILE).write_text(json.dumps(other))
    with pytest.raises(ValueError, match="holds another sweep"):
        check_sweep_folder(spec, tmp_path)


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.replace('recipe = "broad"', 'recipe = "nope"'),
     "sweep spec {where}: setup: unknown recipe 'nope'; the recipe book (glm53/recipes/) holds broad, "),
    (lambda s: s.replace("[arms.broad]", '[arms.broad]\nrecipe = "e4"'),
     "sweep spec {where}: arm 'broad' names a recipe; an arm states what it changes over [base]"),
    (lambda s: s.replace('recipe = "broad"', 'recipe = "e4"'), None),  # e4's start: a spec of its own
])
def test_a_recipe_in_a_spec_is_checked_as_it_loads(tmp_path, edit, message):
    path = tmp_path / "spec.toml"
    path.write_text(edit((Path(__file__).parents[2] / "glm53/sweep/specs/broad-run.toml").read_text()))
    if message is None:
        assert load_spec(path).setup["settings"]["steps"] == 3600
        return
    with pytest.raises(ValueError) as err:
        load_spec(path)
    assert str(err.value).startswith(message.format(where=path)) and "\n" not in str(err.value)


def test_a_job_without_a_recipe_table_refuses_one(tmp_path):
    path = tmp_path / "spec.toml"
    path.write_text('job = "expression-pretrain"\nseeds = [1]\ncheckpoints = [10]\nbaseline = "a"\n'
                    '[base]\nrecipe = "full"\n[arms.a]\n')
    with pytest.raises(ValueError, match="a expression-pretrain job takes no recipe"):
        load_spec(path)
