"""code-bpe-2048 (glm53/data/bpe_tokenizer.py): every newline a token of its own, so a prompt cut before or after a
newline is tokenized as training saw it: broad tasks in both prompt styles, standard-library functions cut after
their docstring's last line, and any text cut at any newline. broad-bpe-2048, whose pieces start at a newline,
breaks it for a prompt that ends after one; the test says so, so the property is no accident of the texts."""

import ast
from functools import cache
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from glm53.data.bpe_tokenizer import NEWLINE_BEHAVIOR, load_bpe
from glm53.data.broad.docstring import styled_tasks
from glm53.data.corpus_build_config import CorpusBuildConfig
from glm53.data.python_functions import module_functions
from glm53.data.python_sources import read_module, stdlib_source
from glm53.data.suites import get_suite

code = load_bpe("code-bpe-2048")
broad = load_bpe("broad-bpe-2048")
SPLITS = ("dev", "confirm", "compose", "phrase")


def cut_as_trained(tokenizer, prompt: str, body: str) -> bool:
    return tokenizer.encode(prompt) + tokenizer.encode(body) == tokenizer.encode(prompt + body)


def broad_items(style: str, per_split: int = 100) -> list[tuple[str, str]]:
    suite = get_suite("broad")
    return [(t.prompt, t.body) for split in SPLITS for t in styled_tasks(suite.tasks(split, per_split), style)]


@cache
def stdlib_functions(count: int = 120) -> list[str]:
    """The first `count` functions `glm53 corpus build` would harvest from the standard library (before its
    duplicate and overlap removal), read in its order: its documents, without the 12 s build."""
    cfg, source, texts = CorpusBuildConfig(out="unused"), stdlib_source(), []
    for relative in source.files:
        module = read_module(Path(source.root) / relative, relative, cfg)
        if not isinstance(module, str):
            texts += [f.text for f, _ in module_functions(*module, source.name, relative, cfg) if f]
        if len(texts) >= count:
            return texts[:count]
    return texts


def after_docstring(text: str) -> int:
    """Where a document's function continues after its docstring: just after the newline that ends the docstring's
    last line."""
    function = next(n for n in ast.parse(text).body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    lines = text.split("\n")
    return sum(len(line) + 1 for line in lines[:function.body[0].end_lineno])


def test_the_newline_is_a_piece_of_its_own():
    assert NEWLINE_BEHAVIOR["code"] == "isolated"
    newline = code.encode("\n")
    assert len(newline) == 1
    for text in ["def f(x):\n    return x\n", "a\n\n\nb", '    """Doc.\n    """\n    return 1\n']:
        ids = code.encode(text)
        assert ids.count(newline[0]) == text.count("\n")  # every newline is that one token, never inside another
        assert all("\n" not in code.decode([i]) for i in ids if i != newline[0])


def test_broad_prompts_in_both_styles_are_cut_as_in_training():
    for style in ("comment", "docstring"):
        items = broad_items(style)
        for prompt, body in items:
            assert cut_as_trained(code, prompt, body), (style, prompt)
        ends_after = [p.endswith("\n") for p, _ in items]
        assert all(ends_after) if style == "docstring" else not any(ends_after)
    # broad-bpe-2048 merges a newline with the next line's start: a docstring prompt's cut differs from training's
    assert not all(cut_as_trained(broad, p, b) for p, b in broad_items("docstring", 10))


def test_stdlib_functions_cut_after_their_docstring_line_are_cut_as_in_training():
    texts = stdlib_functions()
    assert len(texts) == 120
    for text in texts:
        cut = after_docstring(text)
        assert text[cut - 1] == "\n" and code.decode(code.encode(text)) == text
        assert cut_as_trained(code, text[:cut], text[cut:])  # the prompt ends after the newline (HumanEval's cut)
        assert cut_as_trained(code, text[:cut - 1], text[cut - 1:])  # before it (the broad comment style's)
    assert not all(cut_as_trained(broad, t[:after_docstring(t)], t[after_docstring(t):]) for t in texts[:20])


@given(st.text(alphabet=st.sampled_from("ab \t\n:()_é\"'#=\\"), max_size=80), st.data())
@settings(max_examples=300, deadline=None)
def test_any_text_cut_next_to_any_newline_is_cut_as_in_training(text, data):
    cuts = [i for i, c in enumerate(text) if c == "\n"]
    if cuts:
        at = data.draw(st.sampled_from(cuts))
        assert cut_as_trained(code, text[:at], text[at:]) and cut_as_trained(code, text[:at + 1], text[at + 1:])


def test_it_cuts_broad_bodies_and_stdlib_functions_into_fewer_tokens_than_broad_bpe():
    bodies = [t.body for t in get_suite("broad").tasks("dev", 64)]
    functions = stdlib_functions()

    def bytes_per_token(tokenizer, texts):
        return sum(len(t.encode()) for t in texts) / sum(len(tokenizer.encode(t)) for t in texts)

    assert bytes_per_token(code, bodies) > 3.5  # about 4 (broad-bpe-2048: about 5; bytes: 1)
    assert bytes_per_token(code, functions) > 1.15 * bytes_per_token(broad, functions)
