"""README's "A short tour" runs as written: its commands, read from README.md, run in order at tiny sizes (the flags
below are appended, and a later flag overrides the tour's), each exits 0, and every file a line reads was made by
an earlier line. A tour line that neither runs here nor is listed as skipped fails the test. The README's Python
block runs too."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest

from glm53.cli import main

from .tiny import TINY

ROOT = Path(__file__).resolve().parents[1]

# the tiny model of the suite (tests/tiny.py), with room for a confirm prompt and its completion
MODEL = [f"--{k.replace('_', '-')}={v}" for k, v in {**TINY, "max_sequence_length": 160}.items()]
PRETRAIN = ["--steps", "2", "--checkpoints", "1,2", "--batch-size", "2", "--sequence-length", "128",
            "--warmup-steps", "1", "--dev-max-new-tokens", "4", "--validation-rows", "2", *MODEL]
RL = ["--groups", "2", "--group-size", "2", "--tasks-per-family", "1", "--checkpoints", "2", "--dev-per-family", "1",
      "--dev-samples", "2", "--max-new-tokens", "6"]

# extra flags per command kind, appended to the tour's own
TINY_FLAGS = {
    "info": [],
    "pretrain": PRETRAIN + ["--no-progress"],
    "run": [f"--pretrain.{flag[2:]}" if flag.startswith("--") else flag for flag in PRETRAIN]
           + [f"--rl.{flag[2:]}" if flag.startswith("--") else flag for flag in RL]
           + ["--rl-start", "2", "--confirm-per-family", "1", "--no-progress"],
    "generate": ["--max-new-tokens", "8"],  # --per-family is refused beside --prompt
    "eval": ["--per-family", "1", "--max-new-tokens", "8"],
    "eval humaneval": ["--count", "1", "--max-new-tokens", "8"],  # HumanEval/0: past the tiny context, so named
    "rl": RL + ["--no-progress"],
    "compare": [],
    "verify": [],
    "vision": ["--seeds", "1", "--steps", "2", "--batch-size", "4", "--eval-examples", "10"],
    "sweep": ["--workers", "1", "--no-progress"],
    "analyze": ["--no-charts"],
}

# names a tiny run cannot produce, and what stands in for them
SUBSTITUTIONS = {
    "runs/p/checkpoint-0100": "runs/p/checkpoint-0002",  # the tiny reference run's last checkpoint
    "runs/rl/checkpoint-0096": "runs/rl/checkpoint-0002",  # the tiny RL run's last checkpoint
    "pretraining-data": "pretraining-data-tiny.toml",  # the study's job kind and arms, 2 seeds of 3 updates (below)
}

TINY_PRETRAINING_DATA = """
name = "pretraining-data-tiny"
job = "expression-pretrain"
seeds = [1, 2]
checkpoints = [3]
metrics = ["target_byte_accuracy", "target_loss"]
baseline = "diverse-88"
[base]
steps = 3
batch_size = 4
dim = 16
heads = 2
expert_hidden = 16
[arms.repeated-8]
data_order = "repeated-8"
[arms.diverse-88]
data_order = "diverse-88"
[[comparisons]]
arm = "diverse-88"
against = "repeated-8"
"""

# tour commands this test does not run, and why (the exact text: a changed line is looked at again)
SKIPPED = {
    "glm53 calibrate": "times the reference model's training and decoding on this CPU (~1.5 min); no tiny form",
    "glm53 bench": "times the reference model, plain and fast (2-4 min); `--quick` is tests/speed/test_bench.py's",
    "glm53 serve --checkpoint runs/p/checkpoint-0100 --runs runs": "a server that runs until Ctrl-C; tests/serve/ "
                                                                   "drives it (its API, and the page in Chromium)",
    "glm53 export runs/rl/checkpoint-0096 --format transformers --out hf": "needs the hf extra, which the README's "
    "test command leaves out; tests/interop/test_transformers_export.py runs the command on a tiny checkpoint",
}

INPUT_FLAGS = ("--checkpoint", "--init", "--in", "--tasks", "--config", "--pilot", "--setup-from", "--reuse-from")
POSITIONAL_INPUTS = {"compare": slice(0, None), "analyze": slice(0, 1)}


def readme_block(heading: str, language: str) -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(rf"^```{language}\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL)
    assert match, f"no {language} block under README's {heading!r}"
    return match.group(1)


def tour_commands() -> list[list[str]]:
    """Each command of the tour as argv (glm53 included), `\\`-continued lines joined, `&&` split, comments off."""
    joined = readme_block("A short tour", "bash").replace("\\\n", " ")
    commands = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        while words:
            cut = words.index("&&") if "&&" in words else len(words)
            commands.append(words[:cut])
            words = words[cut + 1:]
    return commands


def inputs_of(argv: list[str]) -> list[str]:
    """The paths a command reads (after substitution)."""
    kind, rest = argv[0], argv[1:]
    found = [rest[i + 1] for i, word in enumerate(rest[:-1]) if word in INPUT_FLAGS]
    if kind not in POSITIONAL_INPUTS:
        return found
    positional = [w for i, w in enumerate(rest) if not w.startswith("-") and not (i and rest[i - 1].startswith("-"))]
    return found + positional[POSITIONAL_INPUTS[kind]]


def output_of(argv: list[str]) -> str | None:
    return argv[argv.index("--out") + 1] if "--out" in argv else None


@pytest.mark.slow
def test_the_tour_runs_in_order_at_tiny_sizes(tmp_path, monkeypatch):
    commands = tour_commands()
    assert commands and all(c[0] == "glm53" for c in commands), commands
    listed = {shlex.join(c) for c in commands}
    assert not set(SKIPPED) - listed, f"skipped commands no longer in the tour: {set(SKIPPED) - listed}"
    unknown = [shlex.join(c) for c in commands if shlex.join(c) not in SKIPPED and c[1] not in TINY_FLAGS]
    assert not unknown, f"tour commands that neither run here nor are listed in SKIPPED: {unknown}"

    monkeypatch.chdir(tmp_path)
    (tmp_path / SUBSTITUTIONS["pretraining-data"]).write_text(TINY_PRETRAINING_DATA)
    ran = []
    for command in commands:
        if shlex.join(command) in SKIPPED:
            continue
        extra = TINY_FLAGS["eval humaneval" if "humaneval" in command else command[1]]
        argv = [SUBSTITUTIONS.get(word, word) for word in command[1:]] + extra
        for path in inputs_of(argv):
            assert Path(path).exists(), f"`{shlex.join(command)}` reads {path}, which no earlier tour line made"
        assert main(argv) == 0, shlex.join(argv)
        if output_of(argv):
            assert Path(output_of(argv)).exists(), f"`{shlex.join(command)}` did not write {output_of(argv)}"
        ran.append(command[1])
    assert {"pretrain", "rl", "eval", "compare", "verify"} <= set(ran), ran


def test_the_readme_python_block_runs_and_its_literal_comments_hold(tmp_path, monkeypatch):
    block = readme_block("A short tour", "python")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - the README's own example
    checked = 0
    for line in block.splitlines():
        code, _, comment = line.partition("  # ")
        try:
            expected = ast.literal_eval(comment.strip())
        except (ValueError, SyntaxError):
            continue
        assert eval(code, namespace) == expected, line  # noqa: S307
        checked += 1
    assert checked >= 1  # the parameter counts
    ids = namespace["ids"]
    assert tuple(namespace["logits"].shape) == (1, ids.shape[1], 260)  # "# [1, T, 260]"
    assert (tmp_path / "my-model" / "config.json").is_file()
