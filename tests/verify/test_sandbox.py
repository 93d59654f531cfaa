"""The sandbox's second wall and its plumbing: OS isolation tested act by act with raw code (bypassing the
static stage), no data of one job reachable from another, a pool shared by threads, bounded memory."""

import json
import os
import resource
import threading
import tracemalloc

import pytest

from glm53.verify.isolation import LAYERS, SANDBOX_ID_BASE
from glm53.verify.values import decode
from glm53.verify.verifier import SandboxPool, _job, encode_cases, probe, verify, verify_many
from glm53.verify.verify_file import verify_file

ACT = '''
def act(what):
    import errno, os, socket
    def outcome(fn):
        try:
            fn()
            return "ok"
        except OSError as err:
            return errno.errorcode.get(err.errno, str(err.errno))
    if what == "socket":
        return outcome(lambda: socket.socket())
    if what == "connect":
        return outcome(lambda: socket.socket().connect(("127.0.0.1", 22)))
    if what == "write outside scratch":
        return outcome(lambda: open("/tmp/glm53-sandbox-probe", "w"))
    if what == "execve":
        return outcome(lambda: os.execv("/bin/true", ["true"]))
    if what == "fork":
        return outcome(lambda: os.fork())
    if what == "kill(1)":
        return outcome(lambda: os.kill(1, 0))
    if what == "write into the root":
        return outcome(lambda: open("/glm53-sandbox-probe", "w"))
    if what == "read a host file":
        return outcome(lambda: open("/etc/passwd", "rb").read())
    if what == "read /proc/1/environ":
        return outcome(lambda: open("/proc/1/environ", "rb").read())
    if what == "ptrace":
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return "ok" if libc.ptrace(16, 1, 0, 0) == 0 else errno.errorcode[ctypes.get_errno()]
    if what == "uid":
        return os.getuid()
'''

EVERY_LAYER = {"socket": "EPERM", "connect": "EPERM", "write outside scratch": "EPERM", "execve": "EPERM",
               "fork": "EPERM", "kill(1)": "EPERM", "ptrace": "EPERM", "read /proc/1/environ": "ENOENT",
               "read a host file": "ENOENT", "write into the root": "EPERM"}
# without seccomp the other layers still hold: no network, an empty read-only root (no host file, no /proc), not root
WITHOUT_SECCOMP = {"connect": "ENETUNREACH", "write outside scratch": "ENOENT", "write into the root": "EROFS",
                   "read a host file": "ENOENT", "read /proc/1/environ": "ENOENT", "kill(1)": "EPERM"}


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(workers=2) as p:
        if p.isolation()["level"] != "full":
            pytest.skip(f"OS isolation is not fully available here: {p.isolation()}")
        yield p


def test_isolation_report_names_every_layer(pool):
    report = pool.isolation()
    assert set(report) == set(LAYERS) | {"level"}
    assert report["level"] == "full"


def test_every_forbidden_act_fails_with_its_exact_error(pool):
    acts = list(EVERY_LAYER)
    assert dict(zip(acts, probe(ACT, "act", [(a,) for a in acts], pool))) == EVERY_LAYER


def test_the_namespaces_and_user_drop_hold_without_seccomp(pool):
    acts = list(WITHOUT_SECCOMP)
    assert dict(zip(acts, probe(ACT, "act", [(a,) for a in acts], pool, skip_seccomp=True))) == WITHOUT_SECCOMP
    if os.geteuid() == 0:
        # the program runs under a uid of the template's own, from the sandbox's reserved range (enter_child's
        # test below), and then in a user namespace of its own (its own key ring) that maps no uid: inside, it
        # reads the overflow uid, not root and not the template's
        [uid] = probe(ACT, "act", [("uid",)], pool)
        assert uid == int(open("/proc/sys/kernel/overflowuid").read())


def test_normal_programs_need_nothing_the_filter_denies(pool):
    source = ("def f(x):\n    s = sorted(str(v) for v in range(x))\n"
              "    return [len(s), sum(range(x)), max(s), divmod(x, 3), round(x / 7, 2), {1: 'a'}, f'{x:>5}']\n")
    expected = [10, 45, "9", (3, 1), 1.43, {1: "a"}, "   10"]
    assert verify(source, "f", [((10,), expected)], pool=pool).passed


LEAK_SCAN = '''
def scan(needle_parts, unused):
    import gc, sys
    needle = "".join(needle_parts)
    def holds(value):
        return isinstance(value, str) and value is not needle and needle in value
    found = 0
    for obj in gc.get_objects():
        items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
        try:
            found += sum(holds(v) for v in items)
        except Exception:
            pass
    frame = sys._getframe()
    while frame is not None:
        found += sum(holds(v) for v in frame.f_locals.values())
        frame = frame.f_back
    return found
'''


def _scan(pool, cases):
    """Run LEAK_SCAN on (args, expected) cases in one job; returns what each case found."""
    import builtins

    job = _job(pool.next_id(), LEAK_SCAN, "scan", encode_cases(cases), 10.0, pool.memory_mb)
    job.update(builtins=sorted(dir(builtins)), raw_builtins=True, echo=True)
    return [decode(r["value"]) for r in pool.run_one(job)["values"]]


def test_no_job_can_see_data_of_an_earlier_job_on_the_same_worker():
    with SandboxPool(workers=1) as one:
        secret = "EARLIER-" + os.urandom(8).hex()
        assert verify("def g(x):\n    return x\n", "g", [((secret + "-input",), secret + "-output")],
                      pool=one).status == "failed"
        parts = [secret[:8], secret[8:]]
        # the second case is a positive control: its own argument holds the needle, and the scan finds it
        found = _scan(one, [((parts, "-"), 0), ((parts, secret + "!"), 0)])
        assert found[0] == 0 and found[1] >= 1, found


def test_a_case_cannot_see_other_cases_inputs_or_any_expected_value(pool):
    tag = os.urandom(8).hex()
    later, expected = ["LATER-", tag], ["EXPECTED-", tag]
    found = _scan(pool, [((later, "-"), "EXPECTED-" + tag), ((expected, "-"), "EXPECTED-" + tag),
                         ((later, "LATER-" + tag + "!"), 0)])
    assert found[:2] == [0, 0] and found[2] >= 1, found


def test_the_pool_is_safe_under_threads():
    programs = []
    for i in range(100):
        kind = i % 5
        body = ["return x + {i}", "y = x", "return x - {i}", "import os\nreturn 1", "return divmod(x, 0)"][kind]
        programs.append(("def f(x):\n    " + body.format(i=i).replace("\n", "\n    ") + "\n", "f",
                         [((n,), n + i) for n in range(5)]))
    with SandboxPool(workers=2) as shared:
        sequential = [v.status for v in verify_many(programs, pool=shared)]
        results, errors = {}, {}

        def caller(t):
            try:
                order = programs[t * 25:] + programs[:t * 25]  # each thread in its own order
                got = [v.status for v in verify_many(order, pool=shared)]
                results[t] = got[len(programs) - t * 25:] + got[:len(programs) - t * 25]
            except Exception:  # noqa: BLE001 - reported by the assertion below, with the thread
                import traceback

                errors[t] = traceback.format_exc()

        threads = [threading.Thread(target=caller, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not errors, errors
    assert sequential.count("passed") == 20 and sequential.count("invalid") == 20
    assert all(results[t] == sequential for t in range(4))


def test_a_reply_for_another_job_replaces_the_worker():
    with SandboxPool(workers=1) as one:
        assert verify("def f(x):\n    return x\n", "f", [((1,), 1)], pool=one).passed
        worker = one._workers[0]
        stray = {"id": 999, "source": "def f(x):\n    return x\n", "entry_point": "f", "cases": [],
                 "builtins": [], "timeout_s": 1.0, "memory_mb": 64}
        worker.proc.stdin.write(json.dumps(stray).encode() + b"\n")  # its reply arrives first, under id 999
        verdict = verify("def f(x):\n    return x\n", "f", [((1,), 1)], pool=one)
        assert verdict.status == "crashed" and "replaced" in verdict.message
        assert worker.proc.poll() is not None and one._workers[0] is None
        assert verify("def f(x):\n    return x\n", "f", [((1,), 1)], pool=one).passed


def test_replies_are_verdicts_not_results(pool):
    job = {"id": 7, "source": "def f(x):\n    return 'a' * 900000\n", "entry_point": "f",
           "cases": [[[["int", "0x1"]], ["int", "0x1"]]] * 3, "builtins": [], "timeout_s": 5.0, "memory_mb": 512}
    reply = pool.run_one(job)
    assert reply["status"] == "failed" and len(json.dumps(reply)) < 500


def test_descriptors_above_1024_work():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.skip(f"the descriptor limit here is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (2048, hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        with SandboxPool(workers=1) as one:
            assert verify("def f(x):\n    return x\n", "f", [((1,), 1)], pool=one).passed
            assert one._workers[0].proc.stdout.fileno() > 1024
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_glm53_verify_streams_a_file_in_constant_memory(tmp_path):
    def write_rows(path, n):
        with open(path, "w") as f:
            for i in range(n):
                # one row in 5000 runs in a process; the rest are refused statically, to keep the test fast
                body = "return x + 1" if i % 5000 == 0 else "import os\n    return x"
                f.write(json.dumps({"prompt": "def f(x):\n", "completion": f"    {body}\n", "entry_point": "f",
                                    "cases": [[[i], i + 1]], "row": i}) + "\n")

    peaks = {}
    with SandboxPool(workers=1) as one:
        for n in (2_000, 40_000):
            write_rows(tmp_path / f"in-{n}.jsonl", n)
            tracemalloc.start()
            counts = verify_file(tmp_path / f"in-{n}.jsonl", tmp_path / f"out-{n}.jsonl", pool=one)
            peaks[n] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            assert counts == {"passed": -(-n // 5000), "invalid": n - -(-n // 5000)}
    with open(tmp_path / "out-40000.jsonl") as f:
        rows = [json.loads(line) for line in f]
    assert [r["row"] for r in rows] == list(range(40_000))
    assert rows[5000]["verdict"]["status"] == "passed" and rows[5001]["verdict"]["status"] == "invalid"
    assert (tmp_path / "in-40000.jsonl").stat().st_size > 10 * peaks[40_000]
    assert peaks[40_000] < 2 * peaks[2_000] + (1 << 20), peaks


def test_a_correct_program_passes_a_task_with_200000_cases(pool):
    cases = [((i,), i + 1) for i in range(200_000)]
    verdict = verify("def f(x):\n    return x + 1\n", "f", cases, pool=pool)
    assert verdict.status == "passed" and verdict.passed_cases == 200_000


def test_every_layer_is_on_where_the_machine_offers_them():
    """Guards the skips above: as root on Linux with libseccomp installed, a layer that turns off is a regression
    (the wall's tests would otherwise skip quietly)."""
    import ctypes.util
    import sys

    if sys.platform != "linux" or os.geteuid() != 0 or not ctypes.util.find_library("seccomp"):
        pytest.skip("not root on Linux with libseccomp: some layers are legitimately off here")
    with SandboxPool(workers=1) as one:
        assert one.isolation()["level"] == "full", one.isolation()


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to a program's own user needs root")
def test_a_program_keeps_its_parent_death_signal_after_it_drops_its_user():
    # prctl(2): a change of user clears the parent-death signal; without a PID namespace it is what ends a program
    # whose template died, so enter_child must set it again after the drop
    import ctypes

    from glm53.verify import isolation

    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the forked child reports through the pipe
        try:
            os.close(read)
            isolation.set_parent_death_signal()
            isolation.enter_child(False, SANDBOX_ID_BASE + 4321, os.getppid())
            signal = ctypes.c_int(-1)
            ctypes.CDLL(None, use_errno=True).prctl(2, ctypes.byref(signal), 0, 0, 0)  # PR_GET_PDEATHSIG
            os.write(write, f"{os.getuid()} {signal.value}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as reply:
        uid, signal = reply.read().split()
    os.waitpid(child, 0)
    assert (int(uid), int(signal)) == (SANDBOX_ID_BASE + 4321, 9)


def test_a_program_whose_parent_died_before_it_set_its_death_signal_exits_at_once():
    from glm53.verify import isolation

    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover
        try:
            os.close(read)
            isolation.set_parent_death_signal(parent=os.getppid())  # our parent is alive: go on
            os.write(write, b"alive;")
            isolation.set_parent_death_signal(parent=os.getppid() + 1)  # a parent that is not ours: as if it died
            os.write(write, b"still running")
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as reply:
        assert reply.read() == "alive;"
    os.waitpid(child, 0)
