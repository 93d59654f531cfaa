"""Sandbox worker: runs candidate programs, one fresh process each, and judges their results.

Run as `python -I -S sandbox_worker.py LAYERS` (standard library only, isolated mode, no site packages) with the
scratch directory as its working directory. Three processes, each with one job:

- the worker (this process's main loop) talks to the caller on stdin/stdout, one JSON object a line: a job
  {"id", "source", "entry_point", "cases": [[encoded args, encoded expected], ...], "builtins", "timeout_s",
  "cpu_s", "memory_mb"} in, a verdict {"id", "status", "passed", "total", "message"} out. It holds the expected values
  and compares results as they arrive (type-strict), so each reply is a verdict and nothing piles up.
- the template, forked at start before any job is read, enters the namespaces once (see isolation.py), forks
  the init of its new PID namespace, which then only forks children (each ahead of its job) and kills and reaps
  them when asked. It never sees a job, so a child forked from it holds no data of any job, earlier or current.
- one child per job, forked by the template: own process group, stdin/stdout/stderr on /dev/null, every other
  descriptor closed but its two pipes, an IPC namespace and (as root) a uid of its template's own, resource
  limits (address space, file size 0, processes, core dumps), a timer on its own CPU time (`cpu_s`, SIGPROF;
  RLIMIT_CPU, in whole seconds, only as a backstop), the seccomp filter, then the candidate
  defined with its language level's builtins only. The worker then sends
  it the cases one at a time, each after the previous result came back: while case k runs, nothing in the child
  holds the inputs of other cases, any expected value, or a way to reach the worker or the template.

Results are tagged with their case index and checked in order; anything else from the child (early exit, a
stray line, a result for the wrong case) yields no pass. A program's own CPU time is what ends a spinning one
(`cpu_s`: it costs its lane only that long, however loaded the machine); a wall-clock deadline (`timeout_s`,
generous, so a loaded machine never fails a correct program) covers the whole job as a backstop; the child's
process group is killed by the template before the template reaps it, so a recycled process id can never be hit
(the worker never signals by process id: the child's id is its PID namespace's, not the worker's).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import socket
import sys
import time
import unicodedata  # noqa: F401 - loaded before any fork: the parser imports it for a non-ASCII identifier, and a
# program's process, in an empty root, could not load it then

if __package__:
    from . import isolation
    from .candidate_builtins import candidate_builtins
    from .channels import MAX_LINE_BYTES, LineReader, write_all
    from .values import decode, encode, same_value
else:  # run as a script under -I, which leaves the script's folder off sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import isolation  # noqa: E402
    from candidate_builtins import candidate_builtins  # noqa: E402
    from channels import MAX_LINE_BYTES, LineReader, write_all  # noqa: E402
    from values import decode, encode, same_value  # noqa: E402

# The harness's own cost per case (one round trip: ~20 us measured on a quiet 2-core VM, ~125 us on the same VM
# under a busy host), allowed on top of the program's time limit so that a task with very many cases is not a
# timeout. A typical task (11-20 cases) gains at most 10 ms from it.
CASE_OVERHEAD_S = 5e-4
RECURSION_LIMIT = 500
# A reply longer than this (bytes) beyond twice its expected value's encoding cannot hold an equal value: the harness
# encodes equal values alike (a dict's order and -0.0 aside), so such a line fails its case without being parsed.
# It bounds the worker's decoding by the task's size, not by the 1 MiB line cap (a forged 1 MiB reply cost ~3 s).
REPLY_SLACK_BYTES = 256


# ---------------------------------------------------------------- the child: one candidate, case by case

def _close_all_but(keep: set[int]) -> None:
    low = 3
    for fd in sorted(keep) + [os.sysconf("SC_OPEN_MAX")]:
        if fd > low:
            os.closerange(low, fd)
        low = max(low, fd + 1)


def _send(fd: int, record: dict) -> None:
    data = json.dumps(record).encode() + b"\n"
    if len(data) > MAX_LINE_BYTES:
        data = json.dumps({"k": record.get("k"), "error": "ResultTooLarge"}).encode() + b"\n"
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def serve_cases(reader: LineReader, out_fd: int, source: str, entry_point: str, allowed: list,
                modules: dict | None = None, raw: bool = False) -> None:
    """Define the candidate, then answer one case per line read. Runs after every limit is in place."""
    namespace = {"__builtins__": candidate_builtins(allowed, modules or {}, raw)}
    try:
        exec(compile(source, "<candidate>", "exec"), namespace)
    except MemoryError:
        return _send(out_fd, {"status": "memory", "message": "MemoryError while defining the function"})
    except BaseException as err:  # noqa: BLE001 - any failure to define is an invalid program
        return _send(out_fd, {"status": "invalid", "message": f"{type(err).__name__} while defining the function"})
    fn = namespace.get(entry_point)
    del namespace, source
    if not callable(fn):
        return _send(out_fd, {"status": "invalid", "message": f"{entry_point} is not defined"})
    k = 0
    while (line := reader.readline(None)) is not None:
        args = [decode(a) for a in json.loads(line)]
        del line
        try:
            record = {"k": k, "value": encode(fn(*args))}
        except MemoryError:
            return _send(out_fd, {"status": "memory", "message": f"MemoryError in case {k}"})
        except BaseException as err:  # noqa: BLE001 - a raising case fails; it does not crash the harness
            record = {"k": k, "error": type(err).__name__}
        del args
        _send(out_fd, record)
        k += 1


def child_main(job_fd: int, out_fd: int, devnull: int, setup: isolation.TemplateSetUp, parent: int) -> None:
    try:
        os.setpgid(0, 0)
        isolation.set_parent_death_signal(parent=parent)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        _close_all_but({job_fd, out_fd})
        isolation.enter_child(setup.separate_ipc, setup.uid, parent, setup.own_keys, setup.drop_capabilities)
        seccomp = setup.seccomp
        reader = LineReader(job_fd)
        header = json.loads(reader.readline(None))
        memory = int(header["memory_mb"]) << 20
        cpu_s = float(header["cpu_s"])
        # RLIMIT_CPU counts whole seconds: a backstop (SIGKILL at the hard limit) for a program that would catch
        # the CPU timer's signal; the timer below is what ends a spinning program
        cpu_backstop = int(cpu_s) + 2
        limits = [(resource.RLIMIT_AS, memory, memory), (resource.RLIMIT_CPU, cpu_backstop, cpu_backstop + 1),
                  (resource.RLIMIT_FSIZE, 0, 0), (resource.RLIMIT_CORE, 0, 0), (resource.RLIMIT_NPROC, 0, 0),
                  (resource.RLIMIT_NOFILE, 64, 64)]
        for which, soft, hard in limits:
            try:
                resource.setrlimit(which, (soft, hard))
            except (ValueError, OSError):
                pass
        # the program's own CPU time (user and system) from here on: SIGPROF, whose default action ends the
        # process, once `cpu_s` is spent. Set before seccomp, which refuses setitimer. A caller that ignores or
        # blocks SIGPROF or SIGXCPU passes that on through exec and fork: undone here, or the timer is lost.
        cpu_signals = {signal.SIGPROF, signal.SIGXCPU}
        for signum in cpu_signals:
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, cpu_signals)
        signal.setitimer(signal.ITIMER_PROF, cpu_s)
        if seccomp is not None and not header.get("test_skip_seccomp"):
            seccomp.install()
        sys.setrecursionlimit(RECURSION_LIMIT)
        serve_cases(reader, out_fd, header["source"], header["entry_point"], header["builtins"], header["modules"],
                    header["raw_builtins"])
    except BaseException as err:  # noqa: BLE001
        try:
            _send(out_fd, {"status": "crashed", "message": f"harness: {type(err).__name__}"})
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os._exit(0)


# ---------------------------------------------------------------- the template: isolation once, then forks

def template_main(control: socket.socket, devnull: int, scratch: str, layers: tuple) -> None:
    isolation.set_parent_death_signal()
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    _close_all_but({control.fileno(), devnull})
    setup = isolation.set_up_template(scratch, layers)
    if setup.new_pid_namespace:
        # the namespace's first process is its init: it serves the jobs, and this process only waits for it
        init = os.fork()
        if init != 0:
            control.close()
            os.close(devnull)
            os.waitpid(init, 0)
            os._exit(0)
        isolation.set_parent_death_signal()
    isolation.try_child_steps(setup)
    control.sendall(json.dumps(setup.report).encode() + b"\n")

    def spawn() -> int:
        """Fork the next child ahead of its job (it holds no job data until the worker writes one) and hand the
        worker its two pipes, so a job never waits for a fork."""
        job_read, job_write = os.pipe()
        out_read, out_write = os.pipe()
        parent = os.getpid()
        child = os.fork()
        if child == 0:
            control.close()
            os.close(job_write)
            os.close(out_read)
            child_main(job_read, out_write, devnull, setup, parent)
        os.close(job_read)
        os.close(out_write)
        socket.send_fds(control, [child.to_bytes(4, "little")], [job_write, out_read])
        os.close(job_write)
        os.close(out_read)
        return child

    child = None
    while request := control.recv(1):
        if request == b"R" and child is not None:
            for kill in (os.killpg, os.kill):  # the group, and the child itself if it had not made its group yet
                try:
                    kill(child, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            _, status = os.waitpid(child, 0)
            control.sendall(status.to_bytes(4, "little"))
            child = spawn()
        elif request == b"N" and child is None:
            child = spawn()


# ---------------------------------------------------------------- the worker: jobs in, verdicts out

class Worker:
    def __init__(self, scratch: str, layers: tuple):
        self.control, template_end = socket.socketpair()
        devnull = os.open(os.devnull, os.O_RDWR)
        self.template = os.fork()
        if self.template == 0:
            try:
                self.control.close()
                template_main(template_end, devnull, scratch, layers)
            finally:
                os._exit(0)
        template_end.close()
        os.close(devnull)
        self.scratch = scratch
        self.control_reader = LineReader(self.control.fileno())
        line = self.control_reader.readline(time.monotonic() + 30)
        if line is None:
            raise RuntimeError("the sandbox template process failed to start")
        self.report = json.loads(line)
        # only now ask for the first child: nothing may follow the hello line in the socket while it is read in
        # blocks, or the pipes sent with the next message would be dropped
        self.control.sendall(b"N")
        self.status_pending = False  # a finished job's exit status not read yet (read before the next job)

    def _receive(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.control.recv(size - len(data))
            if not chunk:
                raise ConnectionError("the sandbox template process is gone")
            data += chunk
        return data

    def _take_status(self) -> int:
        """The last child's wait status, which the template sends after every "R" once it reaped the child: then
        no process of that job is left, and the scratch folder is emptied and checked for the next."""
        status = int.from_bytes(self._receive(4), "little")
        self.status_pending = False
        self._empty_scratch()
        return status

    def _empty_scratch(self) -> None:
        """Where a program could write into the scratch folder (unprivileged, it keeps the caller's uid, which owns
        it; no file can have content, RLIMIT_FSIZE is 0, but names and folders can be made), the next job must not
        see it. A folder that cannot be emptied breaks this worker (the pool replaces it)."""
        with os.scandir(self.scratch) as entries:
            left = [entry.path for entry in entries]
        for path in left:
            if os.path.isdir(path) and not os.path.islink(path):
                for folder, _, _ in os.walk(path):  # a folder made unreadable or unwritable by its owner: undone
                    os.chmod(folder, 0o700)
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        if left and os.listdir(self.scratch):
            raise ConnectionError("the scratch folder could not be emptied after a job")

    def run_job(self, job: dict) -> dict:
        if self.status_pending:
            self._take_status()
        message, fds, _, _ = socket.recv_fds(self.control, 4, 2)
        if len(message) != 4 or len(fds) != 2:
            raise ConnectionError("the sandbox template process did not fork a child")
        job_fd, out_fd = fds
        os.set_blocking(job_fd, False)
        budget = float(job["timeout_s"]) + CASE_OVERHEAD_S * len(job["cases"])
        cpu_s = min(float(job.get("cpu_s", job["timeout_s"])), float(job["timeout_s"])) \
            + CASE_OVERHEAD_S * len(job["cases"])
        deadline = time.monotonic() + budget
        outcome = {"status": "crashed", "message": "the program ended without a result"}
        try:
            outcome = self._drive({**job, "timeout_s": budget, "cpu_s": cpu_s}, job_fd, LineReader(out_fd),
                                  deadline)
        except TimeoutError:
            outcome = {"status": "timeout", "message": f"wall-clock limit of {budget:.3g} s"}
        except BrokenPipeError:  # it ended before it read its next case
            outcome = {"status": "crashed", "message": "the program ended without a result", "ended": True}
        except Exception as err:  # noqa: BLE001 - anything the program's process wrote is untrusted: malformed,
            # nested past the recursion limit, of the wrong shape; it costs this job, never the next one's verdict
            outcome = {"status": "crashed", "message": f"bad reply from the program's process: {type(err).__name__}"}
        finally:
            os.close(job_fd)
            os.close(out_fd)
            self.control.sendall(b"R")  # the template kills the child's group, reaps it and forks the next
            self.status_pending = True  # whatever happened above, the template's reply to "R" is owed
        if outcome.get("complete") or outcome["status"] in ("timeout", "invalid", "memory"):
            outcome.pop("complete", None)
            return outcome  # the exit status cannot change this verdict: it is read before the next job
        status = self._take_status()
        signum = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        # SIGPROF (the CPU timer) and SIGXCPU (RLIMIT_CPU's soft limit) come only from the program's own CPU time;
        # SIGKILL is RLIMIT_CPU's hard limit only when the program had already ended, else it is the template's
        # kill after the exchange and says nothing about the program
        if signum in (signal.SIGPROF, signal.SIGXCPU) or (signum == signal.SIGKILL and outcome.pop("ended", False)):
            return {"status": "timeout", "message": f"CPU-time limit of {cpu_s:.3g} s (signal {signum})"}
        outcome.pop("ended", None)
        if signum and signum != signal.SIGKILL:
            return {"status": "crashed", "message": f"killed by signal {signum}"}
        return outcome

    @staticmethod
    def _drive(job: dict, job_fd: int, reader: LineReader, deadline: float) -> dict:
        header = {"source": job["source"], "entry_point": job["entry_point"], "builtins": job["builtins"],
                  "modules": job.get("modules", {}), "raw_builtins": bool(job.get("raw_builtins")),
                  "memory_mb": job["memory_mb"], "cpu_s": job["cpu_s"],
                  "test_skip_seccomp": bool(job.get("test_skip_seccomp"))}
        cases, echo = job["cases"], job.get("echo")
        if not cases:
            return {"status": "crashed", "message": "the job has no cases"}
        passed, first_failure, values = 0, "", []
        prefix = json.dumps(header).encode() + b"\n"  # sent with the first case: one wake-up of the child, not two
        for k, (args, expected) in enumerate(cases):
            write_all(job_fd, prefix + json.dumps(args).encode() + b"\n", deadline)
            prefix = b""
            line = reader.readline(deadline)
            if line is not None and not echo and len(line) > 2 * len(json.dumps(expected)) + REPLY_SLACK_BYTES:
                if not first_failure:
                    first_failure = (f"case {k} replied {len(line)} bytes, more than a value equal to the expected "
                                     "one takes (not decoded)")
                continue
            if line is None:
                return {"status": "crashed", "message": "the program ended without a result", "passed": passed,
                        "ended": True}
            result = json.loads(line)
            if not isinstance(result, dict):
                return {"status": "crashed", "message": "a reply that is not a result record", "passed": passed}
            if "status" in result:  # the harness gave up on the whole program (memory, invalid, crashed)
                return {"status": result["status"] if result["status"] in ("memory", "invalid") else "crashed",
                        "message": str(result.get("message", ""))[:200], "passed": passed}
            if result.get("k") != k:
                return {"status": "crashed", "message": f"result for case {result.get('k')!r}, expected {k}"}
            ok = False
            if "value" in result:
                try:
                    ok = same_value(decode(result["value"]), decode(expected))
                except (ValueError, TypeError, KeyError, IndexError):
                    ok = False
            if echo:
                values.append(result)
            if ok:
                passed += 1
            elif not first_failure:
                first_failure = f"case {k} " + (f"raised {str(result['error'])[:60]}" if "error" in result
                                                 else "returned a wrong value")
        status = "passed" if passed == len(cases) else "failed"
        outcome = {"status": status, "message": first_failure, "passed": passed, "complete": True}
        if echo:
            outcome["values"] = values
        return outcome


def main() -> None:
    layers = tuple(x for x in (sys.argv[1] if len(sys.argv) > 1 else ",".join(isolation.LAYERS)).split(",") if x)
    worker = Worker(os.getcwd(), layers)
    out = sys.stdout.buffer
    out.write(json.dumps({"hello": worker.report}).encode() + b"\n")
    out.flush()
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        job = json.loads(line)
        broken = False
        try:
            reply = worker.run_job(job)
        except (ConnectionError, OSError) as err:
            reply, broken = {"status": "crashed", "message": f"sandbox template lost: {err}"}, True
        except Exception as err:  # noqa: BLE001 - the worker must answer every job
            reply = {"status": "crashed", "message": f"harness error: {type(err).__name__}: {err}"}
        if reply["status"] not in ("passed", "failed"):
            reply["passed"] = 0  # a partial count from a program that then crashed or timed out earns nothing
        reply["total"] = len(job.get("cases", []))
        reply["id"] = job.get("id")
        out.write(json.dumps(reply).encode() + b"\n")
        out.flush()
        if broken:
            break  # the caller starts a fresh worker


if __name__ == "__main__":
    main()
