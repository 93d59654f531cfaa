"""`glm53 generate --tasks/--split`: completions in bulk, as `glm53 verify` reads them, equal to what `glm53 eval`
judges; and `glm53 generate --interactive`, driven through stdin."""

import io
import json
import sys
from types import SimpleNamespace

import pytest
import torch

from glm53 import GLM53, ModelConfig
from glm53.cli import main
from glm53.data.tasks import frozen_tasks, read_tasks, write_tasks
from glm53.decode.engine import generate_groups
from glm53.decode.generate import STOP_RULES, cut_to_function
from glm53.decode.interactive import stream_completion
from glm53.decode.sampling import Sampling
from glm53.checkpoints.format import load_model, save_checkpoint

from ..tiny import TINY


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A tiny checkpoint whose context holds the broad suite (384), and a task file of three confirm tasks."""
    root = tmp_path_factory.mktemp("bulk")
    torch.manual_seed(0)
    save_checkpoint(root / "ckpt", GLM53(ModelConfig(**{**TINY, "max_sequence_length": 384})), {"step": 0})
    write_tasks(frozen_tasks("confirm", 1, "double,even,reverse"), root / "tasks.jsonl")
    return root


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("split", [["--split", "confirm", "--per-family", "1"],
                                   # the broad suite's rule, cut and fit to the context; a short cap keeps it quick
                                   ["--suite", "broad", "--split", "confirm", "--count", "3",
                                    "--max-new-tokens", "24"]],
                         ids=["reference", "broad"])
def test_generated_rows_verified_equal_the_eval_greedy_receipt(files, tmp_path, split):
    checkpoint = str(files / "ckpt")
    completions, verdicts, receipt = tmp_path / "completions.jsonl", tmp_path / "verdicts.jsonl", tmp_path / "r.json"
    assert main(["generate", "--checkpoint", checkpoint, *split, "--out", str(completions), "--device", "cpu"]) == 0
    assert main(["verify", "--in", str(completions), "--out", str(verdicts)]) == 0
    assert main(["eval", "--checkpoint", checkpoint, *split, "--out", str(receipt), "--device", "cpu"]) == 0
    rows, judged = _lines(completions), json.loads(receipt.read_text())["tasks"]
    assert "sample" not in rows[0]  # one sample per task: no index
    assert [r["task_id"] for r in rows] == [t["task_id"] for t in judged] and len(rows) in (3, 8)
    # each row is its task's task-file row plus the completion; verify kept them all and added the verdict
    export = tmp_path / "export.jsonl"
    assert main(["tasks", "export", *split[:6], "--out", str(export)]) == 0
    assert [{k: v for k, v in r.items() if k != "completion"} for r in rows] == _lines(export)
    assert [{k: v for k, v in r.items() if k != "verdict"} for r in _lines(verdicts)] == rows
    assert [r["completion"] for r in rows] == [t["samples"][0]["completion"] for t in judged]
    assert [r["verdict"] for r in _lines(verdicts)] == [t["samples"][0]["verdict"] for t in judged]


def test_k_samples_give_k_rows_per_task_and_a_seed_reproduces_them(files, tmp_path):
    checkpoint, tasks_file = str(files / "ckpt"), str(files / "tasks.jsonl")

    def generate(name: str, seed: int) -> list[dict]:
        out = tmp_path / name
        assert main(["generate", "--checkpoint", checkpoint, "--tasks", tasks_file, "--samples", "3", "--temperature",
                     "1.0", "--seed", str(seed), "--max-new-tokens", "8", "--out", str(out), "--device", "cpu"]) == 0
        return _lines(out)

    first, again, other = generate("a.jsonl", 5), generate("b.jsonl", 5), generate("c.jsonl", 6)
    assert [(r["task_id"], r["sample"]) for r in first] == [(t.task_id, i) for t in read_tasks(tasks_file)
                                                            for i in range(3)]
    assert first == again and first != other
    assert len({r["completion"] for r in first}) > 3  # sampled: the samples of a task differ
    receipt = tmp_path / "sampled.json"  # the same settings in `glm53 eval`: the same completions
    assert main(["eval", "--checkpoint", checkpoint, "--tasks", tasks_file, "--samples", "3", "--temperature", "1.0",
                 "--seed", "5", "--max-new-tokens", "8", "--out", str(receipt), "--device", "cpu"]) == 0
    assert [r["completion"] for r in first] == [s["completion"] for t in json.loads(receipt.read_text())["tasks"]
                                                for s in t["samples"]]


@pytest.mark.parametrize("flags", [
    ["--suite", "broad", "--split", "confirm", "--count", "2"],  # the suite's token cap, eval's seed
    ["--split", "confirm", "--per-family", "1", "--families", "double", "--samples", "3"],  # eval's temperature
    ["--tasks", "{tasks}", "--samples", "2", "--temperature", "0.7", "--seed", "4", "--precision", "bf16",
     "--top-k", "5", "--max-new-tokens", "9"],
], ids=["broad-defaults", "sampled-defaults", "all-given"])
def test_the_same_flags_give_generate_and_eval_the_same_settings(files, tmp_path, monkeypatch, flags):
    import glm53.decode.task_completions as completions_module
    import glm53.evaluate.evaluate as evaluate_module

    seen = []

    def completions(model, tasks, cfg):  # stands in for decoding (slow for the broad suite's 192 tokens)
        seen.append(cfg)
        return [[{"completion": "\n    return 0\n", "token_ids": [], "hit_token_cap": False}] * cfg.samples
                for _ in tasks], "fp32"

    monkeypatch.setattr(completions_module, "evaluation_completions", completions)  # what generate calls
    monkeypatch.setattr(evaluate_module, "evaluation_completions", completions)  # what eval calls
    flags = [f.format(tasks=files / "tasks.jsonl") for f in flags]
    common = ["--checkpoint", str(files / "ckpt"), "--device", "cpu", *flags]
    assert main(["generate", *common, "--out", str(tmp_path / "c.jsonl")]) == 0
    assert main(["eval", *common, "--out", str(tmp_path / "r.json")]) == 0
    assert len(seen) == 2 and seen[0] == seen[1]


BAD = [  # (name, flags after --checkpoint, what the one line says); {out} must not appear, {existing} must stay
    ("missing task file", ["--tasks", "{root}/nope.jsonl", "--out", "{out}"], "nope.jsonl does not exist"),
    ("not JSON Lines", ["--tasks", "{broken}", "--out", "{out}"], "broken.jsonl:2: not valid JSON"),
    ("both --tasks and --split", ["--tasks", "{tasks}", "--split", "confirm", "--out", "{out}"],
     "give either --tasks or --split, not both"),
    ("neither, nor --prompt", ["--out", "{out}"], "give --prompt TEXT, --tasks FILE or --split NAME"),
    ("no samples", ["--tasks", "{tasks}", "--samples", "0", "--out", "{out}"], "--samples must be >= 1, got 0"),
    ("existing --out", ["--tasks", "{tasks}", "--out", "{existing}"], "already exists; glm53 never overwrites"),
    ("no --out", ["--split", "confirm"], "give --out FILE"),
    ("stdout", ["--tasks", "{tasks}", "--out", "-"], "`glm53 verify --in` reads a file"),
    ("a flag of another way", ["--tasks", "{tasks}", "--json", "--out", "{out}"], "--json is for --prompt"),
    ("greedy samples", ["--tasks", "{tasks}", "--samples", "2", "--temperature", "0", "--out", "{out}"],
     "need a --temperature > 0"),
]


@pytest.mark.parametrize("name, flags, message", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_before_the_model_loads_and_writes_nothing(files, tmp_path, capsys, name, flags,
                                                                          message):
    (tmp_path / "broken.jsonl").write_text((files / "tasks.jsonl").read_text().splitlines()[0] + "\n{oops\n")
    (tmp_path / "existing.jsonl").write_text("keep me\n")
    places = {"root": tmp_path, "tasks": files / "tasks.jsonl", "broken": tmp_path / "broken.jsonl",
              "out": tmp_path / "out.jsonl", "existing": tmp_path / "existing.jsonl"}
    before = sorted(p.name for p in tmp_path.iterdir())
    # no checkpoint at all: the problem named must be the input's, found before any model loads
    argv = ["generate", "--checkpoint", str(tmp_path / "no-checkpoint"), "--device", "cpu",
            *[f.format(**places) for f in flags]]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert (tmp_path / "existing.jsonl").read_text() == "keep me\n"


def test_the_stream_is_the_engines_completion_piece_by_piece(files):
    model = load_model(files / "ckpt").model
    prompt = frozen_tasks("confirm", 1, "double")[0].prompt
    sampling = Sampling(temperature=1.0, max_new_tokens=24)
    for stop in ("statement", "function", None):
        pieces: list[str] = []
        record = stream_completion(model, prompt, sampling, torch.Generator().manual_seed(3), stop, pieces.append)
        engine = generate_groups(model, [prompt], 1, sampling, torch.Generator().manual_seed(3),
                                 STOP_RULES[stop] if stop else None, fit_context=True)[0][0]
        assert record == (cut_to_function(engine) if stop == "function" else engine)
        assert "".join(pieces) == record["completion"] and len(pieces) > 1, pieces  # streamed, not all at once


class Scripted(torch.nn.Module):
    """A stand-in model whose greedy choice at step i is byte i of `text`, then EOS (the prompt is ignored)."""

    def __init__(self, text: str):
        super().__init__()
        from glm53.data.tokenizer import ByteTokenizer

        self.script = ByteTokenizer().encode(text) + [ByteTokenizer.eos_id]
        self.config = SimpleNamespace(max_sequence_length=256, vocab_size=260, tokenizer="byte")
        self.device = torch.device("cpu")
        self.steps = 0

    def new_cache(self, rows: int, length: int):
        return None

    def forward(self, ids, cache=None):
        logits = torch.zeros(ids.shape[0], ids.shape[1], self.config.vocab_size)
        logits[:, -1, self.script[min(self.steps, len(self.script) - 1)]] = 1.0
        self.steps += 1
        return logits


@pytest.mark.parametrize("stop, text, completion", [
    ("function", "\n    return x\n\n\nz = 1\n", "\n    return x\n"),  # the blank lines and the z are cut
    (None, "\n    return 'é€' + x\n", "\n    return 'é€' + x\n"),  # characters of several bytes, shown whole
])
def test_pieces_never_show_what_the_completion_will_not_hold(stop, text, completion):
    pieces: list[str] = []
    record = stream_completion(Scripted(text), "def f(x):", Sampling(max_new_tokens=40), None, stop, pieces.append)
    assert record["completion"] == completion == "".join(pieces) and len(pieces) > 3
    assert not any("\ufffd" in piece for piece in pieces)


def test_interactive_reads_prompts_from_stdin_and_prints_their_completions(files, monkeypatch, capsys):
    prompts = [frozen_tasks("confirm", 1, "double")[0].prompt, "def f(x):"]
    too_long = "x" * 400  # more than the context: one line on stderr, and the next prompt is read
    typed = too_long + "\n\n" + prompts[0] + "\n\n\n" + prompts[1] + "\n"  # the end of input ends the last one
    monkeypatch.setattr(sys, "stdin", io.StringIO(typed))
    checkpoint = str(files / "ckpt")
    assert main(["generate", "--checkpoint", checkpoint, "--interactive", "--max-new-tokens", "12",
                 "--device", "cpu"]) == 1  # the session went on past the prompt that failed, and says so at its end
    out, err = capsys.readouterr()
    model = load_model(checkpoint).model
    expected = [generate_groups(model, [p], 1, Sampling(max_new_tokens=12), stop=STOP_RULES["statement"])[0][0]
                for p in prompts]
    assert out == "".join(e["completion"] + "\n" for e in expected)
    assert "an empty line ends it" in err and "leaves no room" in err
    assert err.strip().splitlines()[-1] == "glm53 generate: 1 of 3 prompts failed (said above); exit status 1"
