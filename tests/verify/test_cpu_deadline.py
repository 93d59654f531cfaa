"""A spinning program costs its own lane only: it ends as `timeout` once it has spent its CPU budget, while the
correct programs beside it pass, on a machine loaded by CPU burners. No assertion on time: the CPU budget is what
ends a spinner (its message says so), and the wall-clock backstop is set far away so that only it could be late."""

import subprocess
import sys

import pytest

from glm53.verify.verifier import DEFAULT_CPU_S, SandboxPool, verify, verify_many

CORRECT = "def f(xs):\n    total = 0\n    for x in xs:\n        total += x * x\n    return total\n"
CASES = [(([1, 2, 3],), 14), (([],), 0), ((list(range(100)),), 328350)]
SPINNING = ("def f(xs):\n    while True:\n        pass\n",
            "def f(xs):\n    n = 0\n    while n >= 0:\n        n += 1\n    return n\n",
            "def f(xs):\n    return [i for i in range(10**12)]\n")


@pytest.fixture
def burners():
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_correct_programs_pass_beside_spinning_ones_under_load(burners):
    sources = [CORRECT] * 12 + list(SPINNING)
    sources = sources[::2] + sources[1::2]  # spinners among the correct ones
    with SandboxPool(workers=2) as pool:
        verdicts = verify_many([(src, "f", CASES) for src in sources], timeout_s=60.0, pool=pool, language="python")
    for src, verdict in zip(sources, verdicts):
        if src == CORRECT:
            assert verdict.status == "passed", verdict
        else:
            assert verdict.status == "timeout" and verdict.message.startswith("CPU-time limit"), verdict


def test_the_cpu_budget_is_the_callers_and_never_above_the_wall_clock_backstop():
    with SandboxPool(workers=1) as pool:
        # a program that needs about 0.3 s of CPU: a timeout under the default budget, a pass under a larger one
        slow = "def f(n):\n    t = 0\n    for i in range(n):\n        t += i\n    return t\n"
        n = 10**7
        assert verify(slow, "f", [((n,), n * (n - 1) // 2)], pool=pool, language="python").status == "timeout"
        assert verify(slow, "f", [((n,), n * (n - 1) // 2)], pool=pool, language="python", cpu_s=30.0,
                      timeout_s=60.0).passed
        with pytest.raises(ValueError, match="cpu_s must be a number of seconds > 0"):
            verify(slow, "f", [((1,), 0)], pool=pool, language="python", cpu_s=0)
    assert DEFAULT_CPU_S == 0.1


def test_a_crash_after_the_exchange_is_not_counted_as_a_timeout():
    """The template kills every program's process after its exchange (SIGKILL); that kill says nothing about the
    program. A reply for the wrong case is a crash, not a timeout."""
    from glm53.verify.verifier import probe

    forged = '''
def act(x):
    import os
    for fd in range(3, 64):  # its result pipe, whichever number it has
        try:
            os.write(fd, b'{"k": 7, "value": 1}\\n')
        except OSError:
            pass
    return x
'''
    with SandboxPool(workers=1) as pool:
        with pytest.raises(RuntimeError, match="probe did not run: crashed: result for case 7"):
            probe(forged, "act", [(1,)], pool)
