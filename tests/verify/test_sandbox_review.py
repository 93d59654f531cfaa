"""The sandbox's findings of the security review of issue 62, one test each (each failed on the code before it):
a caller that ignores and blocks SIGPROF lost every program's CPU deadline, and the workers of one pool shared one
scratch folder, so unprivileged a flood of names on one lane crashed correct programs on another."""

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path


from glm53.verify.verifier import SandboxPool
from .unprivileged import run_unprivileged

ROOT = Path(__file__).resolve().parents[2]

SIGNALS_IGNORED_RUN = '''
import json, signal
from glm53.verify.verifier import SandboxPool, probe, verify
# what a caller may do (a profiler turned off, a framework's signal mask): inherited through fork and exec
for signum in (signal.SIGPROF, signal.SIGXCPU):
    signal.signal(signum, signal.SIG_IGN)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPROF, signal.SIGXCPU})
SEEN = """
def act():
    import ctypes, signal
    libc = ctypes.CDLL(None, use_errno=True)
    handlers = []
    for signum in (signal.SIGPROF, signal.SIGXCPU):
        action = ctypes.create_string_buffer(256)  # struct sigaction: the handler is its first field
        libc.sigaction(signum, None, action)
        handlers.append(ctypes.c_void_p.from_buffer(action).value or 0)  # 0: SIG_DFL, 1: SIG_IGN
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    return [handlers, [int(s) for s in (signal.SIGPROF, signal.SIGXCPU) if s in blocked]]
"""
with SandboxPool(workers=1) as pool:
    seen = probe(SEEN, "act", [()], pool)[0]
    spin = verify("def f(x):\\n    while True:\\n        pass\\n", "f", [((1,), 1)], pool=pool, language="python",
                  timeout_s=60.0)
print(json.dumps({"seen": seen, "status": spin.status, "message": spin.message}))
'''


def test_a_caller_that_ignores_and_blocks_sigprof_does_not_lose_the_cpu_deadline():
    """The program's process has SIGPROF and SIGXCPU at their default action and unblocked, and the spinning
    program ends by the CPU timer's SIGPROF (at `cpu_s`), not by the RLIMIT_CPU backstop (2-3 s of CPU) or the
    wall clock. No assertion on time: the signal that ended it says which limit did."""
    result = subprocess.run([sys.executable, "-c", SIGNALS_IGNORED_RUN], cwd=ROOT, capture_output=True, text=True,
                            timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["seen"] == [[0, 0], []], out  # default handlers, nothing blocked
    assert out["status"] == "timeout", out
    assert out["message"].startswith("CPU-time limit") and f"(signal {int(signal.SIGPROF)})" in out["message"], out


def test_each_worker_of_a_pool_has_a_private_scratch_folder_removed_with_it():
    pool = SandboxPool(workers=2)
    try:
        folders = [pool._worker(i).scratch for i in range(2)]
        assert folders[0] != folders[1]
        for folder in folders:
            assert folder.parent == pool.scratch and stat.S_IMODE(folder.stat().st_mode) == 0o700
        pool._replace(0)  # a worker replaced takes its folder with it
        assert not folders[0].exists() and folders[1].exists()
    finally:
        pool.close()
    assert not pool.scratch.exists()


FLOOD_RUN = '''
import json, threading, time
from glm53.verify.verifier import SandboxPool, probe, verify
FLOOD = """
def act(seconds):
    import os, time
    end, n = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        try:
            os.mkdir("/scratch/flood-%d" % n)
            n += 1
        except OSError:
            pass
    return n
"""
CORRECT = "def f(x):\\n    return x + 1\\n"
out = {}
with SandboxPool(workers=2) as pool:
    out["report"] = pool.isolation()
    made, statuses = [], []
    flood = threading.Thread(target=lambda: made.append(probe(FLOOD, "act", [(2.0,)], pool, skip_seccomp=True)[0]))
    flood.start()
    time.sleep(0.3)
    while flood.is_alive() or len(statuses) < 8:
        statuses.append(verify(CORRECT, "f", [((1,), 2), ((5,), 6)], pool=pool, timeout_s=30.0).status)
    flood.join()
    out.update(made=made, statuses=statuses)
print(json.dumps(out))
'''


def test_unprivileged_a_flood_of_names_on_one_lane_does_not_crash_another_lanes_programs():
    """As a user without root, seccomp off for the flooding program only: its lane makes names in its scratch
    folder for 2 s while the other lane judges correct programs. With one folder for the pool, the other lane's
    worker met the flood's names when it emptied the folder after a job (5 of 8 crashed in the review)."""
    out = run_unprivileged(FLOOD_RUN)
    assert out["made"][0] > 0, out["made"]  # the flood did run
    assert set(out["statuses"]) == {"passed"}, out["statuses"]


def test_a_forked_child_that_closes_the_default_pool_leaves_the_parents_alone():
    """A sweep's job process closes its default pool as it ends; forked (not from the fork server), its copy of the
    parent's pool must neither kill the parent's workers nor remove the parent's scratch folder, and a default pool
    it asks for is its own."""
    import multiprocessing

    from glm53.verify import verifier

    pool = verifier.default_pool()
    assert verifier.verify("def f(x):\n    return x\n", "f", [((1,), 1)]).passed
    child = multiprocessing.get_context("fork").Process(target=verifier.close_default_pool)
    child.start()
    child.join()
    assert child.exitcode == 0 and pool.scratch.is_dir() and not pool._closed
    assert verifier.verify("def f(x):\n    return x\n", "f", [((1,), 1)]).passed
