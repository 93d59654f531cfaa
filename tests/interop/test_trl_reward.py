"""glm53.interop.trl_reward: the sandbox as a TRL reward. Correct, partly right, wrong, hanging, crashing (raising,
recursing, exhausting memory) and hostile completions on real tasks of the reference and the broad suite get, in each
mode, the reward of the verdict `glm53 verify` gives the same completions (run here, not assumed), at each row's own
level and at a level given for every row; rows of a split exported as a dataset are read as they are; a completion
TRL ran past glm53's stop is judged as glm53's generation would have ended it; bad input is one line; the reward
pickles and keeps glm53 rl's defaults and isolation policy."""

from __future__ import annotations

import json
import pickle

import pytest

pytest.importorskip("trl", reason="needs the hf extra: bash scripts/install.sh --hf")

import torch  # noqa: E402

from glm53 import ModelConfig  # noqa: E402
from glm53.cli import main  # noqa: E402
from glm53.data.bpe_tokenizer import tokenizer_for  # noqa: E402
from glm53.data.suites import get_suite  # noqa: E402
from glm53.decode.generate import cut_to_function, generate_uncached  # noqa: E402
from glm53.decode.sampling import Sampling  # noqa: E402
from glm53.decode.task_completions import task_stop_rule  # noqa: E402
from glm53.interop.trl_reward import sandbox_reward  # noqa: E402
from glm53.train.rl_config import RLConfig  # noqa: E402
from glm53.verify.rewards import reward  # noqa: E402
from glm53.verify.verifier import SandboxPool, Verdict  # noqa: E402

from ..tiny import TINY  # noqa: E402

INCREMENT = get_suite("reference").tasks("dev", 1, "increment")[0]
BROAD = get_suite("broad").tasks("dev", 2)
# for the increment task (argument x), at the reference level unless said
REFERENCE_COMPLETIONS = {
    "correct": INCREMENT.canonical_completion, "partly right": "\n    return x + 1 if x < 0 else x\n",
    "wrong": "\n    return x\n", "hanging": "\n    return sum(range(10 ** 15))\n",
    "crashing": "\n    return 1 // (x - x)\n", "out of memory": "\n    return len([0] * 10 ** 9)\n",
    "hostile": "\n    return __import__('os').system('id')\n",
    "a loop (python level only)": "\n    for one in [1]:\n        return x + one\n",
}
BROAD_COMPLETIONS = {
    "wrong": "\n    return None\n", "hanging": "\n    while True:\n        pass\n",
    "crashing": "\n    raise ValueError('no')\n",
    "recursing": "\n    def down(n):\n        return down(n + 1)\n    return down(0)\n",
    "hostile": "\n    import os\n    return os.listdir('/')\n",
    "escaping": "\n    return ().__class__.__bases__[0].__subclasses__()\n",
    "reading a file": "\n    return open('/etc/passwd').read()\n",
}
MODES = [("binary", {}), ("partial", {}), ("binary", {"invalid_penalty": -1.0}),
         ("partial", {"exact_bonus": 0.5, "invalid_penalty": -0.25})]


def broad_completions(task) -> dict[str, str]:
    """The broad task's own body, one that returns None for about half the inputs, and BROAD_COMPLETIONS."""
    args = task.prompt.rsplit("(", 1)[1].split(")")[0]
    return {"correct": task.body, "partly right": f"\n    if len(str(({args},))) % 2:\n        return None" + task.body,
            **BROAD_COMPLETIONS}


def completion_rows() -> list[dict]:
    """Task rows as `glm53 tasks export` writes them, each with a completion (and its kind, for messages)."""
    rows = [{**INCREMENT.to_json(), "completion": text, "kind": kind} for kind, text in REFERENCE_COMPLETIONS.items()]
    for task in BROAD:
        rows += [{**task.to_json(), "completion": text, "kind": kind} for kind, text in broad_completions(task).items()]
    return rows


def trl_call(function, rows: list[dict], completions: list | None = None):
    """`function` called as TRL's GRPOTrainer calls a reward: the prompt column as `prompts`, every other column
    as a list (None where a row lacks it, as datasets fills a column), and TRL's own extra arguments."""
    columns = sorted({key for row in rows for key in row} - {"prompt", "completion"})
    return function(prompts=[row["prompt"] for row in rows],
                    completions=completions if completions is not None else [row["completion"] for row in rows],
                    completion_ids=[[1, 2]] * len(rows), trainer_state=None, log_extra=print, log_metric=print,
                    **{key: [row.get(key) for row in rows] for key in columns})


def glm53_verify(rows: list[dict], tmp_path, *flags: str) -> list[Verdict]:
    """The verdicts of `glm53 verify` (the command, in this process) on the rows."""
    source, out = tmp_path / f"in{len(flags)}.jsonl", tmp_path / f"out{len(flags)}.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert main(["verify", "--in", str(source), "--out", str(out), *flags]) == 0
    return [Verdict(**json.loads(line)["verdict"]) for line in out.read_text().splitlines()]


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    rows = completion_rows()
    return rows, glm53_verify(rows, tmp_path_factory.mktemp("verify"))


@pytest.mark.parametrize("mode,settings", MODES)
def test_each_mode_is_glm53_verifys_verdict_on_the_same_completions(judged, mode, settings):
    rows, verdicts = judged
    expected = [reward(v, mode, **settings) for v in verdicts]
    for stop in (None, "suite"):  # these completions end where glm53 stops them (or never stop): no cut either way
        got = trl_call(sandbox_reward(mode, stop=stop, **settings), rows)
        wrong = [(r["task_id"], r["kind"], v.status, g, e) for r, v, g, e in zip(rows, verdicts, got, expected)
                 if g != e]
        assert not wrong, wrong
    statuses = {(r["language"] if "language" in r else "reference", v.status) for r, v in zip(rows, verdicts)}
    for level in ("reference", "python"):  # the matrix reaches every verdict a program can earn at each level
        assert {status for lv, status in statuses if lv == level} >= {"passed", "failed", "timeout", "invalid"}
    assert ("reference", "memory") in statuses
    if mode == "partial":
        assert any(0 < g < 1 for g in got), got  # a fraction of the cases


def test_a_level_for_every_row_is_glm53_verify_with_that_language(judged, tmp_path):
    rows = [row for row in judged[0] if "language" not in row]  # the reference suite's rows
    verdicts = glm53_verify(rows, tmp_path, "--language", "python")
    for mode, settings in MODES[:2]:
        got = trl_call(sandbox_reward(mode, level="python", **settings), rows)
        assert got == [reward(v, mode, **settings) for v in verdicts]
    loop = [r["kind"] for r in rows].index("a loop (python level only)")
    assert verdicts[loop].status == "passed" and judged[1][loop].status == "invalid"
    with pytest.raises(ValueError) as caught:  # a broad row names python: refused at another level, as --language does
        trl_call(sandbox_reward(level="reference"), [row for row in judged[0] if "language" in row][:1])
    assert "\n" not in str(caught.value) and "names language 'python' but sandbox_reward was made with level=" \
        "'reference'" in str(caught.value)


class Scripted(torch.nn.Module):
    """Stands in for a model in glm53's generation: it writes `text` byte by byte, then EOS, whatever it is fed."""

    def __init__(self, prompt: str, text: str):
        super().__init__()
        self.config = ModelConfig(**{**TINY, "max_sequence_length": 1024})
        tokenizer = tokenizer_for(self.config)
        self.start, self.script = len(tokenizer.encode(prompt, bos=True)), tokenizer.encode(text) + [tokenizer.eos_id]
        self.device = torch.device("cpu")

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(ids.shape[0], ids.shape[1], self.config.vocab_size)
        logits[:, -1, self.script[min(ids.shape[1] - self.start, len(self.script) - 1)]] = 1.0
        return logits


def glm53_generation(task, text: str, suite: str) -> str:
    """What glm53's generation makes of a model that writes `text`: stopped by the suite's rule and cut as
    decode/task_completions.py's sample_completions cuts it."""
    model = Scripted(task.prompt, text)
    record = generate_uncached(model, [task.prompt], 1, Sampling(max_new_tokens=len(model.script)),
                               stop=task_stop_rule([task], suite))[0][0]
    return (cut_to_function(record) if get_suite(suite).stop == "function" else record)["completion"]


def test_a_completion_run_past_glm53s_stop_is_judged_as_glm53s_generation_ends_it(tmp_path):
    broad = BROAD[0]
    written = [  # (task, suite, what TRL generated: a completion that runs on past where glm53 stops)
        (INCREMENT, "reference", INCREMENT.canonical_completion + "    return 0\n\ndef after(:\n"),
        (INCREMENT, "reference", "\n    return x\n    return x + 1\n"),
        (INCREMENT, "reference", "\n    return (x +\n        1)\n# done\nprint(1)\n"),
        (INCREMENT, "reference", "\n    return x + 1"),  # the token cap, mid-line: judged whole
        (broad, "broad", broad.body + "\n\ndef helper(:\n    pass\n"),
        (broad, "broad", broad.body + "# the end\n"),
        (broad, "broad", "\n    if True:\n\n        return None\n    return 1\nx = (\n"),
        (broad, "broad", broad.body + "    return None\n"),  # no dedented line: never stops, judged whole
    ]
    generated = [glm53_generation(task, text, suite) for task, suite, text in written]
    assert sum(g != text for g, (_, _, text) in zip(generated, written)) == 6  # the rule cut six of them
    rows = [{**task.to_json(), "completion": g} for g, (task, _, _) in zip(generated, written)]
    verdicts = glm53_verify(rows, tmp_path)
    trl_rows = [{**task.to_json(), "completion": text} for task, _, text in written]
    for mode, settings in MODES:
        assert trl_call(sandbox_reward(mode, **settings), trl_rows) == [reward(v, mode, **settings) for v in verdicts]
    # the cut is what scored them: judged as given, the trailing text makes them invalid
    assert trl_call(sandbox_reward(stop=None), trl_rows[:1]) == [-0.1]
    # stop names the rule for every row: the function rule cuts this one at the def, keeping a return that never runs
    assert trl_call(sandbox_reward(stop="function"), trl_rows[:1]) == [1.0]


def test_cases_as_json_text_and_rows_of_another_dataset(judged):
    rows = judged[0][:2]
    as_text = [{**row, "cases": json.dumps(row["cases"])} for row in rows]
    function = sandbox_reward("partial")
    assert trl_call(function, as_text) == trl_call(function, rows) == [1.0, 4 / 11]
    other = {"prompt": "Say hello.", "completion": "hello", "entry_point": None, "cases": None}
    assert trl_call(function, [rows[0], other]) == [1.0, None]  # not applicable: TRL leaves it out
    assert function(prompts=[], completions=[], entry_point=[], cases=[]) == []


def test_a_split_exported_as_a_dataset_is_read_as_it_is(tmp_path):
    from datasets import load_from_disk

    exported = {}
    for suite, count in (("reference", ["--per-family", "1", "--families", "increment,even,reverse"]),
                         ("broad", ["--count", "3"])):
        out = tmp_path / suite
        assert main(["tasks", "export", "--suite", suite, "--split", "dev", *count, "--format", "datasets", "--out",
                     str(out)]) == 0
        exported[suite] = load_from_disk(str(out)).to_list()
    tasks = get_suite("reference").tasks("dev", 1, "increment,even,reverse") + get_suite("broad").tasks("dev", 3)
    rows = [{**row, "completion": task.canonical_completion} for row, task in
            zip(exported["reference"] + exported["broad"], tasks, strict=True)]
    assert all(isinstance(row["cases"], str) for row in rows)  # JSON text, as Arrow cannot type the cases
    wrong = [{**row, "completion": "\n    return None\n"} for row in rows]
    assert trl_call(sandbox_reward(), rows + wrong) == [1.0] * 6 + [0.0] * 6


def refusal(call) -> str:
    with pytest.raises(ValueError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message and message.startswith("sandbox_reward"), message
    return message


def test_bad_input_is_one_line_naming_what_is_wrong():
    assert "unknown mode 'exact'; choose one of binary, partial" in refusal(lambda: sandbox_reward("exact"))
    assert "unknown level 'java'; choose one of reference, python, python-stdlib" in refusal(
        lambda: sandbox_reward(level="java"))
    assert "unknown stop 'eos'" in refusal(lambda: sandbox_reward(stop="eos"))
    assert "invalid_penalty must be a finite number <= 0, got 0.5" in refusal(
        lambda: sandbox_reward(invalid_penalty=0.5))
    assert "exact_bonus must be a finite number >= 0" in refusal(lambda: sandbox_reward(exact_bonus=float("nan")))
    row = {**INCREMENT.to_json(), "completion": INCREMENT.canonical_completion}
    function = sandbox_reward()
    for missing in ("entry_point", "cases"):
        message = refusal(lambda: trl_call(function, [{k: v for k, v in row.items() if k != missing}]))
        assert f"the dataset has no {missing!r} column; each row needs prompt, entry_point and cases" in message
    assert "completion is a conversation" in refusal(
        lambda: trl_call(function, [row], [[{"role": "assistant", "content": row["completion"]}]]))
    assert f"row 0 of the batch (task {INCREMENT.task_id}): case 1 must be [args_list, expected]" in refusal(
        lambda: trl_call(function, [{**row, "cases": [[[1], 2], [1, 2]]}]))
    assert "'entry_point' must be a str, got int" in refusal(lambda: trl_call(function, [{**row, "entry_point": 7}]))
    assert "'cases' is text but not JSON" in refusal(lambda: trl_call(function, [{**row, "cases": "[[1]"}]))
    assert "unknown language level 'cobol'" in refusal(lambda: trl_call(function, [{**row, "language": "cobol"}]))
    assert "2 prompts for 1 completions" in refusal(
        lambda: function(prompts=["a", "b"], completions=["c"], entry_point=["f"], cases=[[[[1], 1]]]))


def test_it_pickles_keeps_glm53_rls_defaults_and_is_named_for_trls_logs():
    function = pickle.loads(pickle.dumps(sandbox_reward("partial", level="python")))
    assert function.__name__ == "glm53_partial" and sandbox_reward().__name__ == "glm53_binary"
    assert (function.mode, function.level, function.stop) == ("partial", "python", "suite")
    defaults, rl = sandbox_reward(), RLConfig()
    assert (defaults.mode, defaults.invalid_penalty, defaults.exact_bonus) == (rl.reward, rl.invalid_penalty,
                                                                                rl.exact_bonus)


def test_a_sandbox_below_full_isolation_is_refused_unless_accepted(monkeypatch):
    partial = {"namespaces": "on", "drop-user": "off: not root; programs run as the caller's uid", "seccomp": "on",
               "level": "partial"}
    monkeypatch.setattr(SandboxPool, "isolation", lambda self: dict(partial))
    row = {**INCREMENT.to_json(), "completion": INCREMENT.canonical_completion}
    message = refusal(lambda: trl_call(sandbox_reward(), [row]))
    assert "the sandbox lacks drop-user (not root)" in message and "accept_partial_isolation=True" in message
    accepted = sandbox_reward(accept_partial_isolation=True)
    assert trl_call(accepted, [row]) == [1.0]
    assert accepted.sandbox["level"] == "partial" and accepted.sandbox["accepted_partial"] is True


def test_a_completion_nested_past_the_parsers_limits_is_invalid_not_a_crash():
    """The stop rule parses each prefix; a line thousands of operators deep makes Python's parser raise
    RecursionError or MemoryError, which must end as the verifier's verdict (invalid), never in the trainer."""
    row = INCREMENT.to_json()
    deep = "\n    return " + "1+" * 3000 + "1\n"
    rewards = sandbox_reward("binary")(prompts=[row["prompt"]], completions=[deep], entry_point=[row["entry_point"]],
                                       cases=[row["cases"]])
    assert rewards == [RLConfig().invalid_penalty]
