"""Decoding multi-line bodies (the broad suite): the function-end stop rule and its cut, each suite's token cap,
and caps that fit the context; the reference suite keeps its first-statement rule and its 48 tokens."""

from dataclasses import replace
from types import SimpleNamespace

import pytest

from glm53 import GLM53
from glm53.data.broad import frozen_broad_tasks
from glm53.data.broad.human import human_rows
from glm53.data.suites import BROAD_CONTEXT, get_suite
from glm53.data.tasks import frozen_tasks
from glm53.data.tokenizer import ByteTokenizer
from glm53.decode.engine import generate_groups
from glm53.decode.generate import Sampling, cut_to_function, function_end, function_ended, generate_uncached
from glm53.decode import task_completions as completions_module
from glm53.decode.task_completions import task_stop_rule
from glm53.evaluate.evaluate import sample_and_verify

BODY = "\n    total = 0\n    for v in values:\n        if v > 0:\n            total += v\n\n    return total\n"


@pytest.mark.parametrize("completion, end", [
    ("\n    return x", None),
    ("\n    return x\n", None),  # the next line may still be indented
    ("\n    return x\n#", len("\n    return x\n")),
    (BODY + "\n\ndef", len(BODY)),  # blank lines before the dedent are left out
    (BODY[:-1] + "\n   \n    y = 2\n", None),  # a blank line followed by an indented one: still inside
    ("\nx", 0),
    (" return x\nz", len(" return x\n")),  # a body on the def line
])
def test_function_end(completion, end):
    assert function_end(completion) == end
    assert function_ended("def f(values):", completion) == (end is not None)


def test_cut_drops_the_dedented_character_and_the_blank_lines_from_text_and_tokens():
    tok = ByteTokenizer()
    completion = BODY + "\n\n#"
    record = {"completion": completion, "token_ids": tok.encode(completion), "hit_token_cap": False}
    cut = cut_to_function(record)
    assert cut["completion"] == BODY and cut["token_ids"] == tok.encode(BODY)
    eos = {"completion": BODY, "token_ids": tok.encode(BODY) + [tok.eos_id], "hit_token_cap": False}
    assert cut_to_function(eos) == eos  # stopped at EOS: nothing to cut


def test_each_suite_has_its_own_rule():
    prompt = "# Complete this Python function.\n# Add every positive number.\ndef f(values):"
    reference = task_stop_rule([frozen_tasks("dev", 1)[0]], "reference")
    broad = task_stop_rule([], "broad")
    assert not broad(prompt, "\n    total = 0\n") and broad(prompt, BODY + "#")
    task = frozen_tasks("dev", 1, "increment")[0]
    stop = task_stop_rule([task], "reference")
    assert stop(task.prompt, "\n    return x + 1\n")  # the first complete statement ends a reference body
    assert reference is not broad and get_suite("reference").max_new_tokens == 48


def test_broad_cap_and_context_hold_every_reference_body():
    """The cap covers the longest reference body (with EOS) of every split, with a margin; prompt and body (and
    BOS/EOS) fit the broad context."""
    tok, suite = ByteTokenizer(), get_suite("broad")
    pairs = [(t.prompt, t.body) for split in ("dev", "rl", "confirm", "compose", "phrase")
             for t in frozen_broad_tasks(split, 1000)] + [(r["prompt"], r["solution"]) for r in human_rows()]
    longest_body = max(len(tok.encode(b, eos=True)) for _, b in pairs)
    assert longest_body + 16 <= suite.max_new_tokens
    assert max(len(tok.encode(p + b, bos=True, eos=True)) for p, b in pairs) <= suite.max_document_tokens() \
        <= BROAD_CONTEXT
    assert all(len(tok.encode(p, bos=True)) + len(tok.encode(b, eos=True)) <= BROAD_CONTEXT for p, b in pairs)


def test_fit_context_cuts_each_prompts_cap_to_the_room_left(tiny_config):
    model = GLM53(tiny_config).eval()  # max_sequence_length 64
    prompts = ["x" * 55, "y" * 10]
    sampling = Sampling(max_new_tokens=12, ignore_eos=True)
    with pytest.raises(ValueError, match="exceeds max_sequence_length"):
        generate_groups(model, prompts, 1, sampling)
    cached = generate_groups(model, prompts, 2, sampling, fit_context=True)
    plain = generate_uncached(model, prompts, 2, sampling, fit_context=True)
    assert cached == plain
    assert [len(r["token_ids"]) for r in cached[0]] == [64 - 56] * 2 and cached[0][0]["hit_token_cap"]
    assert [len(r["token_ids"]) for r in cached[1]] == [12] * 2 and cached[1][0]["hit_token_cap"]
    with pytest.raises(ValueError, match="leaves no room"):
        generate_groups(model, ["z" * 70], 1, sampling, fit_context=True)


def test_a_broad_body_is_decoded_to_the_function_end_and_verified_at_the_python_level(monkeypatch):
    """A stand-in for the engine writes each task's reference body and then a new top-level line, byte by byte,
    asking the stop rule after each as the engine does: the rule stops at the dedent, the cut removes it, and the
    body (loops, methods) passes at the task's python level."""
    tok = ByteTokenizer()
    tasks = [t for t in frozen_broad_tasks("confirm", 200) if t.body.count("\n") > 2][:6]
    assert tasks and any("for " in t.body for t in tasks)

    def engine(model, prompts, group_size, sampling, generator=None, stop=None, precision="fp32", fit_context=False):
        assert fit_context and stop is not None
        out = []
        for prompt in prompts:
            text = next(t.body for t in tasks if t.prompt == prompt) + "\n# Complete this Python function.\n"
            ids = []
            for b in tok.encode(text):
                ids.append(b)
                if stop(prompt, tok.decode(ids)):
                    break
            out.append([{"completion": tok.decode(ids), "token_ids": ids, "hit_token_cap": False}] * group_size)
        return out

    monkeypatch.setattr(completions_module, "generate_groups", engine)
    model = SimpleNamespace(config=SimpleNamespace(tokenizer="byte"))  # no engine runs; the cut reads the tokenizer
    judged = sample_and_verify(model, tasks, 1, Sampling(max_new_tokens=192), None, suite="broad")
    for task, [(sample, verdict)] in zip(tasks, judged):
        assert sample["completion"] == task.body and sample["token_ids"] == tok.encode(task.body)
        assert verdict.passed, (task.task_id, verdict)
    as_reference = [replace(t, language="reference") for t in tasks]  # each task is verified at its own level
    judged = sample_and_verify(model, as_reference, 1, Sampling(max_new_tokens=192), None, suite="broad")
    assert any(v.status == "invalid" for [(_, v)] in judged)  # loops and methods: refused at the reference level


def test_a_line_nested_past_the_parsers_limits_does_not_stop_and_does_not_crash():
    """ast.parse raises RecursionError or MemoryError, not SyntaxError, on a line thousands of operators deep: the
    stop rule says "not complete" (generation goes on; the verifier judges the program) rather than crash the run."""
    from glm53.decode.generate import function_body_complete

    prompt = "def f(x):"
    for line in ("\n    return " + "1+" * 3000 + "1\n", "\n    return " + "-" * 7000 + "1\n",
                 "\n    return " + "(" * 400 + "1" + ")" * 400 + "\n"):
        assert function_body_complete(prompt, line) in (False, True)  # answers, whichever
    assert not function_body_complete(prompt, "\n    return " + "1+" * 3000 + "1\n")
