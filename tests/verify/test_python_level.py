"""The `python` language level: ordinary programs are judged, the wider language's attacks are refused, and the OS
wall holds alone, with the static stage switched off, against every hostile program of the suite and the new ones."""

import json
import os
import socket

import pytest

from glm53.verify.languages import LANGUAGES, PYTHON_ATTRIBUTES, get_language
from glm53.verify.static_check import StaticCheckError, check_source
from glm53.verify.verifier import SandboxPool, probe, verify, verify_many
from glm53.verify.verify_file import verify_file

from .test_verifier import HOSTILE, PWNED, assert_nothing_left_of


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(workers=2) as p:
        yield p


ORDINARY = {
    # name: (source, entry point, cases)
    "join words": ("def f(words):\n    return ' '.join(w.upper() for w in words)\n", "f",
                   [((["a", "bc"],), "A BC"), (([],), "")]),
    "count vowels with a loop": ("def f(s):\n    n = 0\n    for ch in s.lower():\n        if ch in 'aeiou':\n"
                                 "            n += 1\n    return n\n", "f", [(("Hello",), 2), (("",), 0)]),
    "while loop": ("def f(n):\n    total = 0\n    while n > 0:\n        total += n % 10\n        n //= 10\n"
                   "    return total\n", "f", [((123,), 6), ((0,), 0)]),
    "set and sorted": ("def f(xs):\n    return sorted(set(xs))\n", "f", [(([3, 1, 3],), [1, 3])]),
    "dict counting": ("def f(words):\n    counts = {}\n    for w in words:\n        counts[w] = counts.get(w, 0) + 1\n"
                      "    return max(sorted(counts), key=lambda w: counts[w])\n", "f",
                      [((["b", "a", "b"],), "b"), ((["x"],), "x")]),
    "chr and ord": ("def f(s):\n    return ''.join(chr(ord(c) + 1) for c in s)\n", "f", [(("abc",), "bcd")]),
    "isinstance, map, filter": ("def f(xs):\n    return list(map(abs, filter(lambda v: isinstance(v, int), xs)))\n",
                                "f", [(([-1, 2],), [1, 2])]),
    "try and raise": ("def f(s):\n    try:\n        return int(s)\n    except ValueError:\n        return -1\n", "f",
                      [(("12",), 12), (("x",), -1)]),
    "nested def and recursion": ("def f(n):\n    def fact(k):\n        return 1 if k < 2 else k * fact(k - 1)\n"
                                 "    return fact(n)\n", "f", [((5,), 120), ((0,), 1)]),
    "rebinding a builtin name": ("def f(xs):\n    max = xs[0]\n    for x in xs:\n        if x > max:\n"
                                 "            max = x\n    return max\n", "f", [(([1, 5, 2],), 5)]),
    "split and strip": ("def f(text):\n    return [w.strip() for w in text.split(',') if w.strip()]\n", "f",
                        [((" a, b ,,c",), ["a", "b", "c"])]),
    "star expressions": ("def f(a, b):\n    return [*a, *b]\n", "f", [(([1], [2, 3]), [1, 2, 3])]),
    "f-string with a spec": ("def f(n):\n    return f'{n:>4}'\n", "f", [((7,), "   7")]),
}

# Attacks written for the wider language: each must be refused statically at level python.
PYTHON_ATTACKS = {
    "generator frame": "g = (i for i in [x])\nreturn g.gi_frame.f_back",
    "generator code": "g = (i for i in [x])\nreturn g.gi_code",
    "traceback of an exception": "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    return e.__traceback__",
    "with_traceback": "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    return e.with_traceback(None)",
    "exception args are fine but tb_frame is not": "try:\n    1 / 0\nexcept Exception as e:\n    return e.tb_frame",
    "dunder attribute": "return x.__class__",
    "single underscore attribute": "return x._private",
    "method chain to a dunder": "return ''.join.__self__.__class__",
    "format method with a built template": "return ('{0' + '.__class__}').format(x)",
    "format_map": "return '{x}'.format_map({'x': x})",
    "mro": "return int.mro()",
    "attribute store on a builtin type": "list.append = len\nreturn x",
    "attribute delete": "del x.real\nreturn 1",
    "type() to build a lying class": "return type('L', (), {})()",
    "object": "return object()",
    "getattr": "return getattr(x, '__class__')",
    "globals": "return globals()",
    "eval": "return eval('1')",
    "open": "return open('/etc/passwd').read()",
    "print": "print(x)\nreturn x",
    "import": "import os\nreturn 1",
    "__builtins__": "return __builtins__",
    "class": "class A:\n    pass\nreturn 1",
    "yield": "yield x",
    "match class pattern": "match x:\n    case int(real=r):\n        return r",
    "format field in a constant": "return '{0.__class__}'",
    "decorated nested function": "@len\ndef g():\n    return 1\nreturn 1",
    "dunder parameter of a lambda": "return (lambda __x: __x)(1)",
    "dunder exception name": "try:\n    pass\nexcept Exception as __e:\n    pass\nreturn 1",
    "global": "global y\nreturn 1",
    "with": "with x:\n    return 1",
}


def body(text: str, header: str = "def f(x):") -> str:
    return header + "\n" + "\n".join("    " + line for line in text.split("\n")) + "\n"


def test_the_levels_are_named():
    assert LANGUAGES == ("reference", "python", "python-stdlib")
    with pytest.raises(ValueError, match="unknown language level 'py'"):
        get_language("py")
    assert not any(name.startswith("_") for name in PYTHON_ATTRIBUTES)
    reach = ("format", "format_map", "mro", "gi_frame", "tb_frame", "f_back", "with_traceback", "gi_code", "cr_frame",
             "f_globals")
    for forbidden in reach + ("encode",):
        assert forbidden not in PYTHON_ATTRIBUTES
    stdlib = get_language("python-stdlib")  # wider, but never by a name that reaches the interpreter or a module
    assert not any(name.startswith("_") for name in stdlib.attributes) and not set(reach) & stdlib.attributes
    assert not {"os", "sys", "builtins", "subprocess", "importlib", "inspect", "types"} & set(stdlib.modules)
    assert not {"Formatter", "Template", "get_type_hints", "namedtuple", "SystemRandom"} & stdlib.attributes


def test_ordinary_programs_pass_at_level_python_and_are_invalid_at_reference(pool):
    items = [(src, ep, cases) for src, ep, cases in ORDINARY.values()]
    python = verify_many(items, pool=pool, language="python")
    reference = verify_many(items, pool=pool)
    assert {n: v.status for n, v in zip(ORDINARY, python)} == {n: "passed" for n in ORDINARY}, python
    assert sum(v.status == "invalid" for v in reference) >= len(ORDINARY) - 2  # f-strings and sets need no more


@pytest.mark.parametrize("name", list(PYTHON_ATTACKS))
def test_attacks_on_the_wider_language_are_refused_statically(name):
    with pytest.raises(StaticCheckError):
        check_source(body(PYTHON_ATTACKS[name]), "f", language="python")


def test_a_row_or_an_item_names_its_own_level(pool):
    src, ep, cases = ORDINARY["join words"]
    verdicts = verify_many([(src, ep, cases), (src, ep, cases, "python")], pool=pool)
    assert [v.status for v in verdicts] == ["invalid", "passed"]


# Programs of the reference suite's hostile list that are refused there only for the subset's sake: each computes
# x + 1 in ordinary Python (x.real + 1, a lambda, try, a nested def, del, rebinding a name), so it passes here.
LEGITIMATE_AT_PYTHON = {"plain attribute", "lambda", "try", "nonlocal in nested def", "del",
                        "rebinding an allowed builtin", "rebinding the entry point", "parameter shadowing a builtin"}


@pytest.mark.parametrize("level", ["python", "python-stdlib"])  # python-stdlib: the wider level HumanEval needs
def test_every_hostile_program_fails_at_level_python_and_leaves_nothing_behind(level):
    PWNED.unlink(missing_ok=True)
    programs = {**{n: src for n, (src, _) in HOSTILE.items()}, **{n: body(b) for n, b in PYTHON_ATTACKS.items()}}
    programs["spinning loop"] = body("while True:\n    pass")
    programs["loop of forks"] = body("for i in range(10):\n    x += 1\nreturn x + 1 if False else [0] * 10**10")
    with SandboxPool(workers=2) as pool:
        verdicts = verify_many([(src, "f", [((1,), 2), ((-5,), -4), ((0,), 1)]) for src in programs.values()],
                               timeout_s=1.0, pool=pool, language=level)
        scratch = pool.scratch
        assert {n for n, v in zip(programs, verdicts) if v.passed} == LEGITIMATE_AT_PYTHON
        assert sorted(scratch.rglob("*")) == sorted(w.scratch for w in pool._workers if w is not None)  # each empty
    assert not PWNED.exists()
    assert_nothing_left_of(pool.worker_pids)  # its own processes only: the module's pool forks its next on its own


# Raw programs for the OS wall alone: the static stage is off (probe), every builtin and import is available.
# Each tries one harm and returns what happened; the test then checks the harm from outside.
RAW_ATTACKS = '''
def act(what, arg):
    import os, socket, errno, ctypes
    def attempt(fn):
        try:
            fn()
            return "done"
        except OSError as err:
            return errno.errorcode.get(err.errno, str(err.errno))
    if what == "write":
        return attempt(lambda: open(arg, "w").write("escaped"))
    if what == "connect":
        return attempt(lambda: socket.socket().connect(("127.0.0.1", arg)))
    if what == "connect to a unix socket":
        return attempt(lambda: socket.socket(socket.AF_UNIX).connect(arg))
    if what == "read a task file":
        return attempt(lambda: open(arg).read())
    if what == "signal everyone":
        return attempt(lambda: os.kill(-1, 9))
    if what == "signal the caller":
        return attempt(lambda: os.kill(arg, 9))
    if what == "fork in a loop":
        return [attempt(lambda: os.fork()) for _ in range(5)]
    if what == "mutate builtins":
        import builtins
        builtins.len = lambda value: 42
        return builtins.len([])
    if what == "read builtins":
        import builtins
        return builtins.len([1, 2])
    if what == "stash for the next job":
        import sys
        sys.modules["glm53_stash"] = arg
        return "stashed"
    if what == "read the stash":
        import sys
        return repr(sys.modules.get("glm53_stash"))
    if what == "spin":
        while True:
            pass
'''


@pytest.mark.parametrize("skip_seccomp", [False, True])
def test_the_os_wall_holds_with_the_static_stage_off(tmp_path, skip_seccomp):
    if os.geteuid() != 0 and skip_seccomp:
        pytest.skip("without root the program keeps the caller's uid: only seccomp stands between it and the caller")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    target = tmp_path / "escaped.txt"
    os.chmod(tmp_path, 0o777)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"cases": [[[1], 2]]}) + "\n")
    os.chmod(tasks, 0o644)
    unix_path = tmp_path / "host.sock"
    unix_listener = socket.socket(socket.AF_UNIX)
    unix_listener.bind(str(unix_path))
    os.chmod(unix_path, 0o777)
    unix_listener.listen(1)
    unix_listener.settimeout(0.2)
    with SandboxPool(workers=1) as pool:
        if pool.isolation()["level"] != "full":
            pytest.skip(f"OS isolation is not fully available here: {pool.isolation()}")

        def run(what, arg=0):
            return probe(RAW_ATTACKS, "act", [(what, arg)], pool, skip_seccomp=skip_seccomp)[0]

        assert run("write", str(target)) in ("EPERM", "ENOENT")
        assert run("write", "/tmp/glm53-pwned") in ("EPERM", "ENOENT")
        assert run("connect", port) in ("EPERM", "ENETUNREACH")
        # found by review: a task file on disk holds expected values, and a host's unix socket is a path; neither is
        # in the sandbox's root
        assert run("read a task file", str(tasks)) == "ENOENT"
        assert run("connect to a unix socket", str(unix_path)) in ("EPERM", "ENOENT")
        assert run("signal everyone") in ("EPERM", "ESRCH", "done")  # "done": only itself and its init were in reach
        assert run("signal the caller", os.getpid()) in ("EPERM", "ESRCH")
        forks = run("fork in a loop")
        assert all(result in ("EPERM", "EAGAIN") for result in forks), forks
        assert run("mutate builtins") == 42 and run("read builtins") == 2  # one job's mutation dies with it
        assert run("stash for the next job", "SECRET") == "stashed" and run("read the stash") == "None"
        verdict = verify("def f(x):\n    return x + 1\n", "f", [((1,), 2)], pool=pool)
        assert verdict.passed  # the pool goes on
    for server in (listener, unix_listener):
        with pytest.raises(socket.timeout):
            server.accept()
        server.close()
    assert not target.exists() and not PWNED.exists()
    assert_nothing_left_of(pool.worker_pids)


def test_glm53_verify_takes_a_language_for_the_whole_file_and_rows_may_name_theirs(tmp_path, pool):
    src, ep, cases = ORDINARY["count vowels with a loop"]
    prompt, completion = src.split("\n", 1)
    row = {"prompt": prompt + "\n", "completion": completion, "entry_point": ep,
           "cases": [[list(a), e] for a, e in cases]}
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(row) + "\n" + json.dumps({**row, "language": "python"}) + "\n")
    assert verify_file(rows, tmp_path / "default.jsonl", pool=pool) == {"invalid": 1, "passed": 1}
    assert verify_file(rows, tmp_path / "python.jsonl", pool=pool, language="python") == {"passed": 2}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**row, "language": "ruby"}) + "\n")
    with pytest.raises(ValueError, match="bad.jsonl:1: unknown language level 'ruby'"):
        verify_file(bad, tmp_path / "never.jsonl", pool=pool)
    assert not (tmp_path / "never.jsonl").exists()
    conflicting = tmp_path / "conflict.jsonl"
    conflicting.write_text(json.dumps({**row, "language": "reference"}) + "\n")
    with pytest.raises(ValueError, match="names language 'reference' but --language python"):
        verify_file(conflicting, tmp_path / "never.jsonl", pool=pool, language="python")


def test_no_plain_function_of_a_class_is_in_reach_at_the_stdlib_level():
    """A Python class's plain functions take any first argument: `Counter.copy(int)` is `type`, from which a program
    builds an object equal to everything. At python-stdlib a program gets module views whose classes are functions
    that make them; walking every allowed attribute name from everything it can name (and from values of each kind
    it can make) reaches no class and no function of a class, but bound methods."""
    import types

    from glm53.verify.candidate_builtins import candidate_builtins

    level = get_language("python-stdlib")
    table = candidate_builtins(sorted(level.builtins), {m: sorted(n) for m, n in level.modules.items()})
    view = table["__import__"]
    collections, rand, regex, hashes = (view(m) for m in ("collections", "random", "re", "hashlib"))
    made = [collections.Counter("ab"), collections.deque([1]), collections.OrderedDict(a=1),
            collections.defaultdict(int), rand.Random(1), regex.compile("a"), regex.match("a", "a"), hashes.md5(b"x"),
            1, 1.5, "s", b"b", [1], (1,), {1: 2}, {1}, frozenset(), True, None]
    frontier = [view(m) for m in level.modules] + [v for k, v in table.items() if k != "__import__"] + made
    seen, found = set(), []
    for _ in range(4):
        reached = []
        for obj in frontier:
            for name in level.attributes:
                try:
                    value = getattr(obj, name)
                except Exception:  # noqa: BLE001 - an attribute the object does not have
                    continue
                if id(value) not in seen:
                    seen.add(id(value))
                    reached.append(value)
                    if isinstance(value, type) or (isinstance(value, types.FunctionType) and "." in value.__qualname__):
                        found.append(f"{obj!r}.{name} -> {value!r}")
        frontier = reached
    assert found == []
    with pytest.raises(AttributeError):
        collections.Counter.copy  # noqa: B018 - the class is not given, only a function that makes one
    with pytest.raises(AttributeError):
        view("typing").Counter  # noqa: B018 - a module view holds its listed names only
