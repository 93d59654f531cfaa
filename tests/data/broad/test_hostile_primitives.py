"""Red team: hostile primitive files are refused with one line naming the file, and none of their code runs.

Every payload tries to leave a canary (touch a marker file, or set an environment variable); the tests assert
the canary never appears. A template is judged as a model's program is: the verifier's static check at the
`python` level, its examples in the verifier's sandbox, and only then this process, with restricted builtins.
"""

import json
import os
import time

import pytest

from glm53.cli import main
from glm53.data.broad import EXAMPLE, RegistryError, load_registry
from glm53.data.broad.primitive import Primitive
from glm53.data.broad.task_draw import check_by_exec

ENV = "GLM53_HOSTILE_CANARY"
TOUCH = "__import__('os').system('touch MARK')"  # MARK: the marker file's path
GEN_FRAME = "[g.gi_frame.f_builtins['__import__']('os').system('touch MARK') for g in [(w for w in [0])]][0]"

# name -> the primitive's fields that differ from a harmless `triple`; each must be refused
HOSTILE = {
    # the reported exploit, and other ways through a frame, a class or a traceback
    "generator frame builtins": {"expr": GEN_FRAME + " * 0 + {a}"},
    "generator frame globals": {"expr": "[g.gi_frame.f_back.f_globals['os'].system('touch MARK') "
                                        "for g in [(w for w in [0])]][0] * 0 + {a}"},
    "frame of a generator in a comprehension": {
        "expr": "[f.f_globals['__builtins__']['__import__']('os').system('touch MARK') "
                "for f in [(w for w in [0]).gi_frame]][0] * 0 + {a}"},
    "__mro__ and __subclasses__": {
        "expr": "[c for c in ().__class__.__mro__[1].__subclasses__() if c.__name__ == 'Popen'][0]"
                "(['touch', 'MARK']) and {a}"},
    "__init__.__globals__ of a subclass": {
        "expr": "[c for c in {a}.__class__.__base__.__subclasses__() if 'wrap_close' in str(c)][0]"
                ".__init__.__globals__['system']('touch MARK') * 0 + {a}"},
    "getattr with built names": {
        "expr": "getattr(getattr(__builtins__, '__imp' + 'ort__')('os'), 'sys' + 'tem')('touch MARK') * 0 + {a}"},
    "f-string calling __import__": {"expr": "len(f'{{" + TOUCH.replace("'", '"') + "}}') * 0 + {a}"},
    "str.format walking attributes": {"expr": "len('{{0.__class__.__init__.__globals__}}'.format({a})) * 0 + {a}"},
    "format field in a constant": {"expr": "len('{{0.gi_frame.f_globals}}') * 0 + {a}"},
    "__import__": {"expr": TOUCH + " * 0 + {a}"},
    "lambda default": {"expr": "(lambda os=__import__('os'): os.system('touch MARK'))() * 0 + {a}"},
    "walrus and a frame": {"expr": "[(g := (w for w in [0])), g.gi_frame.f_back.f_globals['os']"
                                   ".system('touch MARK')][1] * 0 + {a}"},
    "vars()": {"expr": "vars()['__builtins__']['__import__']('os').system('touch MARK') * 0 + {a}"},
    "globals()": {"expr": "globals()['os'].system('touch MARK') * 0 + {a}"},
    "breakpoint()": {"expr": "(breakpoint(), {a})[1]"},
    "open()": {"expr": "open('MARK', 'w').write('x') * 0 + {a}"},
    "eval()": {"expr": "eval(\"" + TOUCH + "\") * 0 + {a}"},
    "type() builds a class": {"expr": "type('X', (), {{'y': " + TOUCH + "}}) and {a}"},
    "full-width letters spelling eval": {"expr": "ｅｖａｌ(\"" + TOUCH + "\") * 0 + {a}"},
    "full-width letters in a dunder": {"expr": "().__ｃｌａｓｓ__.__ｍｒｏ__ and {a}"},
    "environment variable": {"expr": f"__import__('os').environ.setdefault('{ENV}', '1') and {{a}}"},
    # the other code fields
    "requires": {"requires": TOUCH + " == 0"},
    "requires through a generator frame": {"requires": GEN_FRAME + " == 0"},
    "block": {"block": "{out} = " + TOUCH + " * 0 + {a}\n"},
    "block with a decorator": {"block": "@(lambda f: " + TOUCH + ")\ndef g():\n    pass\n{out} = {a} * 3\n"},
    "block with a traceback frame": {
        "block": "try:\n    {out} = 1 // 0\nexcept ZeroDivisionError as e:\n"
                 "    e.__traceback__.tb_frame.f_back.f_globals['os'].system('touch MARK')\n{out} = {a} * 3\n"},
    "block with import": {"block": "import os\nos.system('touch MARK')\n{out} = {a} * 3\n"},
    "block with a class": {"block": "class K:\n    x = " + TOUCH + "\n{out} = {a} * 3\n"},
    "block with global": {"block": "global os\n{out} = {a} * 3\n"},
    "out name used as an attribute": {
        "block": "{out} = (w for w in [0]).{out}.f_back.f_globals['os'].system('touch MARK')\n{out} = {a} * 3\n",
        "out": ["gi_frame"]},
    "out name is a keyword": {"block": "{out} = {a} * 3\n", "out": ["import"]},
    # the template slots themselves: str.format features that would write text no check has seen
    "format spec in a slot": {"expr": "{a:{a}} * 3"},
    "conversion in a slot": {"expr": "{a!r} and {a} * 3"},
    "attribute in a slot": {"expr": "{a.__class__} and {a} * 3"},
    "item in a slot": {"expr": "{a[__builtins__]} and {a} * 3"},
    "format spec in a phrasing": {"phrasings": ["{a:>999999999}", "{a} tripled", "the triple of {a}"]},
    # resource exhaustion: too long or too deep for the checks, or slow / greedy on the examples (sandbox)
    "very long template": {"expr": "{a} * 3" + " + 0" * 2000},
    "very deep template": {"expr": "-" * 4000 + "-{a} * 3"},
    "9**9**9": {"expr": "9**9**9 * 0 + {a} * 3"},
    "huge range": {"expr": "sum(range(10**12)) * 0 + {a} * 3"},
    "huge list": {"expr": "len([0] * 10**10) * 0 + {a} * 3"},
    "huge string": {"expr": "len(''.center(10**10)) * 0 + {a} * 3"},
    "spinning block": {"block": "{out} = {a} * 3\nwhile True:\n    {out} += 0\n"},
    "slow requires": {"requires": "sum(range(10**12)) >= 0"},
}


def primitive_file(tmp_path, fields: dict) -> tuple:
    """(path of a TOML file holding one primitive with `fields`, marker path its payload would create)."""
    marker = tmp_path / "marker"
    table = {"name": "triple", "result": "int", "expr": "{a} * 3",
             "phrasings": ["three times {a}", "{a} tripled", "the triple of {a}"], "examples": [[[2], 6]], **fields}

    def toml(value):  # JSON strings, lists and numbers are TOML too (non-ASCII written as is)
        value = value.replace("MARK", str(marker)) if isinstance(value, str) else value
        return json.dumps(value, ensure_ascii=False)

    lines = ["[[primitive]]", 'args = { a = "int" }'] + [f"{key} = {toml(value)}" for key, value in table.items()]
    path = tmp_path / "hostile.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, marker


@pytest.fixture(autouse=True)
def no_canary():
    os.environ.pop(ENV, None)
    yield
    assert ENV not in os.environ, "a hostile template ran in this process"


def test_the_canary_fires_when_the_payload_runs(tmp_path):
    """The canary is live: the reported exploit, run as it was before (full builtins), does touch the marker."""
    marker = tmp_path / "marker"
    exec("def _f(a):\n    return " + GEN_FRAME.replace("MARK", str(marker)) + " * 0 + a\n_f(2)", {})
    assert marker.exists()


def test_a_frame_walk_without_underscores_is_refused_by_the_verifiers_static_check(tmp_path):
    """The reported exploit's way in: no underscore in its attribute names, so the template rules of old let it
    through; the verifier's allow-list of attributes stops it."""
    path, _ = primitive_file(tmp_path, {"expr": "[g.gi_frame.f_back for g in [(w for w in [0])]][0] and {a}"})
    with pytest.raises(RegistryError, match=r"hostile.toml: primitive 'triple': expr is refused by the verifier's "
                                            r"static check \(attribute: attribute '(gi_frame|f_back)'"):
        load_registry(extra=path)


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_file_is_refused_and_runs_nothing(tmp_path, name):
    path, marker = primitive_file(tmp_path, HOSTILE[name])
    start = time.monotonic()
    with pytest.raises(RegistryError) as err:
        load_registry(extra=path)
    assert time.monotonic() - start < 30  # refused, not run to exhaustion in this process
    assert "\n" not in str(err.value) and str(path) in str(err.value)
    assert not marker.exists()


@pytest.mark.parametrize("name", HOSTILE)
def test_tasks_export_refuses_a_hostile_file_in_one_line(tmp_path, capsys, name):
    path, marker = primitive_file(tmp_path, HOSTILE[name])
    out = tmp_path / "tasks.jsonl"
    argv = ["tasks", "export", "--suite", "broad", "--split", "dev", "--count", "2", "--primitives", str(path),
            "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err, err
    assert not marker.exists() and not out.exists()


def test_a_hostile_file_after_a_good_one_is_refused(tmp_path):
    path, marker = primitive_file(tmp_path, HOSTILE["generator frame builtins"])
    with pytest.raises(RegistryError, match="hostile.toml"):
        load_registry(extra=[EXAMPLE, path])
    assert not marker.exists()


@pytest.mark.parametrize("form", ["expr", "block", "requires"])
def test_a_template_past_the_checks_finds_no_host_builtins(tmp_path, form):
    """Second layer: even code that got past the static checks runs with the template builtins only."""
    marker = tmp_path / "marker"
    payload = TOUCH.replace("MARK", str(marker))
    templates = {"expr": "{a} * 3", form: {"expr": payload, "block": "{out} = " + payload,
                                           "requires": payload}[form]}
    prim = Primitive("triple", (("a", "int"),), "int", phrasings=("three times {a}",), **templates)
    function = {"expr": prim.function, "block": prim.block_function, "requires": prim.precondition}[form]
    with pytest.raises(NameError, match="__import__"):
        function(2)
    assert not marker.exists()


def test_reference_bodies_are_judged_like_a_models_program(tmp_path):
    marker = tmp_path / "marker"
    hostile = "def f(a):\n    return " + TOUCH.replace("MARK", str(marker)) + "\n"
    assert "refused by the verifier's static check" in check_by_exec(hostile, "f", [((1,), 0)])
    # a name the static check lets through but the python level does not give a program
    assert check_by_exec("def f(a):\n    return callable(a)\n", "f", [((1,), False)]) == "raises NameError on (1,)"
    assert check_by_exec("def f(a):\n    return a * 3\n", "f", [((2,), 6)]) is None
    assert not marker.exists()
