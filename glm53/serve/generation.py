"""The model side of the server: requests take the model in turn, each completion streams as events, and its
program is judged by the verifier pool.

One generation runs at a time (the models are shared, and two on 2 cores would only slow each other): a request
waits for the ones before it, and at most `max_waiting` requests are in the building at once, so none waits
unboundedly; one more is told the server is busy. A request whose page was closed is cancelled: while it waits it
leaves the line, while it generates it stops at the next token. Programs never run in this process: each case is
one job of the verifier pool (glm53/verify), at the language level of the checkpoint's suite, as `glm53 eval`
judges them, so the page can show the verdict per case.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..data.bpe_tokenizer import tokenizer_for
from ..decode.interactive import stream_completion
from ..decode.sampling import Sampling
from ..verify.program import Program
from ..verify.sandbox_policy import ACCEPT_FLAG, missing_layers, sandbox_record
from ..verify.verifier import SandboxPool, verify_many
from .checkpoints import ServedCheckpoint
from .serve_config import ServeConfig
from .trace import RoutingRecorder, attention_picks, token_trace

Emit = Callable[[str, dict], None]  # (event name, data)


class Busy(Exception):
    """Too many requests are waiting: the one-sentence reason is its message."""


class Cancelled(Exception):
    """The page that asked went away."""


@dataclass(frozen=True)
class Job:
    prompt: str
    entry_point: str | None  # the function the cases call (None: nothing to judge)
    cases: tuple  # ((args, expected), ...)
    checkpoints: tuple[int, ...]  # which of the served checkpoints, in this order, on the same prompt and seed
    sampling: Sampling
    seed: int


class Generator:
    def __init__(self, served: list[ServedCheckpoint], cfg: ServeConfig, pool: SandboxPool | None = None):
        self.served, self.cfg = served, cfg
        self.pool = pool or SandboxPool(workers=2)
        try:
            self.sandbox = sandbox_record(cfg.accept_partial_isolation, self.pool)
        except Exception:
            self.pool.close()
            raise
        if self.sandbox["level"] != "full" and not cfg.accept_partial_isolation:
            self.pool.close()
            layers = {k: v for k, v in self.sandbox.items() if k != "accepted_partial"}
            raise ValueError(f"the sandbox lacks {', '.join(missing_layers(layers)) or 'an isolation layer'} "
                             f"(isolation level {self.sandbox['level']}); give {ACCEPT_FLAG} to serve anyway (the page "
                             "shows the level), or run where every layer is available (as root on Linux)")
        self._model_lock = threading.Lock()
        self._count_lock = threading.Lock()
        self._in_building = 0

    def close(self) -> None:
        self.pool.close()

    # -------------------------------------------------------------- admission
    def admit(self) -> None:
        """Count a request in, or raise Busy (before any stream starts). Pair with `release`."""
        with self._count_lock:
            if self._in_building >= self.cfg.max_waiting:
                raise Busy(f"the server is busy with {self._in_building} requests (at most {self.cfg.max_waiting} "
                           "wait at once); try again when one has finished")
            self._in_building += 1

    def release(self) -> None:
        with self._count_lock:
            self._in_building -= 1

    def _take_model(self, cancelled: threading.Event) -> None:
        while not self._model_lock.acquire(timeout=0.1):
            if cancelled.is_set():
                raise Cancelled

    # -------------------------------------------------------------- a request
    def run(self, job: Job, emit: Emit, cancelled: threading.Event) -> None:
        """Generate with each asked checkpoint in turn (events "start", "text", "token", "completion"), then judge
        each program ("verdict"); "done" at the end. Raises Cancelled when `cancelled` is set."""
        programs = []
        self._take_model(cancelled)
        try:
            for index in job.checkpoints:
                programs.append((index, self._generate(index, job, emit, cancelled)))
        finally:
            self._model_lock.release()
        for index, completion in programs:  # the sandbox runs beside the next request's generation
            if cancelled.is_set():
                raise Cancelled
            emit("verdict", {"model": index, **self.judge(index, job, completion)})
        emit("done", {})

    def _generate(self, index: int, job: Job, emit: Emit, cancelled: threading.Event) -> str:
        served = self.served[index]
        emit("start", {"model": index, "name": served.name})
        generator = torch.Generator().manual_seed(job.seed)
        started = time.perf_counter()
        first: list[float] = []
        with RoutingRecorder(served.model) as recorder:
            tokenizer = tokenizer_for(served.model.config)
            records, trace = token_trace(recorder, tokenizer)

            def on_token(token_id: int, logits: torch.Tensor) -> None:
                if cancelled.is_set():
                    raise Cancelled
                trace(token_id, logits)
                first or first.append(time.perf_counter() - started)
                emit("token", {"model": index, **records[-1]})

            def on_text(piece: str) -> None:
                emit("text", {"model": index, "piece": piece})

            record = stream_completion(served.model, job.prompt, job.sampling, generator, served.suite.stop, on_text,
                                       tokenizer, on_token=on_token)
        seconds = time.perf_counter() - started
        kept = len(record["token_ids"])  # the function rule's cut drops the last tokens
        emit("completion", {"model": index, "completion": record["completion"], "token_ids": record["token_ids"],
                            "hit_token_cap": record["hit_token_cap"], "dropped": len(records) - kept,
                            "prompt": job.prompt, "prompt_ids": tokenizer.encode(job.prompt, bos=True),
                            "seconds": seconds, "first_token_seconds": first[0] if first else None,
                            "tokens_per_second": len(records) / seconds if seconds > 0 else None})
        return record["completion"]

    def judge(self, index: int, job: Job, completion: str) -> dict:
        """Each case a job of its own in the verifier pool, at the checkpoint's suite language level."""
        language = self.served[index].suite.language
        if job.entry_point is None or not job.cases:
            return {"status": "not judged", "language": language, "cases": [],
                    "message": "no test cases: type some (args -> expected, one a line) or pick a task"}
        programs = [Program.completed(job.prompt, completion, job.entry_point, [case]) for case in job.cases]
        verdicts = verify_many(programs, timeout_s=self.cfg.timeout_s, pool=self.pool, language=language)
        passed = sum(v.passed for v in verdicts)
        failing = next((v for v in verdicts if not v.passed), None)
        return {"status": "passed" if failing is None else failing.status, "language": language,
                "passed": passed, "total": len(verdicts),
                "cases": [{"args": ", ".join(map(repr, args)), "expected": repr(expected), "status": v.status,
                           "message": v.message}
                          for (args, expected), v in zip(job.cases, verdicts)]}

    def attention(self, index: int, ids: list[int], position: int, cancelled: threading.Event) -> list[dict]:
        self._take_model(cancelled)
        try:
            return attention_picks(self.served[index].model, ids, position)
        finally:
            self._model_lock.release()
