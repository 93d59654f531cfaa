"""The verifier against canonical solutions, lookup tables and a suite of hostile programs."""

import os
import time
from pathlib import Path

import pytest

from glm53.verify.rewards import binary_reward, partial_reward, reward
from glm53.verify.static_check import check_source, StaticCheckError
from glm53.data.tasks import FAMILIES, frozen_tasks
from glm53.verify import verifier as verifier_module
from glm53.verify.verifier import SandboxPool, Verdict, same_value, verify, verify_many

CASES = [((1,), 2), ((-5,), -4), ((0,), 1)]  # f = increment
PWNED = Path("/tmp/glm53-pwned")


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(workers=2) as p:
        yield p


def f(body: str, header: str = "def f(x):") -> str:
    return header + "\n" + "\n".join("    " + line for line in body.split("\n")) + "\n"


HOSTILE = {
    # (source, expected status or set of statuses)
    "infinite loop": (f("while True:\n    pass"), "invalid"),
    "for loop": (f("for i in range(3):\n    x += i\nreturn x"), "invalid"),
    "huge power": (f("return 10**10**10"), {"timeout", "memory"}),
    "huge list": (f("return [0] * 10**11"), "memory"),
    "huge string": (f("return 'a' * 10**10"), "memory"),
    "sum of a huge range": (f("return sum(range(10**13))"), "timeout"),
    "sorted huge range": (f("return sorted(range(10**9))"), {"memory", "timeout"}),
    "comprehension bomb": (f("return len([[0] * 10**6 for _ in range(10**6)])"), {"memory", "timeout"}),
    "format width bomb": (f("return f'{x:{10**10}}'"), {"memory", "timeout", "failed"}),
    "import os": (f("import os\nreturn os.system('touch /tmp/glm53-pwned')"), "invalid"),
    "from import": (f("from os import system\nreturn 1"), "invalid"),
    "dunder import": (f("return __import__('os')"), "invalid"),
    "open a file": (f("return open('/tmp/glm53-pwned', 'w')"), "invalid"),
    "os._exit": (f("return os._exit(0)"), "invalid"),
    "raise SystemExit": (f("raise SystemExit(0)"), "invalid"),
    "exit()": (f("return exit(0)"), "invalid"),
    "eval": (f("return eval('x + 1')"), "invalid"),
    "exec": (f("exec('x = 1')\nreturn x"), "invalid"),
    "globals": (f("return globals()"), "invalid"),
    "vars": (f("return vars()"), "invalid"),
    "input": (f("return input()"), "invalid"),
    "breakpoint": (f("return breakpoint()"), "invalid"),
    "attribute escape": (f("return ().__class__.__bases__[0].__subclasses__()"), "invalid"),
    "plain attribute": (f("return x.real + 1"), "invalid"),
    "recursion": (f("return f(x)"), "invalid"),
    "lying __eq__ class": ("class L:\n    def __eq__(self, o):\n        return True\n" + f("return L()"), "invalid"),
    "lambda": (f("return (lambda: x + 1)()"), "invalid"),
    "try": (f("try:\n    return x + 1\nexcept Exception:\n    return 0"), "invalid"),
    "with": (f("with x:\n    return 1"), "invalid"),
    "global": (f("global y\nreturn x + 1"), "invalid"),
    "nonlocal in nested def": (f("def g():\n    return x\nreturn g() + 1"), "invalid"),
    "del": (f("y = x\ndel y\nreturn x + 1"), "invalid"),
    "yield": (f("yield x + 1"), "invalid"),
    "async def": ("async def f(x):\n    return x + 1\n", "invalid"),
    "decorator": ("@sum\ndef f(x):\n    return x + 1\n", "invalid"),
    "default evaluated at def time": ("def f(x, y=10**10**10):\n    return x + 1\n", "invalid"),
    "annotation evaluated at def time": ("def f(x: 10**10**10):\n    return x + 1\n", "invalid"),
    "star args": ("def f(*x):\n    return 1\n", "invalid"),
    "code after the function": (f("return x + 1") + "print('hi')\n", "invalid"),
    "second definition shadows": (f("return x + 1") + f("return 0"), "invalid"),
    "unicode look-alike name": (f("return x + 1", header="def f\u0430(x):"), "invalid"),
    "null byte": (f("return x + 1") + "\x00", "invalid"),
    "oversized source": (f("return x + 1" + " + 0" * 2000), "invalid"),
    "parser depth bomb": (f("return " + "(" * 300 + "x" + ")" * 300 + " + 1"), "invalid"),
    "deep list bomb": (f("return " + "[" * 120 + "]" * 120), {"failed", "invalid"}),
    "syntax error": (f("return x +"), "invalid"),
    "top-level expression": ("1/0\n", "invalid"),
    "int to str limit": (f("return len(str(10**5000))"), "failed"),
    "division by zero": (f("return divmod(x, 0)"), "failed"),
    "bool instead of int": (f("return True"), "failed"),
    "float instead of int": (f("return x + 1.0"), "failed"),
    "returns None": (f("y = x + 1"), "failed"),
    "assert": (f("assert False\nreturn x + 1"), "invalid"),
    # the cross-job leak's first step: a class pattern fetching a bound method of an allowed value
    "match class pattern": (f("match str(x):\n    case str(format=fmt):\n        return fmt('{0}', x)"), "invalid"),
    "match reaching dunders": (f("match x:\n    case int(__class__=c):\n        return c"), "invalid"),
    "format field walking attributes": (f("return '{0.__class__}'"), "invalid"),
    "format field walking items": (f("return '{0[0]}'"), "invalid"),
    "rebinding an allowed builtin": (f("len = sum\nreturn len([x, 1])"), "invalid"),
    "walrus on a builtin": (f("return (max := min)(x, 1)"), "invalid"),
    "comprehension target shadows a builtin": (f("return [len for len in range(x)]"), "invalid"),
    "rebinding the entry point": (f("f = abs\nreturn x + 1"), "invalid"),
    "recursion through a key function": (f("return sorted([x], key=f)"), "invalid"),
    "parameter shadowing a builtin": ("def f(sum):\n    return sum + 1\n", "invalid"),
}


# this checkout's worker: another checkout's sweep or test run on the same machine has workers of its own
SANDBOX_WORKER = str(Path(verifier_module.__file__).with_name("sandbox_worker.py")).encode()


def _sandbox_sessions() -> dict[int, int]:
    """{pid: session id} of this checkout's sandbox processes: workers and every process they forked (which share
    the worker's command line). A worker leads its own session; its template and programs stay in it."""
    sessions = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if SANDBOX_WORKER in Path(f"/proc/{pid}/cmdline").read_bytes():
                    stat = Path(f"/proc/{pid}/stat").read_text()
                    sessions[int(pid)] = int(stat[stat.rindex(")") + 2:].split()[3])  # state, ppid, pgrp, session
            except (OSError, ValueError, IndexError):
                pass  # ended while being read
    return sessions


def _sandbox_pids() -> set[int]:
    return set(_sandbox_sessions())


def _processes_of(sessions) -> set[int]:
    return {pid for pid, session in _sandbox_sessions().items() if session in set(sessions)}


def assert_nothing_left_of(sessions, message: str = "a sandbox process was left behind") -> None:
    """No process of these sessions (a pool's `worker_pids`, or sessions that began during a test) is alive. Only
    the tested pool's own processes count: another pool (a module's shared one) forks its next warm process after
    replying, which a before/after snapshot of all sandbox processes would count as left behind. SIGKILL is
    delivered at once, but a killed process takes a moment to tear down (a memory hog's pages are freed first), so
    this waits up to 5 s; a process that escaped the kill would still be there after it."""
    sessions = set(sessions)
    deadline = time.monotonic() + 5.0
    while _processes_of(sessions) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _processes_of(sessions), message


def new_sessions(before: dict[int, int]) -> set[int]:
    """Sessions of sandbox processes alive now that none of `before`'s processes belonged to: the pools started
    since (by this process or a child). A pool that was alive before forks into its old session and is not counted."""
    old = set(before.values())
    return {session for session in _sandbox_sessions().values() if session not in old}


def test_every_hostile_program_gets_a_non_pass_verdict_in_time_and_leaves_nothing_behind(tmp_path):
    PWNED.unlink(missing_ok=True)
    names = list(HOSTILE)
    with SandboxPool(workers=2) as pool:
        scratch = pool.scratch
        started = time.monotonic()
        verdicts = verify_many([(HOSTILE[n][0], "f", CASES) for n in names], timeout_s=1.0, pool=pool)
        elapsed = time.monotonic() - started
        for name, verdict in zip(names, verdicts):
            expected = HOSTILE[name][1]
            expected = {expected} if isinstance(expected, str) else expected
            assert verdict.status in expected, f"{name}: {verdict}"
            assert not verdict.passed
        # the caller goes on: the same pool still judges a correct program correctly
        assert verify(f("return x + 1"), "f", CASES, pool=pool).passed
        # nothing but each live worker's own scratch folder, empty
        assert sorted(scratch.rglob("*")) == sorted(w.scratch for w in pool._workers if w is not None), \
            "a program wrote into the scratch directory"
    assert elapsed < 1.0 * len(names) / 2 + 30
    assert not PWNED.exists()
    assert not scratch.exists()
    assert_nothing_left_of(pool.worker_pids)


def test_canonical_solutions_pass_and_public_example_lookup_tables_fail(pool):
    items = []
    for family in FAMILIES:
        for task in frozen_tasks("confirm", 2, family.name):
            items.append((task.prompt + task.canonical_completion, task.entry_point, task.cases))
            table = "".join(f"    if {family.arg} == {args[0]!r}:\n        return {expected!r}\n"
                            for args, expected in family.public_examples)
            items.append((task.prompt + "\n" + table + f"    return {family.arg}\n", task.entry_point, task.cases))
    verdicts = verify_many(items, pool=pool)
    assert all(v.status == "passed" for v in verdicts[0::2]), [v for v in verdicts[0::2] if not v.passed]
    assert all(v.status == "failed" for v in verdicts[1::2])


def test_type_strict_equality():
    assert same_value(1, 1) and not same_value(1, True) and not same_value(1, 1.0)
    assert not same_value([1, 2], [1, True]) and same_value([1, [2]], [1, [2]])
    assert not same_value((1,), [1])


@pytest.mark.parametrize("actual, expected, equal", [
    ({True: "v"}, {1: "v"}, False),
    ({2.0: "v"}, {2: "v"}, False),
    ({(1, True): 0}, {(1, 1): 0}, False),
    ({1: True}, {1: 1}, False),
    ({1: [2], "a": (3,)}, {"a": (3,), 1: [2]}, True),
    ({1: 0}, {1: 0, 2: 0}, False),
])
def test_type_strict_equality_reaches_dict_keys(actual, expected, equal):
    assert same_value(actual, expected) is equal


def test_a_dict_with_lookalike_keys_fails_in_the_sandbox(pool):
    assert verify(f("return {True: x}"), "f", [((1,), {1: 1})], pool=pool).status == "failed"
    assert verify(f("return {1: x}"), "f", [((1,), {1: 1})], pool=pool).passed


def test_no_cases_is_an_error_not_a_pass(pool):
    with pytest.raises(ValueError, match="no test cases"):
        verify(f("return x"), "f", [], pool=pool)


def test_the_static_check_is_bounded():
    with pytest.raises(StaticCheckError) as err:
        check_source(f("return x + 1"), "f", time_budget_s=0.0)
    assert err.value.rule == "time"
    many_nodes = f("return [" + ",".join(["x"] * 1600) + "]")
    assert len(many_nodes.encode()) <= 4096
    with pytest.raises(StaticCheckError) as err:
        check_source(many_nodes, "f")
    assert err.value.rule == "size"


def test_static_rules_are_named():
    with pytest.raises(StaticCheckError) as err:
        check_source(f("import os\nreturn 1"), "f")
    assert err.value.rule == "import"
    with pytest.raises(StaticCheckError) as err:
        check_source(f("return x + 1"), "g")
    assert err.value.rule == "name"
    check_source('"""docstring"""\n' + f('"""inner docstring"""\nreturn sorted([x, 1])[0]'), "f")


def test_rewards_from_verdicts():
    passed, wrong, invalid = Verdict("passed", 4, 4), Verdict("failed", 1, 4), Verdict("invalid", 0, 4)
    assert [binary_reward(v) for v in (passed, wrong, invalid)] == [1.0, 0.0, -0.1]
    assert binary_reward(invalid, invalid_penalty=-1.0) == -1.0
    assert partial_reward(wrong) == 0.25 and partial_reward(passed, exact_bonus=0.5) == 1.5
    assert partial_reward(invalid, invalid_penalty=0.0) == 0.0
    assert reward(Verdict("timeout", 0, 4)) == 0.0
    with pytest.raises(ValueError, match="unknown reward mode"):
        reward(passed, mode="bogus")


def test_a_new_pool_removes_the_scratch_of_a_process_that_ended_without_closing_its_pool():
    """Sweep job processes end by os._exit (no atexit); a killed process closes nothing either."""
    import subprocess
    import sys
    from pathlib import Path

    from glm53.verify.verifier import SandboxPool

    code = ("import os; from glm53.verify.verifier import SandboxPool; "
            "print(SandboxPool(workers=1).scratch, flush=True); os._exit(0)")
    left = Path(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip())
    assert left.is_dir()
    with SandboxPool(workers=1) as pool:
        assert pool.scratch.is_dir() and not left.exists()
    assert not pool.scratch.exists()


def test_the_static_check_raises_no_syntax_warning_for_odd_literals():
    """Python warns (on stderr, in sweep logs) about model programs such as `1if x`; the check keeps quiet."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            check_source("def f(x):\n    return 1if x else 2\n", "f")
        except StaticCheckError:
            pass
    assert not [w for w in caught if issubclass(w.category, SyntaxWarning)]
