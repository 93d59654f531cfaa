"""A reward function is code the run imports (issue 62): a module named only by a --config file or a replayed
record is refused, never imported (under `python -m glm53` the current folder is on the import path), unless the
command line names it (--reward, --rl.reward); and --resume refuses a reward whose source changed since the run
began, which it used to accept, leaving a receipt with only the new hash."""

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from glm53.cli import main
from glm53.verify.rewards import source_sha256
from glm53.train.rl_config import RLConfig

from .test_reward_functions import TINY_RL, my_rewards, start  # noqa: F401 - fixtures

ROOT = Path(__file__).resolve().parents[2]
PLANTED = ("open({marker!r}, 'w').close()  # what any module can do when imported\n\n\n"
           "def fn(task, completion, verdict):\n    return 0.0\n")


def plant(folder: Path) -> Path:
    """A module `planted` in `folder` that leaves a marker file when it is imported."""
    marker = folder / "imported"
    (folder / "planted.py").write_text(PLANTED.format(marker=str(marker)))
    return marker


def refusal_under_python_m(folder: Path, *args: str) -> str:
    """`python -m glm53 ARGS` run in `folder` (the current folder first on its import path): its one-line refusal."""
    result = subprocess.run([sys.executable, "-m", "glm53", *args], cwd=folder, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    err = result.stderr.strip()
    assert result.returncode == 2 and len(err.splitlines()) == 1, err
    return err


def test_under_python_m_a_config_files_reward_is_refused_and_never_imported_from_the_current_folder(tmp_path):
    marker = plant(tmp_path)
    (tmp_path / "settings.toml").write_text('reward = "planted:fn"\n')
    err = refusal_under_python_m(tmp_path, "rl", "--config", "settings.toml", "--init", "nowhere", "--out", "out")
    assert "--reward planted:fn comes from --config settings.toml" in err and "give --reward planted:fn" in err, err
    assert not marker.exists() and not (tmp_path / "out").exists()


def test_a_replayed_records_reward_is_refused_and_a_named_one_is_imported(tmp_path, monkeypatch, capsys):
    marker = plant(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # as `python -m glm53` puts the current folder first
    monkeypatch.delitem(sys.modules, "planted", raising=False)
    recorded = tmp_path / "recorded"
    recorded.mkdir()
    (recorded / "run.json").write_text(json.dumps(RLConfig(init="a", out="b", reward="binary,planted:fn=0.5")
                                                  .to_dict()))
    assert main(["rl", "--config", str(recorded), "--init", "nowhere", "--out", "new"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--reward planted:fn comes from --config" in err and "give --reward binary,planted:fn=0.5" in err, err
    assert not marker.exists()
    # the command line names it: the user's choice, imported (then the missing --init stops the run)
    assert main(["rl", "--config", str(recorded), "--init", "nowhere", "--out", "new",
                 "--reward", "binary,planted:fn=0.5"]) == 2
    assert "not a glm53 checkpoint" in capsys.readouterr().err and marker.exists()


def test_a_run_config_files_rl_reward_is_refused_naming_the_rl_flag(tmp_path, monkeypatch, capsys):
    marker = plant(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "planted", raising=False)
    (tmp_path / "run.toml").write_text('[rl]\nreward = "planted:fn"\n')

    def pipeline(cfg):  # never reached: the whole experiment is not what this test runs
        raise AssertionError("the run started")

    monkeypatch.setattr("glm53.run.run_pipeline", pipeline)
    assert main(["run", "--config", "run.toml", "--out", "new"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--rl.reward planted:fn comes from --config run.toml" in err and "give --rl.reward planted:fn" in err, err
    assert not marker.exists() and not (tmp_path / "new").exists()


@pytest.mark.slow
def test_resume_refuses_a_reward_edited_since_the_run_began(start, tmp_path, my_rewards, capsys):  # noqa: F811
    out = tmp_path / "rl"
    flags = ["rl", "--init", str(start), "--out", str(out), "--reward", "binary",
             "--reward", "my_rewards:length_penalty=0.1", *TINY_RL]
    assert main(flags) == 0
    shutil.rmtree(out / "checkpoint-0004")  # as if the run died right after checkpoint 2
    (out / "training-receipt.json").unlink()
    source = Path(my_rewards.__file__)
    original = source.read_text()
    source.write_text(original.replace("/ 64", "/ 32"))  # the penalty doubled between the start and --resume
    importlib.reload(my_rewards)
    capsys.readouterr()
    assert main([*flags, "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"the reward my_rewards:length_penalty changed since the run in {out} began" in err, err
    assert not (out / "training-receipt.json").exists()
    source.write_text(original)  # put back as it was: the run resumes
    importlib.reload(my_rewards)
    assert main([*flags, "--resume"]) == 0
    receipt = json.loads((out / "training-receipt.json").read_text())
    assert receipt["rewards"][1]["source_sha256"] == source_sha256(my_rewards.length_penalty)


def test_a_sweep_specs_reward_is_refused_unless_the_command_line_names_it(tmp_path):
    marker = plant(tmp_path)
    (tmp_path / "spec.toml").write_text('name = "r"\njob = "rl"\nseeds = [1]\ncheckpoints = [2]\n'
                                        'metrics = ["dev_pass_at_1"]\nbaseline = "a"\n[base]\ninit = "nowhere"\n'
                                        'reward = "planted:fn"\n[arms.a]\n[arms.b]\nlr = 1e-5\n')
    err = refusal_under_python_m(tmp_path, "sweep", "spec.toml", "--out", "out")
    assert "--reward planted:fn comes from the spec spec.toml" in err and "give --reward planted:fn" in err, err
    assert not marker.exists() and not (tmp_path / "out").exists()
