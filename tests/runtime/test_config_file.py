"""`--config FILE` and `--print-config` (runtime/config_file.py): the TOML emitter, the precedence of defaults,
suite or preset, file and flags, one-line refusals naming the key and the file, the round trip of --print-config
for pretrain, rl, run and eval, and a replay from a run's run.json that reproduces its weights."""

from __future__ import annotations

import json
import math
import tomllib
from argparse import Namespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glm53.cli import main
from glm53.evaluate.eval_config import EvalCommandConfig
from glm53.run_config import RunConfig
from glm53.runtime.config_file import (RUN_SETTINGS_FILE, config_from_command, config_toml, file_settings,
                                       to_toml, toml_value)
from glm53.train.pretrain_config import PretrainConfig
from glm53.train.rl_config import RLConfig

from ..tiny import TINY

TINY_FLAGS = [text for k, v in TINY.items() if k != "max_sequence_length"
              for text in (f"--{k.replace('_', '-')}", str(v))] + ["--max-sequence-length", "160"]


def printed(capsys, argv) -> str:
    """What `glm53 ARGV --print-config` prints (stdout), checked to be the only output and a success."""
    capsys.readouterr()
    assert main([*argv, "--print-config"]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def refused(capsys, argv) -> str:
    """The one line a refused command prints on stderr (exit code 2)."""
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


# ---------------------------------------------------------------- the emitter

def test_toml_values_read_back_exactly():
    doc = {"text": 'quote " back \\ tab \t newline \n bell \x07 del \x7f café ✓', "n": -3, "big": 2 ** 62,
           "flag": False, "tiny": 1e-05, "huge": 1e16, "third": 1 / 3, "whole": 3.0, "neg_zero": -0.0,
           "up": math.inf, "down": -math.inf, "ints": [100, 200], "floats": [0.9, 0.95], "empty": [],
           "gone": None, "table": {"lr": 0.001, "sub": {"x": "y"}}, "odd key": 1}
    back = tomllib.loads(to_toml(doc))
    assert back == {k: v for k, v in doc.items() if v is not None}
    assert math.copysign(1, back["neg_zero"]) == -1
    assert math.isnan(tomllib.loads(to_toml({"x": math.nan}))["x"])
    assert "[table.sub]" in to_toml(doc)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",))), st.floats(allow_nan=False),
       st.integers(min_value=-2 ** 63, max_value=2 ** 63 - 1))
def test_any_string_float_and_int_reads_back(text, number, integer):
    assert tomllib.loads(to_toml({"s": text, "f": number, "i": integer})) == {"s": text, "f": number, "i": integer}


def test_values_toml_cannot_hold_are_refused():
    with pytest.raises(ValueError, match="lone surrogate"):
        toml_value("x\udbbcy")
    with pytest.raises(ValueError, match="cannot hold None"):
        toml_value([1, None])
    with pytest.raises(TypeError, match="no TOML form"):
        toml_value(object())


# ---------------------------------------------------------------- precedence

def test_pretrain_defaults_then_suite_then_file_then_flags(tmp_path, capsys):
    f = tmp_path / "my.toml"
    f.write_text('suite = "broad"\nsteps = 7\nlr = 0.005\nsequence-length = 330\n[model]\ndim = 96\n')
    got = tomllib.loads(printed(capsys, ["pretrain", "--config", str(f), "--steps", "9"]))
    assert got["steps"] == 9  # the flag over the file
    assert got["lr"] == 0.005 and got["sequence_length"] == 330 and got["dim"] == 96  # the file over suite, default
    assert got["max_sequence_length"] == 384  # the broad suite's, over the dataclass's 192
    assert got["batch_size"] == 32 and "out" not in got  # the default; a required setting unset stays out


def test_run_preset_from_the_file_under_its_tables_and_the_flags(tmp_path, capsys):
    f = tmp_path / "run.toml"
    f.write_text('preset = "quick"\nout = "runs/x"\npretrain.lr = 0.002\n[rl]\ntemperature = 0.5\n')
    got = tomllib.loads(printed(capsys, ["run", "--config", str(f), "--pretrain.warmup-steps", "5"]))
    assert got["preset"] == "quick" and got["out"] == "runs/x"
    assert got["pretrain"]["batch_size"] == 16 and got["pretrain"]["steps"] == 100  # the quick preset's
    assert got["pretrain"]["lr"] == 0.002 and got["rl"]["temperature"] == 0.5  # the file's
    assert got["pretrain"]["warmup_steps"] == 5  # the flag's, over the preset's 10
    assert "out" not in got["pretrain"] and "init" not in got["rl"]  # set by the run itself


def test_eval_several_samples_take_the_sampled_temperature_unless_given(tmp_path, capsys):
    f = tmp_path / "eval.toml"
    f.write_text('checkpoint = "ck"\nout = "e.json"\nsplit = "dev"\nsamples = 4\n')
    assert tomllib.loads(printed(capsys, ["eval", "--config", str(f)]))["temperature"] == 0.35
    f.write_text(f.read_text() + "temperature = 0.5\n")
    assert tomllib.loads(printed(capsys, ["eval", "--config", str(f)]))["temperature"] == 0.5
    assert tomllib.loads(printed(capsys, ["eval", "--config", str(f), "--temperature", "0.7"]))["temperature"] == 0.7


# ---------------------------------------------------------------- refusals

@pytest.mark.parametrize("text, message", [
    ("stepz = 3\n", "unknown setting 'stepz' (did you mean 'steps'?)"),
    ('steps = "three"\n', "steps must be a int, got 'three'"),
    ("betas = 0.9\n", "betas must be a list"),
    ("steps = 0\n", "--steps must be >= 1, got 0 (with --config"),
    ('lr_schedule = "linear"\n', "--lr-schedule must be one of constant"),
    ("[pretrain]\nsteps = 3\n", "[pretrain] is not a table of settings"),
    ("dim = 64\n[model]\ndim = 32\n", "dim given twice"),
    ("report_name = 'x'\n", "report_name is set by the command itself"),
    ("steps = \n", "is not valid TOML"),
])
def test_a_bad_file_is_one_line_naming_the_key_and_the_file(tmp_path, capsys, text, message):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    out = tmp_path / "run"
    err = refused(capsys, ["pretrain", "--config", str(f), "--out", str(out), *TINY_FLAGS])
    assert message in err and str(f) in err, err
    assert not out.exists()


def test_required_settings_come_from_the_flags_or_the_file(tmp_path, capsys):
    assert "--out is required" in refused(capsys, ["pretrain", "--steps", "3"])
    assert "--init is required" in refused(capsys, ["rl", "--out", str(tmp_path / "rl")])
    f = tmp_path / "rl.toml"
    f.write_text(f'out = "{tmp_path / "rl"}"\n[pretrain]\nout = "x"\n')
    assert "pretrain.out is set by the command itself" in refused(capsys, ["run", "--config", str(f)])
    assert "no such file" in refused(capsys, ["pretrain", "--config", str(tmp_path / "nope.toml")])
    assert not (tmp_path / "rl").exists()


# ---------------------------------------------------------------- the round trip

ROUND_TRIPS = {  # a command's flags, and some of the values they must print
    "pretrain": (["pretrain", "--out", "runs/p", "--steps", "3", "--lr", "0.00123", "--betas", "0.8,0.9",
                  "--no-progress", "--linear-attention", "kda", "--suite", "broad"],
                 {"steps": 3, "lr": 0.00123, "betas": [0.8, 0.9], "progress": False, "linear_attention": "kda",
                  "max_sequence_length": 384}),
    "rl": (["rl", "--init", "runs/p/checkpoint-0003", "--out", "runs/rl", "--groups", "8", "--temperature", "0.45",
            "--dev-samples", "2", "--families", "all", "--tasks-file", "t.jsonl"],
           {"init": "runs/p/checkpoint-0003", "groups": 8, "temperature": 0.45, "dev_samples": 2, "checkpoints": [8],
            "tasks_file": "t.jsonl"}),
    "run": (["run", "--out", "runs/r", "--preset", "quick", "--pretrain.lr", "0.002", "--rl.dev-samples", "3",
             "--pretrain.threads", "1"],
            {"out": "runs/r", "preset": "quick", "pretrain": {"lr": 0.002, "threads": 1, "steps": 100},
             "rl": {"dev_samples": 3, "groups": 16}}),
    "eval": (["eval", "--checkpoint", "ck", "--out", "e.json", "--split", "confirm", "--samples", "4",
              "--per-family", "2"],
             {"checkpoint": "ck", "split": "confirm", "samples": 4, "temperature": 0.35, "per_family": 2}),
}


def contains(found: dict, want: dict) -> bool:
    return all(contains(found[k], v) if isinstance(v, dict) else found.get(k) == v for k, v in want.items())


@pytest.mark.parametrize("command", ROUND_TRIPS)
def test_print_config_reads_back_to_the_same_settings(tmp_path, capsys, command):
    argv, values = ROUND_TRIPS[command]
    first = printed(capsys, argv)
    assert contains(tomllib.loads(first), values), first
    f = tmp_path / "printed.toml"
    f.write_text(first)
    assert printed(capsys, [command, "--config", str(f)]) == first


@pytest.mark.parametrize("make", [
    lambda: PretrainConfig(out="o", steps=5, checkpoints=(2,), betas=(0.8, 0.99), lr=1 / 3, dim=96, progress=False),
    lambda: RLConfig(init="i", out="o", groups=4, temperature=0.3, dev_samples=1, dev_temperature=0.0, tasks_file="t"),
    lambda: RunConfig.from_preset("o", "broad", pretrain=dict(lr=5e-4), rl_start=2400),
    lambda: EvalCommandConfig(checkpoint="c", out="o", tasks="t.jsonl", samples=2, temperature=0.9, top_p=0.5),
], ids=["pretrain", "rl", "run", "eval"])
def test_the_printed_toml_builds_an_equal_config(tmp_path, make):
    cfg = make()
    f = tmp_path / "c.toml"
    f.write_text(config_toml(cfg))
    assert config_from_command(type(cfg), Namespace(config_file=str(f))) == cfg


# ---------------------------------------------------------------- replays

def test_recorded_runs_replay_their_settings_with_a_new_out(tmp_path, capsys):
    rl = RLConfig(init="ck", out=str(tmp_path / "old"), groups=8, temperature=0.5, dev_samples=2, resume=True)
    (tmp_path / "rl.json").write_text(json.dumps(rl.to_dict()))
    receipt = tmp_path / "rl-receipt.json"
    receipt.write_text(json.dumps({"schema_version": "1.0", "settings": rl.to_dict(), "steps": []}))
    assert file_settings(RLConfig, receipt) == file_settings(RLConfig, tmp_path / "rl.json")
    assert "out" not in file_settings(RLConfig, receipt) and "resume" not in file_settings(RLConfig, receipt)
    want = printed(capsys, ["rl", "--init", "ck", "--out", "new", "--groups", "8", "--temperature", "0.5",
                            "--dev-samples", "2"])
    assert printed(capsys, ["rl", "--config", str(receipt), "--out", "new"]) == want

    run = RunConfig.from_preset(str(tmp_path / "r"), "quick", pretrain=dict(lr=0.002))
    folder = tmp_path / "r"
    folder.mkdir()
    (folder / RUN_SETTINGS_FILE).write_text(json.dumps(run.folder_settings()))
    want = printed(capsys, ["run", "--preset", "quick", "--pretrain.lr", "0.002", "--out", "new"])
    assert printed(capsys, ["run", "--config", str(folder), "--out", "new"]) == want
    err = refused(capsys, ["run", "--config", str(folder)])
    assert "--out is required" in err and "recorded run's out is not taken" in err


@pytest.mark.slow
def test_a_pretraining_run_replays_from_its_run_json_to_the_same_weights(tmp_path, capsys):
    from glm53.data.tasks import frozen_tasks, write_tasks
    from glm53.checkpoints.names import RUN_CONFIG_NAME

    assert RUN_SETTINGS_FILE == RUN_CONFIG_NAME
    tasks = tmp_path / "dev.jsonl"
    write_tasks(frozen_tasks("confirm", 1, "double"), tasks)  # one dev prompt, 2 tokens: the weights are compared
    first, again = tmp_path / "first", tmp_path / "again"
    assert main(["pretrain", "--out", str(first), "--steps", "3", "--batch-size", "2", "--lr", "0.002",
                 "--dev-max-new-tokens", "2", "--device", "cpu", "--no-progress", "--tasks", str(tasks),
                 *TINY_FLAGS]) == 0
    assert main(["pretrain", "--config", str(first / RUN_CONFIG_NAME), "--out", str(again), "--tasks", str(tasks)]) == 0
    receipts = [json.loads((run / "training-receipt.json").read_text()) for run in (first, again)]
    hashes = [[c["weights_sha256"] for c in r["checkpoints"]] for r in receipts]
    assert hashes[0] == hashes[1] and len(hashes[0]) == 2  # steps 0 and 3
    assert receipts[1]["run"] == {**receipts[0]["run"], "out": str(again)}
    assert file_settings(PretrainConfig, first / "training-receipt.json") == \
        file_settings(PretrainConfig, first / RUN_CONFIG_NAME)
    assert main(["pretrain", "--config", str(first), "--out", str(again), "--tasks", str(tasks)]) == 2  # refused:
    assert "never overwrites" in capsys.readouterr().err  # a run folder (its run.json) replays into a new --out only


def test_the_run_builds_its_stages_with_its_suite(capsys, tmp_path):
    """The broad preset's RL draws its tasks from the broad stream, which RLConfig refuses for any other suite:
    built from flags or a file, the stages must see the run's suite as they are built, not the default."""
    out = str(tmp_path / "r")
    for argv in (["run", "--preset", "broad"], ["run", "--suite", "broad"]):
        rl = tomllib.loads(printed(capsys, [*argv, "--out", out]))["rl"]
        assert (rl["task_source"], rl["objective"]) == ("stream", "rejection-sampling")
    f = tmp_path / "broad.toml"
    f.write_text(config_toml(RunConfig.from_preset(out, "broad")))
    assert config_from_command(RunConfig, Namespace(config_file=str(f))) == RunConfig.from_preset(out, "broad")
    assert "--suite broad" in refused(capsys, ["run", "--preset", "broad", "--suite", "reference", "--out", out])
    back = tomllib.loads(printed(capsys, ["run", "--preset", "broad", "--rl.task-source", "rl-split",
                                          "--rl.tasks-per-family", "256", "--out", out]))["rl"]
    assert (back["task_source"], back["tasks_per_family"]) == ("rl-split", 256)
