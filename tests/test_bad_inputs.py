"""Bad input, as a newcomer would type it: every case ends in one line on stderr that names the problem, exit
code 2, no traceback, and nothing written that a corrected retry would trip over."""

import json

import pytest

from glm53 import GLM53, ModelConfig
from glm53.cli import main
from glm53.data.tasks import frozen_tasks, write_tasks
from glm53.checkpoints.format import save_checkpoint
from glm53.train.run_folder import started

from .tiny import TINY

TINY_FLAGS = ["--dim", "32", "--layers", "4", "--heads", "4", "--expert-hidden", "48", "--experts", "4",
              "--sparse-window", "8", "--sparse-stride", "8"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A good checkpoint, damaged copies of it, and input files, shared by the table."""
    root = tmp_path_factory.mktemp("bad")
    model = GLM53(ModelConfig(**{**TINY, "max_sequence_length": 160}))
    good = root / "good"
    save_checkpoint(good, model, {"step": 0})
    out = {"root": root, "good": good}

    def copy(name, change):
        import shutil

        target = root / name
        shutil.copytree(good, target)
        change(target)
        out[name] = target

    def flip_bytes(folder):
        data = bytearray((folder / "model.safetensors").read_bytes())
        data[-4:] = bytes(b ^ 0xFF for b in data[-4:])
        (folder / "model.safetensors").write_bytes(bytes(data))

    def no_metadata(folder, change):
        (folder / "metadata.json").unlink()
        change(folder)

    copy("flipped", flip_bytes)
    copy("truncated", lambda f: no_metadata(f, lambda g: (g / "model.safetensors").write_bytes(
        (good / "model.safetensors").read_bytes()[:100])))
    copy("garbage", lambda f: no_metadata(f, lambda g: (g / "model.safetensors").write_bytes(b"\x00garbage" * 50)))
    copy("wrong-config", lambda f: no_metadata(f, lambda g: (g / "config.json").write_text(
        json.dumps({**json.loads((good / "config.json").read_text()), "dim": 64}))))
    copy("broken-config", lambda f: no_metadata(f, lambda g: (g / "config.json").write_text("{not json")))
    tasks = root / "tasks.jsonl"
    write_tasks(frozen_tasks("confirm", 1, "double"), tasks)
    out["tasks"] = tasks
    row = {"prompt": "def f(x):\n", "completion": "    return x\n", "entry_point": "f", "cases": [[[1], 1]]}
    for name, text in {"bad-json": json.dumps(row) + "\n{oops\n",
                       "cases-not-list": json.dumps({**row, "cases": "[[1], 1]"}) + "\n",
                       "missing-key": json.dumps({k: v for k, v in row.items() if k != "entry_point"}) + "\n",
                       "no-cases": json.dumps({**row, "cases": []}) + "\n",
                       "not-a-receipt": json.dumps({"summary": {}}) + "\n",
                       "not-json": "hello\n"}.items():
        (root / f"{name}.jsonl").write_text(text)
        out[name] = root / f"{name}.jsonl"
    (root / "a-file").write_text("x")
    out["a-file"] = root / "a-file"
    resumable = root / "corrupt-state"
    # saved with the run's own model settings (a checkpoint of other settings is refused before its trainer state)
    save_checkpoint(resumable / "checkpoint-0001", GLM53(ModelConfig(**{**TINY, "max_sequence_length": 192})),
                    {"step": 1}, {"optimizer": {}, "rng": {}})
    (resumable / "checkpoint-0001" / "trainer_state.pt").write_bytes(b"not a torch file")
    from glm53.train.pretrain_config import PretrainConfig

    settings = PretrainConfig(out=str(resumable), steps=2, sequence_length=32, resume=True,
                              model=ModelConfig(**{**TINY, "max_sequence_length": 192}))
    (resumable / "run.json").write_text(json.dumps(settings.to_dict()))
    out["corrupt-state"] = resumable
    return out


# (name, argv with {placeholders}, what stderr must say, the output that must not appear or must stay retryable)
CASES = [
    ("negative grad clip", ["pretrain", "--out", "{new}", "--grad-clip", "-1", *TINY_FLAGS], "--grad-clip must be > 0"),
    ("zero steps", ["pretrain", "--out", "{new}", "--steps", "0"], "--steps must be >= 1"),
    ("checkpoint past the end", ["pretrain", "--out", "{new}", "--steps", "3", "--checkpoints", "5"],
     "must lie in [1, --steps 3]"),
    ("zero learning rate", ["pretrain", "--out", "{new}", "--lr", "0"], "--lr must be > 0"),
    ("sequence over the context", ["pretrain", "--out", "{new}", "--sequence-length", "1000"],
     "--sequence-length 1000 must be <= --max-sequence-length 192"),
    ("zero batch", ["pretrain", "--out", "{new}", "--batch-size", "0"], "--batch-size must be >= 1"),
    ("warmup past the end", ["pretrain", "--out", "{new}", "--steps", "3", "--warmup-steps", "10"],
     "--warmup-steps 10 must be <= --steps 3"),
    ("betas out of range", ["pretrain", "--out", "{new}", "--betas", "0.9,1.5"], "--betas must be two numbers"),
    ("out is a file", ["pretrain", "--out", "{a-file}", "--steps", "1", *TINY_FLAGS], "exists as a file"),
    ("resume with nothing to resume", ["pretrain", "--out", "{new}", "--resume", *TINY_FLAGS],
     "holds no run to resume"),
    ("resume from a damaged trainer state", ["pretrain", "--out", "{corrupt-state}", "--steps", "2",
                                             "--sequence-length", "32", "--validation-rows", "0", "--resume",
                                             *TINY_FLAGS],
     "the trainer state is damaged"),
    ("zero layers", ["info", "--layers", "0"], "--layers must be >= 1"),
    ("heads not dividing dim", ["info", "--heads", "5"], "divisible by heads"),
    ("rl at temperature 0", ["rl", "--init", "{good}", "--out", "{new}", "--temperature", "0"],
     "--temperature must be > 0"),
    ("rl at a negative temperature", ["rl", "--init", "{good}", "--out", "{new}", "--temperature", "-1"],
     "--temperature must be > 0"),
    ("rl with no tokens", ["rl", "--init", "{good}", "--out", "{new}", "--max-new-tokens", "0"],
     "--max-new-tokens must be >= 1"),
    ("rl group of one", ["rl", "--init", "{good}", "--out", "{new}", "--group-size", "1"], "--group-size must be >= 2"),
    ("rl iterations without a clip range", ["rl", "--init", "{good}", "--out", "{new}", "--iterations", "2",
                                            "--clip-low", "0", "--clip-high", "0"], "needs a clipping range"),
    ("rl dynamic sampling with no fresh draw", ["rl", "--init", "{good}", "--out", "{new}", "--dynamic-sampling",
                                                "--dynamic-sampling-max-draws", "1"],
     "--dynamic-sampling-max-draws >= 2"),
    ("rl dynamic sampling with a cap of 0", ["rl", "--init", "{good}", "--out", "{new}", "--dynamic-sampling",
                                             "--dynamic-sampling-max-draws", "0"],
     "--dynamic-sampling-max-draws must be >= 1"),
    ("rl checkpoint past the end", ["rl", "--init", "{good}", "--out", "{new}", "--groups", "4", "--checkpoints",
                                    "200"],
     "must lie in [1, --groups 4]"),
    ("rl from a missing checkpoint", ["rl", "--init", "{root}/nope", "--out", "{new}"], "not a glm53 checkpoint"),
    ("rl from damaged weights", ["rl", "--init", "{flipped}", "--out", "{new}", "--groups", "1"], "does not match"),
    ("top-p above 1", ["generate", "--checkpoint", "{good}", "--prompt", "x", "--top-p", "5"], "--top-p must be <= 1"),
    ("top-k of 0", ["generate", "--checkpoint", "{good}", "--prompt", "x", "--top-k", "0"], "--top-k must be >= 1"),
    ("negative temperature", ["generate", "--checkpoint", "{good}", "--prompt", "x", "--temperature", "-0.5"],
     "--temperature must be >= 0"),
    ("no samples", ["generate", "--checkpoint", "{good}", "--prompt", "x", "--samples", "0"], "--samples must be >= 1"),
    ("too many tokens for the context", ["generate", "--checkpoint", "{good}", "--prompt", "x", "--max-new-tokens",
                                         "500"], "exceeds max_sequence_length"),
    ("generate from damaged weights", ["generate", "--checkpoint", "{flipped}", "--prompt", "x"], "does not match"),
    ("truncated safetensors", ["eval", "--checkpoint", "{truncated}", "--trust-unverified", "--tasks", "{tasks}",
                               "--out", "{new}.json"], "cannot be read"),
    ("garbage safetensors", ["eval", "--checkpoint", "{garbage}", "--trust-unverified", "--tasks", "{tasks}", "--out",
                             "{new}.json"], "cannot be read"),
    ("config not matching weights", ["eval", "--checkpoint", "{wrong-config}", "--trust-unverified", "--tasks",
                                     "{tasks}", "--out", "{new}.json"], "does not match the weights"),
    ("config not JSON", ["eval", "--checkpoint", "{broken-config}", "--trust-unverified", "--tasks", "{tasks}", "--out",
                         "{new}.json"], "not a valid model config"),
    ("eval of damaged weights", ["eval", "--checkpoint", "{flipped}", "--tasks", "{tasks}", "--out", "{new}.json"],
     "does not match"),
    ("eval with no samples", ["eval", "--checkpoint", "{good}", "--tasks", "{tasks}", "--samples", "0", "--out",
                              "{new}.json"], "--samples must be >= 1"),
    ("several greedy samples", ["eval", "--checkpoint", "{good}", "--tasks", "{tasks}", "--samples", "2",
                                "--temperature", "0", "--out", "{new}.json"], "need a --temperature > 0"),
    ("split and tasks", ["eval", "--checkpoint", "{good}", "--tasks", "{tasks}", "--split", "dev", "--out",
                         "{new}.json"], "not both"),
    ("neither split nor tasks", ["eval", "--checkpoint", "{good}", "--out", "{new}.json"], "give --split"),
    ("unknown family", ["eval", "--checkpoint", "{good}", "--split", "dev", "--families", "bogus", "--out",
                        "{new}.json"], "unknown task family"),
    ("eval over an existing receipt", ["eval", "--checkpoint", "{good}", "--tasks", "{tasks}", "--out", "{a-file}"],
     "never overwrites"),
    ("zero timeout", ["eval", "--checkpoint", "{good}", "--tasks", "{tasks}", "--timeout-s", "0", "--out",
                      "{new}.json"], "--timeout-s must be > 0"),
    ("zero per family", ["eval", "--checkpoint", "{good}", "--split", "dev", "--per-family", "0", "--out",
                         "{new}.json"], "--per-family must be >= 1"),
    ("verify bad JSON line", ["verify", "--in", "{bad-json}", "--out", "{new}.jsonl"], ":2: not valid JSON"),
    ("verify cases of the wrong type", ["verify", "--in", "{cases-not-list}", "--out", "{new}.jsonl"],
     "'cases' must be a list"),
    ("verify missing key", ["verify", "--in", "{missing-key}", "--out", "{new}.jsonl"], "missing key 'entry_point'"),
    ("verify no cases", ["verify", "--in", "{no-cases}", "--out", "{new}.jsonl"], "'cases' is empty"),
    ("verify missing input", ["verify", "--in", "{root}/nope.jsonl", "--out", "{new}.jsonl"], "does not exist"),
    ("verify zero timeout", ["verify", "--in", "{no-cases}", "--out", "{new}.jsonl", "--timeout", "0"],
     "--timeout must be a finite number of seconds > 0"),
    ("compare a non-eval JSON", ["compare", "{not-a-receipt}", "{not-a-receipt}"], "not an eval receipt"),
    ("compare a non-JSON file", ["compare", "{not-json}", "{not-json}"], "is not JSON"),
    ("compare a missing receipt", ["compare", "{root}/nope.json", "{root}/nope2.json"], "does not exist"),
    ("compare one receipt", ["compare", "{not-a-receipt}"], "at least one more"),
    ("vision zero steps", ["vision", "--steps", "0", "--out", "{new}"], "--steps must be >= 1"),
    ("vision zero batch", ["vision", "--batch-size", "0", "--out", "{new}"], "--batch-size must be >= 1"),
    ("vision pilot from nowhere", ["vision", "--pilot", "{root}/nope", "--out", "{new}"], "not a checkpoint folder"),
    ("vision into a full folder", ["vision", "--steps", "1", "--out", "{root}"], "never overwrites"),
    ("run from a step that is not saved", ["run", "--out", "{new}", "--preset", "quick", "--rl-start", "7"],
     "--rl-start 7 must be one of"),
    ("run with no confirm tasks", ["run", "--out", "{new}", "--confirm-per-family", "0"],
     "--confirm-per-family must be >= 1"),
    ("run with a bad pretraining setting", ["run", "--out", "{new}", "--pretrain.grad-clip", "-1"],
     "--grad-clip must be > 0"),
    ("run with a bad RL setting", ["run", "--out", "{new}", "--rl.temperature", "0"], "rl: --temperature must be > 0"),
    ("negative keep-last", ["pretrain", "--out", "{new}", "--keep-last", "-1"], "--keep-last must be >= 0"),
    ("resume without the optimizer", ["pretrain", "--out", "{new}", "--resume", "--no-save-optimizer"],
     "--resume needs the optimizer state"),
    ("rl negative keep-last", ["rl", "--init", "{good}", "--out", "{new}", "--keep-last", "-2"],
     "--keep-last must be >= 0"),
    ("rl resume without the optimizer", ["rl", "--init", "{good}", "--out", "{new}", "--resume", "--no-save-optimizer"],
     "--resume needs the optimizer state"),
    ("run with a negative keep-last", ["run", "--out", "{new}", "--pretrain.keep-last", "-1"],
     "--keep-last must be >= 0"),
    ("run resumed without the optimizer", ["run", "--out", "{new}", "--resume", "--no-rl.save-optimizer"],
     "--resume needs the optimizer state"),
    ("export zero per family", ["tasks", "export", "--split", "dev", "--per-family", "0", "--out", "{new}.jsonl"],
     "--per-family must be >= 1"),
]


@pytest.mark.parametrize("name, argv, message", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_clear_line(files, tmp_path, capsys, name, argv, message):
    values = {**{k: str(v) for k, v in files.items()}, "new": str(tmp_path / "out")}
    args = [a.format(**values) for a in argv]
    assert main(args) == 2, name
    err = capsys.readouterr().err.strip()
    assert message in err, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for suffix in ("", ".json", ".jsonl"):  # nothing written that blocks a corrected retry
        out = tmp_path / f"out{suffix}"
        assert not (out.is_file() or started(out)), f"{name}: left {out}"


def test_debug_shows_the_traceback(capsys):
    with pytest.raises(ValueError, match="--layers must be >= 1"):
        main(["--debug", "info", "--layers", "0"])


def test_help_shows_defaults(capsys):
    assert main(["pretrain", "--help"]) == 0
    text = capsys.readouterr().out
    assert "(default: 0.0003)" in text and "(default: 100,200,400, those within --steps)" in text


@pytest.mark.parametrize("argv, message", [
    (["run", "--out", "x", "--preset", "huge"], "argument --preset: invalid choice: 'huge'"),
    (["pretrain", "--out", "x", "--lr"], "argument --lr: expected one argument"),
    (["eval", "--split", "dev"], "--out is required"),  # checked once --config is read
    (["bogus"], "invalid choice: 'bogus'"),
    (["rl", "--init", "a", "--out", "b", "--groups", "many"], "argument --groups: invalid int value: 'many'"),
])
def test_a_usage_error_is_one_line_that_points_to_help(capsys, argv, message):
    """argparse's own errors, like every other refusal, are one line (not a usage block with the error last)."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and err.endswith("--help)") and len(err.splitlines()) == 1, err


def test_a_full_disk_is_one_line_and_leaves_no_partial_file(tmp_path, monkeypatch, capsys):
    import errno
    import os

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    out = tmp_path / "tasks.jsonl"
    assert main(["tasks", "export", "--split", "dev", "--per-family", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"the disk is full: writing {out} failed, no space left on the device that holds {tmp_path}" in err, err
    assert len(err.splitlines()) == 1 and "--debug" not in err
    assert list(tmp_path.iterdir()) == []  # neither the file nor its temporary
