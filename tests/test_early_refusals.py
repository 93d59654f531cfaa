"""Bad input is refused in one line before anything is written, and a run cut short leaves nothing that blocks the
corrected retry: the RL token cap against the start checkpoint's context, the main job's reward before pretraining
(and a run whose RL never began resumed with the reward corrected), a reward that overflows once weighted, a second
save_pretrained into one folder, an unwritable calibration cache, a sweep on a full disk, an RL start interrupted
before its first checkpoint."""

import errno
import json
import multiprocessing
import sys

import pytest
import torch

from glm53 import GLM53, ModelConfig
from glm53.cli import main

from .tiny import TINY

SMALL = {**TINY, "max_sequence_length": 160}


def one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    return lines[0]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from glm53.checkpoints.format import save_checkpoint

    path = tmp_path_factory.mktemp("start") / "checkpoint"
    save_checkpoint(path, GLM53(ModelConfig(**SMALL)), {"stage": "test"})
    return path


def rl_args(checkpoint, out, max_new_tokens=4) -> list[str]:
    return ["rl", "--init", str(checkpoint), "--out", str(out), "--groups", "2", "--group-size", "2",
            "--families", "increment", "--tasks-per-family", "1", "--dev-per-family", "1", "--dev-samples", "1",
            "--checkpoints", "2", "--max-new-tokens", str(max_new_tokens), "--device", "cpu", "--no-progress"]


# ---------------------------------------------------------------- glm53 rl: the token cap, an interrupted start

def test_rl_refuses_a_token_cap_past_the_context_before_making_its_folder(checkpoint, tmp_path, capsys):
    out = tmp_path / "rl"
    assert main(rl_args(checkpoint, out, max_new_tokens=500)) == 2
    line = one_line(capsys.readouterr().err)
    assert "--max-new-tokens 500 after the longest task prompt" in line and "the checkpoint's context of 160" in line
    assert not out.exists()  # not even the lock file's folder
    assert main(rl_args(checkpoint, out)) == 0  # the corrected retry


def test_an_rl_start_cut_short_before_its_first_checkpoint_is_simply_retried(checkpoint, tmp_path, capsys,
                                                                              monkeypatch):
    import glm53.train.rl as rl

    evaluate = rl.evaluate

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(rl, "evaluate", interrupted)  # Ctrl-C during checkpoint 0's dev scores
    out = tmp_path / "rl"
    assert main(rl_args(checkpoint, out)) == 130
    err = capsys.readouterr().err
    assert "no checkpoint was complete yet. Start it again with: glm53 rl" in err and "--resume" not in err
    monkeypatch.setattr(rl, "evaluate", evaluate)
    assert main(rl_args(checkpoint, out)) == 0  # the same command: the folder it left does not block it
    assert json.loads((out / "schedule.json").read_text())


# ---------------------------------------------------------------- glm53 run: the reward before pretraining

RUN_ARGS = ["run", "--preset", "quick", "--pretrain.dim", "32", "--pretrain.layers", "4", "--pretrain.heads", "4",
            "--pretrain.expert-hidden", "48", "--pretrain.experts", "4", "--pretrain.top-k", "2",
            "--pretrain.streams", "4", "--pretrain.sparse-window", "8", "--pretrain.sparse-stride", "8",
            "--pretrain.max-sequence-length", "160", "--pretrain.steps", "3", "--pretrain.warmup-steps", "1",
            "--pretrain.checkpoints", "3", "--pretrain.batch-size", "2", "--rl-start", "3", "--rl.groups", "2",
            "--rl.group-size", "2", "--rl.checkpoints", "2", "--rl.max-new-tokens", "6", "--rl.tasks-per-family", "1",
            "--rl.dev-per-family", "1", "--rl.dev-samples", "2", "--confirm-per-family", "1", "--device", "cpu",
            "--no-progress"]

REWARDS = '''
def two_args(task, completion):
    return 0.0

not_a_function = 3

def backwards(task, completion, verdict):
    return -1.0 if verdict.status == "passed" else 0.0
'''


@pytest.fixture
def reward_module(tmp_path, monkeypatch):
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "glm53_early_rewards.py").write_text(REWARDS)
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    monkeypatch.delitem(sys.modules, "glm53_early_rewards", raising=False)
    return "glm53_early_rewards"


@pytest.mark.parametrize("function, says", [
    ("no_such_module_here", "cannot import"),
    ("two_args", "cannot be called as f(task, completion, verdict)"),
    ("not_a_function", "has no function not_a_function"),
    ("backwards", "breaks the ordering rule"),
])
def test_run_checks_its_reward_before_pretraining(function, says, reward_module, tmp_path, capsys):
    out = tmp_path / "run"
    name = "glm53_no_such_module:f" if function == "no_such_module_here" else f"{reward_module}:{function}"
    assert main([*RUN_ARGS, "--out", str(out), "--rl.reward", name]) == 2
    line = one_line(capsys.readouterr().err)
    assert says in line and (function == "backwards" or line.startswith("glm53 run: error: --rl.reward "))
    assert not out.exists()  # nothing pretrained, nothing written


@pytest.mark.slow
def test_a_run_whose_rl_never_began_resumes_with_a_corrected_reward(tmp_path, capsys, monkeypatch):
    import glm53.run as run_module

    rl_train = run_module.rl_train

    def refused(*args, **kwargs):  # RL refusing its reward as it starts (a module edited during pretraining)
        raise ValueError("rl: the reward refused as RL started")

    monkeypatch.setattr(run_module, "rl_train", refused)
    out = tmp_path / "run"
    assert main([*RUN_ARGS, "--out", str(out), "--rl.reward", "partial"]) == 2
    assert (out / "pretrain" / "training-receipt.json").is_file()
    capsys.readouterr()
    monkeypatch.setattr(run_module, "rl_train", rl_train)
    (out / "rl" / "checkpoint-0000").mkdir(parents=True)  # had RL begun, its reward could not change
    assert main([*RUN_ARGS, "--out", str(out), "--rl.reward", "binary", "--resume"]) == 2
    assert "settings differ" in one_line(capsys.readouterr().err)
    (out / "rl" / "checkpoint-0000").rmdir()
    assert main([*RUN_ARGS, "--out", str(out), "--rl.reward", "binary", "--resume"]) == 0
    assert "RL has not begun, so it takes the reward settings given now: --rl.reward binary" in capsys.readouterr().out
    assert json.loads((out / "run.json").read_text())["rl"]["reward"] == "binary"  # what a later --resume compares
    assert json.loads((out / "rl" / "training-receipt.json").read_text())["settings"]["reward"] == "binary"


# ---------------------------------------------------------------- a reward that overflows once weighted

def test_a_reward_that_overflows_after_weighting_is_refused_naming_it_and_the_value():
    from glm53.data.bpe_tokenizer import tokenizer_for
    from glm53.data.tasks import frozen_tasks
    from glm53.train.rl_config import RLConfig
    from glm53.train.rl_scoring import score_groups
    from glm53.verify.rewards import RewardError, WeightedReward, total_reward
    from glm53.verify.verifier import Verdict

    task, failed = frozen_tasks("rl", 1, "increment")[0], Verdict("failed", 0, 3)
    big = WeightedReward("mod:big", lambda t, c, v: 1e308, 10.0)
    with pytest.raises(RewardError, match=r"reward mod:big returned 1e\+308 on task .* times its weight 10 is inf"):
        big(task, "x", failed)
    with pytest.raises(RewardError, match="reward mod:int returned 1000.* a reward must be a finite number"):
        WeightedReward("mod:int", lambda t, c, v: 10 ** 400, 1.0)(task, "x", failed)
    half = WeightedReward("mod:half", lambda t, c, v: 1e308, 1.0)
    with pytest.raises(RewardError, match=r"the reward mod:half,mod:half sums to inf on task"):
        total_reward([half, half], task, "x", failed)
    # finite rewards whose leave-one-out advantages overflow
    signed = WeightedReward("mod:signed", lambda t, c, v: 1e308 if c == "a" else -1e308, 1.0)
    pairs = [({"completion": c, "token_ids": [5], "hit_token_cap": False}, failed) for c in "ab"]
    with pytest.raises(RewardError, match="are too large to compute their advantages"):
        score_groups(RLConfig(), [task], [pairs], 0, tokenizer_for(ModelConfig(**SMALL)), [signed])


# ---------------------------------------------------------------- save_pretrained into a folder that holds a model

def test_save_pretrained_never_overwrites_a_saved_model(tmp_path, monkeypatch):
    import glm53.model.model as model_module

    first = GLM53(ModelConfig(**TINY))
    first.save_pretrained(tmp_path / "m")
    torch.manual_seed(1)
    second = GLM53(ModelConfig(**TINY))
    before = {p.name: p.read_bytes() for p in (tmp_path / "m").iterdir()}
    with pytest.raises(FileExistsError, match="already exists and is not empty; save_pretrained never overwrites"):
        second.save_pretrained(tmp_path / "m")
    assert {p.name: p.read_bytes() for p in (tmp_path / "m").iterdir()} == before  # nothing written
    assert torch.equal(GLM53.from_pretrained(tmp_path / "m").embedding.weight, first.embedding.weight)
    (tmp_path / "empty").mkdir()  # an empty folder is filled
    second.save_pretrained(tmp_path / "empty")
    assert torch.equal(GLM53.from_pretrained(tmp_path / "empty").embedding.weight, second.embedding.weight)

    def cut(folder):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(model_module, "saved_hashes", cut)  # a save that fails part way leaves nothing
    with pytest.raises(OSError):
        second.save_pretrained(tmp_path / "cut")
    assert not (tmp_path / "cut").exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# ---------------------------------------------------------------- glm53 calibrate with a cache it cannot write

@pytest.mark.parametrize("case", ["under a file", "read-only file system"])
def test_calibrate_refuses_an_unwritable_cache_before_timing_anything(case, tmp_path, monkeypatch, capsys):
    from glm53.runtime import files
    from glm53.speed import calibrate as calibrate_module

    timed = []
    monkeypatch.setattr(calibrate_module, "_time_training", lambda c, s: timed.append("train") or [1.0] * len(c))
    monkeypatch.setattr(calibrate_module, "_time_decoding", lambda kw, ps: timed.append("decode") or [1.0] * len(ps))
    monkeypatch.setattr(calibrate_module, "tune_kernels", lambda *a: timed.append("kernels") or {})
    if case == "under a file":
        (tmp_path / "file").write_text("")
        monkeypatch.setenv("GLM53_CACHE_DIR", str(tmp_path / "file" / "cache"))
        says = "is a file, not a folder"
    else:
        monkeypatch.setenv("GLM53_CACHE_DIR", str(tmp_path / "cache"))

        def read_only(*args, **kwargs):
            raise OSError(errno.EROFS, "Read-only file system")

        monkeypatch.setattr(files.tempfile, "mkstemp", read_only)
        says = "not writable (a read-only file system)"
    assert main(["calibrate", "--steps", "1"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "cannot write its cache" in line and says in line and "set GLM53_CACHE_DIR" in line
    assert timed == []


# ---------------------------------------------------------------- glm53 sweep on a full disk

SPEC = """
name = "full-disk"
job = "expression-pretrain"
seeds = [1]
checkpoints = [2]
metrics = ["target_loss"]
baseline = "a"
[base]
steps = 2
batch_size = 2
dim = 16
heads = 2
expert_hidden = 16
[arms.a]
data_order = "repeated-8"
[arms.b]
data_order = "diverse-88"
"""


class FullDisk:
    """A file whose writes fail as on a full disk (opening it succeeds, as it does there)."""

    def __init__(self, *args, **kwargs):
        pass

    def write(self, text):
        raise OSError(errno.ENOSPC, "No space left on device")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def close(self):
        pass


def test_a_sweep_on_a_full_disk_says_so_in_one_line(tmp_path, monkeypatch, capfd):
    """The disk fills once the jobs run: each job's checkpoint, log and error.json fail to write. The jobs run in
    forked processes here (they inherit these stand-ins), not the fork server's."""
    from glm53.sweep import executor, runner

    class Kind:
        verifies = False

        @staticmethod
        def make(*args):
            return None

        @staticmethod
        def run(cfg, job_dir, log):
            raise OSError(errno.ENOSPC, "No space left on device", str(job_dir / "checkpoint-0002"))

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    fork = multiprocessing.get_context("fork")
    monkeypatch.setattr(executor.multiprocessing, "get_context", lambda method=None: fork)
    monkeypatch.setattr(executor, "job_kind", lambda name: Kind)
    monkeypatch.setattr(executor, "open", FullDisk, raising=False)
    monkeypatch.setattr(executor, "atomic_write_json", no_space)
    monkeypatch.setattr(runner, "open", FullDisk, raising=False)
    (tmp_path / "spec.toml").write_text(SPEC)
    out = tmp_path / "sweep"
    assert main(["sweep", str(tmp_path / "spec.toml"), "--out", str(out), "--workers", "2", "--no-progress",
                 "--no-analyze"]) == 2
    line = one_line(capfd.readouterr().err)  # not every job's traceback
    assert line.startswith("glm53 sweep: error: the disk is full: writing") and "free some space" in line


# ---------------------------------------------------------------- more settings checked before the work

def test_pretrain_refuses_a_dev_token_cap_past_the_context_before_making_its_folder(tmp_path, capsys):
    out = tmp_path / "pre"
    assert main(["pretrain", "--out", str(out), "--dim", "32", "--layers", "2", "--heads", "4", "--expert-hidden",
                 "48", "--experts", "4", "--max-sequence-length", "160", "--steps", "2", "--checkpoints", "2",
                 "--batch-size", "2", "--sequence-length", "128", "--dev-max-new-tokens", "500", "--device", "cpu",
                 "--no-progress"]) == 2
    assert "--dev-max-new-tokens 500 after the longest task prompt" in one_line(capsys.readouterr().err)
    assert not out.exists()


@pytest.mark.parametrize("command", ["eval", "generate"])
def test_a_token_cap_only_the_later_prompts_overflow_is_refused_before_any_decoding(command, checkpoint, tmp_path,
                                                                                   capsys, monkeypatch):
    """Confirm's first 256 tasks (one decoding batch) leave room for 66 new tokens in a context of 160; its longest
    prompt (95 tokens with BOS), in the next batch, does not: refused before the first batch is decoded."""
    from glm53.decode import task_completions
    from glm53.evaluate import evaluate

    decoded = []
    monkeypatch.setattr(task_completions, "sample_completions", lambda *a, **k: decoded.append(1) or [])
    monkeypatch.setattr(evaluate, "evaluation_completions", lambda *a, **k: decoded.append(1) or ([], "fp32"))
    out = tmp_path / "out.json"
    assert main([command, "--checkpoint", str(checkpoint), "--split", "confirm", "--per-family", "64",
                 "--max-new-tokens", "66", "--device", "cpu", "--out", str(out)]) == 2
    line = one_line(capsys.readouterr().err)
    assert "--max-new-tokens 66 after the longest task prompt (95 tokens with BOS)" in line
    assert "give --max-new-tokens 65 or less" in line and decoded == [] and not out.exists()


def test_generate_refuses_an_unwritable_out_before_decoding(checkpoint, tmp_path, capsys, monkeypatch):
    from glm53.decode import task_completions

    monkeypatch.setattr(task_completions, "evaluation_completions", lambda *a, **k: pytest.fail("decoded"))
    (tmp_path / "file").write_text("")
    assert main(["generate", "--checkpoint", str(checkpoint), "--split", "dev", "--per-family", "1",
                 "--max-new-tokens", "4", "--device", "cpu", "--out", str(tmp_path / "file" / "x.jsonl")]) == 2
    assert "is a file, not a folder" in one_line(capsys.readouterr().err)


@pytest.mark.parametrize("text", ["", "\n  \n"], ids=["empty", "blank-lines"])
def test_glm53_verify_refuses_an_input_without_rows_before_writing(tmp_path, capsys, text):
    given = tmp_path / "completions.jsonl"
    given.write_text(text)
    assert main(["verify", "--in", str(given), "--out", str(tmp_path / "verdicts.jsonl")]) != 0
    line = one_line(capsys.readouterr().err)
    assert "completions.jsonl holds no rows" in line and "glm53 generate --tasks" in line
    assert not (tmp_path / "verdicts.jsonl").exists()


def test_glm53_verify_takes_every_language_level_the_verifier_has():
    from glm53.cli import build_parser
    from glm53.verify.languages import LANGUAGES

    for level in LANGUAGES:
        assert build_parser().parse_args(["verify", "--in", "x", "--out", "y", "--language", level]).language == level
