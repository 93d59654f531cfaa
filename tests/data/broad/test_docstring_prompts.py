"""Docstring-style prompts (broad/docstring.py): PEP 257's shape, the same function as the comment style, an
example that is one of the task's cases and the function's value, programs the verifier passes, the comment style
left exactly as it was, and the style chosen by pretraining (a share), evaluation and RL (a setting)."""

import ast
import doctest
import json

import pytest
import torch

from glm53 import GLM53, ModelConfig
from glm53.checkpoints.format import save_checkpoint
from glm53.cli import main
from glm53.data.broad import FROZEN_SPLITS, broad_pretraining_task, frozen_broad_tasks
from glm53.data.broad.docstring import (EXAMPLE_CHARS, SUFFIX, DocstringMix, docstring_prompt, docstring_task,
                                        in_docstring_style, mixed_stream, styled_tasks)
from glm53.data.broad.human import human_rows, human_tasks
from glm53.data.broad.task import HEADER, BroadTask
from glm53.data.broad.task_draw import MAX_BYTES
from glm53.data.commands import split_tasks
from glm53.data.pretrain_batches import pretraining_batch, prompt_text, validation_batch
from glm53.data.run_order import OrderedStream
from glm53.data.suites import get_suite
from glm53.data.tasks import read_tasks
from glm53.decode.generate import function_end
from glm53.evaluate.eval_config import EvalCommandConfig
from glm53.train.pretrain_config import PretrainConfig
from glm53.train.rl_config import RLConfig
from glm53.verify.static_check import check_source
from glm53.verify.verifier import verify_many

from ...tiny import TINY

PER_SPLIT = 200


def _docstring_tasks(n: int = PER_SPLIT) -> list[tuple]:
    """(comment task, docstring task, reference completion) for the first n tasks of every frozen split, and the
    human split (its solutions from human.jsonl)."""
    out = [(t, docstring_task(t), docstring_task(t).body) for split in FROZEN_SPLITS
           for t in frozen_broad_tasks(split, n)]
    solutions = {r["task_id"]: r["solution"] for r in human_rows()}
    out += [(t, docstring_task(t), solutions[t.task_id][1:]) for t in human_tasks()]
    return out


def _docstring_lines(task) -> list[str]:
    """The docstring's lines as written in the prompt (indent removed), from the opening quotes to the closing."""
    lines = task.prompt.split("\n")
    assert lines[-1] == "" and lines[0].startswith(f"def {task.entry_point}(")
    return [line[4:] if line else line for line in lines[1:-1]]


def test_docstring_prompt_follows_pep_257():
    one_line = multi_line = 0
    for comment, doc, _ in _docstring_tasks():
        lines = _docstring_lines(doc)
        assert doc.task_id == comment.task_id + SUFFIX and doc.cases == comment.cases
        assert doc.entry_point == comment.entry_point and doc.family == comment.family
        assert all(len(line) <= 79 for line in doc.prompt.split("\n"))  # PEP 8's line length
        assert doc.prompt.split("\n")[0] == comment.prompt.split("\n")[-1]  # the same def line
        assert not doc.prompt.startswith(HEADER) and "\n#" not in doc.prompt
        first = lines[0].removeprefix('"""')
        assert first != lines[0] and first[:1] not in ("", " ")  # the summary starts on the opening line
        if len(lines) == 1:  # a summary alone, on one line: a one-line docstring
            one_line += 1
            assert first.endswith('."""')
            summary = [first[:-3]]
        else:
            multi_line += 1
            assert lines[-1] == '"""'  # the closing quotes on a line of their own
            summary = [first, *lines[1:lines.index("")]] if "" in lines else [first, *lines[1:-1]]
            rest = lines[len(summary):-1]
            if rest:  # a blank line, then the example: a call and its value
                assert rest[0] == "" and len(rest) == 3 and rest[1].startswith(f">>> {doc.entry_point}(")
                assert len(rest[1]) - 4 + len(rest[2]) <= EXAMPLE_CHARS
        text = " ".join(summary)
        assert text.endswith(".") and text.removesuffix(".") == comment_text(comment).removesuffix(".")
        docstring = ast.get_docstring(ast.parse(doc.prompt + "    pass\n").body[0], clean=False)
        assert docstring is not None and docstring.split("\n")[0] == first.removesuffix('"""')
    assert multi_line > 0.9 * (one_line + multi_line)  # most have an example


def comment_text(task) -> str:
    return " ".join(line[2:] for line in task.prompt.split("\n")[1:-1])


def test_prompt_plus_completion_is_the_same_function_and_the_verifier_passes_it():
    items, programs = _docstring_tasks(), []
    for comment, doc, completion in items:
        assert doc.prompt.endswith('"""\n') and not completion.startswith("\n")
        program = doc.program(completion)
        assert program.source == doc.prompt + completion
        if isinstance(comment, BroadTask):
            assert doc.text == doc.prompt + doc.body == program.source
            assert comment.body == "\n" + doc.body
        # the same function as the comment style's def line + docstring + body
        def_line, _, after = program.source.partition("\n")
        assert def_line == comment.prompt.split("\n")[-1] and after.endswith(completion)
        check_source(program.source, doc.entry_point, language="python")  # a function's docstring is allowed
        # the function stop rule cuts a sampled continuation to exactly this body
        assert function_end(completion + "def next_function():\n") == len(completion)
        programs.append(program)
    verdicts = verify_many(programs, timeout_s=10.0, language="python")
    failed = [(doc.task_id, v.status, v.message) for (_, doc, _), v in zip(items, verdicts) if not v.passed]
    assert not failed, failed[:5]


def test_example_is_one_of_the_tasks_cases_and_the_functions_value():
    shown = 0
    for comment, doc, completion in _docstring_tasks(100):
        examples = doctest.DocTestParser().get_examples(
            ast.get_docstring(ast.parse(doc.prompt + "    pass\n").body[0], clean=False))
        if not examples:
            continue
        shown += 1
        (example,) = examples
        call = ast.parse(example.source, mode="eval").body
        args = tuple(ast.literal_eval(a) for a in call.args)
        value = ast.literal_eval(example.want)
        assert (args, value) in [(tuple(a), v) for a, v in doc.cases]  # a hidden case, shown as it is
        # and doctest agrees: the reference function returns that value on those args
        namespace: dict = {}
        exec(compile(doc.prompt + completion, "<doc>", "exec"), namespace)
        runner = doctest.DocTestRunner(verbose=False)
        for test in doctest.DocTestFinder().find(namespace[doc.entry_point], doc.entry_point, globs=namespace):
            runner.run(test)
        assert runner.summarize(verbose=False).failed == 0, doc.text
        assert len(doc.cases) >= 8  # one shown case is never all the verifier checks
    assert shown > 450


def test_example_is_left_out_when_too_long_and_documents_stay_in_bounds():
    for comment, doc, completion in _docstring_tasks(100):
        assert len((doc.prompt + completion).encode()) <= max(MAX_BYTES, len((comment.prompt + "\n" + completion)
                                                                             .encode()))
    prompt = docstring_prompt("Return x", "f_abcdefg", ["x"])
    assert prompt == 'def f_abcdefg(x):\n    """Return x."""\n'
    prompt = docstring_prompt("Return x", "f_abcdefg", ["x"], ("f_abcdefg('a\\\\b')", "'a\\\\b'"))
    assert prompt.split("\n")[1] == '    r"""Return x.'  # a backslash: a raw docstring (PEP 257)
    with pytest.raises(ValueError, match="three double quotes"):
        docstring_prompt('Return """', "f", ["x"])
    task = frozen_broad_tasks("dev", 1)[0]
    long_cases = tuple(((("a" * 70,),) + case[1:]) for case in task.cases[:1]) + task.cases[1:]
    from dataclasses import replace
    doc = docstring_task(replace(task, cases=long_cases))
    assert "a" * 70 not in doc.prompt  # that case is too long to show: the next one is shown


def test_comment_style_is_unchanged_and_share_zero_is_the_stream():
    before = [t.to_json() | {"text": t.text} for split in FROZEN_SPLITS for t in frozen_broad_tasks(split, 50)]
    for split in FROZEN_SPLITS:
        styled_tasks(frozen_broad_tasks(split, 50), "docstring")  # rendering draws nothing, changes nothing
    after = [t.to_json() | {"text": t.text} for split in FROZEN_SPLITS for t in frozen_broad_tasks(split, 50)]
    assert after == before
    suite = get_suite("broad")
    assert mixed_stream(suite, 0.0) is suite
    assert styled_tasks(frozen_broad_tasks("dev", 5), "comment") == frozen_broad_tasks("dev", 5)
    for step in (0, 3, 9):  # the bucketed batches, with and without the setting
        plain = pretraining_batch(step, 16, 324, 42, "broad")
        zero = pretraining_batch(step, 16, 324, 42, "broad", docstring_share=0.0)
        assert all(torch.equal(a, b) for a, b in zip(plain, zero))
    plain, zero = validation_batch(8, 324, 7, "broad"), validation_batch(8, 324, 7, "broad", docstring_share=0.0)
    assert all(torch.equal(a, b) for a, b in zip(plain, zero))
    args = dict(suite="broad", split="confirm", per_family=None, count=20, families="all")
    assert split_tasks(type("A", (), args)) == split_tasks(type("A", (), {**args, "prompt_style": "comment"}))


def test_docstring_share_mixes_at_its_rate_deterministically():
    chosen = [in_docstring_style(42, i, 0.3) for i in range(20_000)]
    assert abs(sum(chosen) / len(chosen) - 0.3) < 0.015
    assert chosen != [in_docstring_style(43, i, 0.3) for i in range(20_000)]  # another seed, other documents
    small = {i for i in range(5_000) if in_docstring_style(42, i, 0.1)}
    assert small <= {i for i in range(5_000) if in_docstring_style(42, i, 0.5)}  # a larger share adds documents
    assert all(in_docstring_style(5, i, 1.0) for i in range(100)) and not any(in_docstring_style(5, i, 0.0)
                                                                            for i in range(100))
    suite = get_suite("broad")
    stream, again = DocstringMix(suite, 0.3), DocstringMix(suite, 0.3)
    texts = [stream.pretraining_text(i, 42) for i in range(256)]
    assert texts == [again.pretraining_text(i, 42) for i in range(256)]
    for i, text in enumerate(texts):
        assert text.startswith("def ") == in_docstring_style(42, i, 0.3)
        base = broad_pretraining_task(i, 42)
        assert text == (docstring_task(base).text if text.startswith("def ") else base.text)
        assert prompt_text(text) == stream.pretraining_task(i, 42).prompt.rstrip("\n")  # the loss-on-completion cut
    assert 50 < sum(t.startswith("def ") for t in texts) < 105
    # a batch is a pure function of the step: made twice (as a resumed run makes it), the same
    first = pretraining_batch(2, 16, 324, 42, "broad", docstring_share=0.3)
    assert all(torch.equal(a, b) for a, b in zip(first, pretraining_batch(2, 16, 324, 42, "broad",
                                                                          docstring_share=0.3)))
    assert not torch.equal(first[0], pretraining_batch(2, 16, 324, 42, "broad")[0])
    ordered = OrderedStream(mixed_stream(suite, 0.3), 42, 64, "curriculum")
    assert sorted(ordered.pretraining_text(i, 42) for i in range(64)) == sorted(texts[:64])


def test_settings_refuse_the_style_where_it_does_not_apply():
    assert PretrainConfig(out="x", suite="broad", sequence_length=324, docstring_share=0.25,
                          model=ModelConfig(max_sequence_length=384)).docstring_share == 0.25
    with pytest.raises(ValueError, match="--docstring-share"):
        PretrainConfig(out="x", docstring_share=0.5)
    with pytest.raises(ValueError, match="--prompt-style"):
        EvalCommandConfig(canonical=True, out="x.json", split="confirm", prompt_style="docstring")
    with pytest.raises(ValueError, match="--prompt-style"):
        EvalCommandConfig(canonical=True, out="x.json", tasks="t.jsonl", prompt_style="docstring", suite="broad")
    with pytest.raises(ValueError, match="--prompt-style"):
        RLConfig(init="a", out="b", prompt_style="docstring")
    with pytest.raises(ValueError, match="--prompt-style"):
        RLConfig(init="a", out="b", suite="broad", tasks_file="t.jsonl", prompt_style="docstring")
    rl = RLConfig(init="a", out="b", suite="broad", families="all", tasks_per_family=3, prompt_style="docstring")
    assert [t.task_id for t in rl.training_tasks()] == [f"broad-rl-000{i}{SUFFIX}" for i in range(3)]
    stream = RLConfig(init="a", out="b", suite="broad", families="all", tasks_per_family=2, task_source="stream",
                      prompt_style="docstring")
    assert all(t.prompt.startswith("def ") for t in stream.training_tasks())


def test_eval_and_export_in_docstring_style(tmp_path, capsys):
    checkpoint = tmp_path / "checkpoint-0000"
    save_checkpoint(checkpoint, GLM53(ModelConfig(**{**TINY, "max_sequence_length": 384})), {"step": 0})
    receipt = tmp_path / "doc.json"
    assert main(["eval", "--suite", "broad", "--checkpoint", str(checkpoint), "--split", "confirm", "--count", "2",
                 "--prompt-style", "docstring", "--max-new-tokens", "4", "--device", "cpu", "--out",
                 str(receipt)]) == 0
    data = json.loads(receipt.read_text())
    assert data["source"]["prompt_style"] == "docstring"
    assert [t["task_id"] for t in data["tasks"]] == ["broad-confirm-0000-doc", "broad-confirm-0001-doc"]
    assert all(t["prompt"].startswith("def ") and t["prompt"].endswith('"""\n') for t in data["tasks"])
    canonical = tmp_path / "canonical.json"  # the harness: every reference body passes behind its docstring
    assert main(["eval", "--suite", "broad", "--canonical", "--split", "confirm", "--count", "30", "--prompt-style",
                 "docstring", "--out", str(canonical)]) == 0
    data = json.loads(canonical.read_text())
    assert data["source"]["prompt_style"] == "docstring" and all(t["passed"] == 1 for t in data["tasks"])
    exported = tmp_path / "dev-doc.jsonl"
    assert main(["tasks", "export", "--suite", "broad", "--split", "human", "--prompt-style", "docstring", "--out",
                 str(exported)]) == 0
    tasks = read_tasks(exported)
    assert len(tasks) == 88 and all(t.task_id.endswith(SUFFIX) and t.prompt.startswith("def ") for t in tasks)
    assert main(["tasks", "export", "--split", "dev", "--prompt-style", "docstring", "--out",
                 str(tmp_path / "ref.jsonl")]) == 2  # the reference suite's prompts are its own
    assert "--prompt-style" in capsys.readouterr().err
