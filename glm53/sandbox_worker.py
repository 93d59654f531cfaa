"""Sandbox worker: a warm process that forks one short-lived child per candidate program.

Run as `python -I -S sandbox_worker.py` (standard library only, isolated mode, no site packages). Protocol on
stdin/stdout, one JSON object a line: a job {"id", "source", "entry_point", "args": [encoded args per case],
"builtins": [allowed names], "timeout_s", "memory_mb"} in, a reply {"id", "status", "results", "message"} out.

The worker itself never runs candidate code. Each child: its own process group; stdin, stdout and stderr on
/dev/null; limits on address space, CPU time, file size (0: it cannot write files), open files, processes
and core dumps; the restricted builtins only; a scratch working directory. Its results come back through a
pipe created for that job, tagged with a random nonce; a child that dies, exits early or writes anything else
yields no pass. A wall-clock deadline kills the child's whole process group.
"""

import builtins
import json
import os
import resource
import secrets
import select
import signal
import sys
import time

MAX_RESULT_BYTES = 1 << 20


def encode(value, depth=0):
    """Tagged JSON so that types survive the trip: 1, True, 1.0 and "1" stay distinct."""
    if depth > 50:
        raise ValueError("nested too deeply")
    t = type(value)
    if t is bool:
        return ["bool", value]
    if t is int:
        return ["int", hex(value)]  # hex is not subject to the int/str digit limit
    if t is float:
        return ["float", repr(value)]
    if t is str:
        return ["str", value]
    if value is None:
        return ["none"]
    if t is list or t is tuple:
        return [t.__name__, [encode(v, depth + 1) for v in value]]
    if t is dict:
        return ["dict", [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]]
    return ["unsupported", t.__name__]


def decode(tagged):
    tag = tagged[0]
    if tag == "bool":
        return bool(tagged[1])
    if tag == "int":
        return int(tagged[1], 16)
    if tag == "float":
        return float(tagged[1])
    if tag == "str":
        return tagged[1]
    if tag == "none":
        return None
    if tag == "list":
        return [decode(v) for v in tagged[1]]
    if tag == "tuple":
        return tuple(decode(v) for v in tagged[1])
    if tag == "dict":
        return {decode(k): decode(v) for k, v in tagged[1]}
    raise ValueError(f"cannot decode tag {tag!r}")


def run_candidate(job):
    """In the child: define the function with restricted builtins and call it on every case."""
    safe = {name: getattr(builtins, name) for name in job["builtins"] if hasattr(builtins, name)}
    namespace = {"__builtins__": safe}
    try:
        exec(compile(job["source"], "<candidate>", "exec"), namespace)
    except MemoryError:
        return {"status": "memory", "message": "MemoryError while defining the function"}
    except BaseException as err:  # noqa: BLE001 - any failure to define is an invalid program
        return {"status": "invalid", "message": f"{type(err).__name__} while defining the function"}
    fn = namespace.get(job["entry_point"])
    if not callable(fn):
        return {"status": "invalid", "message": f"{job['entry_point']} is not defined"}
    results = []
    for args in job["args"]:
        try:
            value = fn(*[decode(a) for a in args])
            results.append({"value": encode(value)})
        except MemoryError:
            return {"status": "memory", "message": "MemoryError while running a case", "results": results}
        except BaseException as err:  # noqa: BLE001 - a raising case fails, it does not crash the harness
            results.append({"error": type(err).__name__})
    return {"status": "ran", "results": results}


def child(job, write_fd, nonce):
    os.setpgid(0, 0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    memory = int(job.get("memory_mb", 512)) << 20
    cpu = max(1, int(job["timeout_s"] + 1))
    limits = [(resource.RLIMIT_AS, memory), (resource.RLIMIT_CPU, cpu), (resource.RLIMIT_FSIZE, 0),
              (resource.RLIMIT_CORE, 0), (resource.RLIMIT_NPROC, 0)]
    for which, value in limits:
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass
    sys.setrecursionlimit(500)
    try:
        outcome = run_candidate(job)
        data = json.dumps({"nonce": nonce, **outcome}).encode()
    except MemoryError:
        data = json.dumps({"nonce": nonce, "status": "memory", "message": "MemoryError"}).encode()
    except BaseException as err:  # noqa: BLE001
        data = json.dumps({"nonce": nonce, "status": "crashed", "message": type(err).__name__}).encode()
    if len(data) > MAX_RESULT_BYTES:
        data = json.dumps({"nonce": nonce, "status": "crashed", "message": "result too large"}).encode()
    view = memoryview(data)
    while view:
        written = os.write(write_fd, view)
        view = view[written:]


def run_job(job):
    nonce = secrets.token_hex(16)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            child(job, write_fd, nonce)
        finally:
            os._exit(0)
    os.close(write_fd)
    deadline = time.monotonic() + float(job["timeout_s"])
    chunks, size, timed_out = [], 0, False
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([read_fd], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(read_fd, 65536)
        if not chunk:
            break
        size += len(chunk)
        if size > MAX_RESULT_BYTES + 4096:
            break
        chunks.append(chunk)
    os.close(read_fd)
    if timed_out or size > MAX_RESULT_BYTES + 4096:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _, wait_status = os.waitpid(pid, 0)
    try:
        os.killpg(pid, signal.SIGKILL)  # anything the child left in its group
    except (ProcessLookupError, PermissionError):
        pass
    if timed_out:
        return {"status": "timeout", "message": f"wall-clock limit of {job['timeout_s']} s"}
    if os.WIFSIGNALED(wait_status):
        sig = os.WTERMSIG(wait_status)
        if sig in (signal.SIGXCPU, signal.SIGKILL):
            return {"status": "timeout", "message": f"CPU-time limit (signal {sig})"}
        return {"status": "crashed", "message": f"killed by signal {sig}"}
    try:
        reply = json.loads(b"".join(chunks))
    except ValueError:
        return {"status": "crashed", "message": "the program ended without a result"}
    if not isinstance(reply, dict) or reply.pop("nonce", None) != nonce:
        return {"status": "crashed", "message": "result not written by the harness"}
    return reply


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        try:
            reply = run_job(job)
        except Exception as err:  # noqa: BLE001 - the worker must answer every job
            reply = {"status": "crashed", "message": f"harness error: {type(err).__name__}: {err}"}
        reply["id"] = job.get("id")
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
