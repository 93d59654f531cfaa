"""The web app: the page, its JSON API and the completion stream (server-sent events).

    GET  /                       the page (page/index.html, app.js, style.css: plain, no build step, no CDN)
    GET  /api/info               the checkpoints, the bounds, the sandbox's isolation, whether runs are served
    GET  /api/tasks?split=NAME   the first tasks of a frozen split of the first checkpoint's suite
    POST /api/generate           a completion per asked checkpoint, streamed: start, text, token, completion,
                                 verdict, done (or error) events
    POST /api/attention          the sparse layers' picks for one position of a completion
    GET  /api/runs, /api/runs/NAME, /api/runs/NAME/file/PATH   the runs view (read-only)

Every refusal is a 4xx whose JSON body is {"error": one sentence}; an unexpected error is a 500 with one sentence
(its traceback goes to the server's log, never to the page). A stream's problems arrive as an `error` event.
Before any route, guard.py refuses another Host or Origin than the playground's own, a POST that is not JSON and a
body past the cap, and gives every answer nosniff and a Content-Security-Policy.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, Response, StreamingResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from ..data.bpe_tokenizer import tokenizer_for
from . import runs as run_folders
from .generation import Busy, Cancelled, Generator
from .guard import Guard, sentence
from .requests import BadRequest, parse_job
from .serve_config import ServeConfig
from .trace import token_label

PAGE = {"index.html": "text/html", "app.js": "text/javascript", "style.css": "text/css"}
MAX_JSON_DEPTH = 8  # the page's bodies nest 2 deep; a deeper one is refused before anything walks it
SVG_CSP = "default-src 'none'; style-src 'unsafe-inline'; sandbox"  # a run's SVG opened alone runs no script
TASKS_SHOWN = 16
HEARTBEAT_S = 1.0
log = logging.getLogger("glm53.serve")


def depth(value) -> int:
    """How deep lists and objects nest in a parsed JSON value, counted without recursion, up to MAX_JSON_DEPTH + 1."""
    deepest, stack = 0, [(value, 1)]
    while stack and deepest <= MAX_JSON_DEPTH:
        value, level = stack.pop()
        if isinstance(value, (list, dict)):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in (value.values() if isinstance(value, dict) else value))
    return deepest


def sse(event: str, data: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


class Ticket:
    """A request counted in by `Generator.admit`; released once, by whoever finishes with it first."""

    def __init__(self, generator: Generator):
        generator.admit()
        self.generator, self.lock, self.held = generator, threading.Lock(), True

    def release(self) -> None:
        with self.lock:
            if self.held:
                self.held = False
                self.generator.release()


def create_app(generator: Generator, cfg: ServeConfig) -> FastAPI:
    app = FastAPI(title="glm53 serve", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(Guard, host=cfg.host)
    served, runs_root = generator.served, Path(cfg.runs) if cfg.runs else None
    workers = ThreadPoolExecutor(max_workers=cfg.max_waiting, thread_name_prefix="glm53-serve")
    app.router.on_shutdown.append(lambda: workers.shutdown(wait=False, cancel_futures=True))

    @lru_cache(maxsize=16)
    def tasks(split: str) -> dict:
        suite = served[0].suite
        if split not in suite.splits:
            raise BadRequest(f"the {suite.name} suite has no split {split!r}; its splits are {', '.join(suite.splits)}",
                             404)
        count = 2 if suite.count_unit == "per family" else TASKS_SHOWN
        return {t.task_id: t for t in suite.tasks(split, count)[:TASKS_SHOWN]}

    # ---------------------------------------------------------------- refusals, one sentence each
    @app.exception_handler(BadRequest)
    async def bad_request(request: Request, err: BadRequest):
        return sentence(err.status, str(err))

    @app.exception_handler(Busy)
    async def busy(request: Request, err: Busy):
        return sentence(503, str(err))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, err: RequestValidationError):
        first = err.errors()[0] if err.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "the request"
        return sentence(400, f"{where}: {first.get('msg', 'is not valid')}")

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, err: HTTPException):
        what = {404: f"there is nothing at {request.url.path}", 405: f"{request.method} is not served at "
                f"{request.url.path}"}.get(err.status_code, str(err.detail))
        return sentence(err.status_code, what)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, err: Exception):
        log.error("glm53 serve: %s %s failed", request.method, request.url.path, exc_info=err)  # with its traceback
        return sentence(500, f"the server met an unexpected {type(err).__name__}; its log has the details")

    async def json_body(request: Request):
        raw = await request.body()  # JSON, and at most guard.MAX_BODY_BYTES: the guard has seen to both
        try:
            body = json.loads(raw)
            deep = depth(body) > MAX_JSON_DEPTH
        except ValueError:
            raise BadRequest("the request body is not JSON") from None
        except RecursionError:  # json's own limit, far past ours
            deep = True
        if deep:
            raise BadRequest(f"the request body is nested deeper than {MAX_JSON_DEPTH} levels; send the flat JSON "
                             "object the page sends")
        return body

    # ---------------------------------------------------------------- the page
    @app.get("/")
    async def index():
        return HTMLResponse(files(__package__).joinpath("page", "index.html").read_text())

    @app.get("/page/{name}")
    async def page_file(name: str):
        if name not in PAGE:
            raise HTTPException(404)
        return Response(files(__package__).joinpath("page", name).read_text(), media_type=PAGE[name],
                        headers={"Cache-Control": "no-cache"})

    @app.get("/api/info")
    async def info():
        return {"checkpoints": [s.describe() for s in served], "runs": runs_root is not None,
                "sandbox": generator.sandbox,
                "bounds": {"max_prompt_chars": cfg.max_prompt_chars, "max_cases": cfg.max_cases,
                           "max_new_tokens": cfg.max_new_tokens, "max_waiting": cfg.max_waiting},
                "splits": list(served[0].suite.splits)}

    @app.get("/api/tasks")
    async def task_list(split: str = "dev"):
        chosen = await run_in_threadpool(tasks, split)
        return {"split": split, "tasks": [{"task_id": t.task_id, "prompt": t.prompt, "entry_point": t.entry_point,
                                           "cases": "\n".join(", ".join(map(repr, a)) + f" -> {e!r}"
                                                              for a, e in t.cases)} for t in chosen.values()]}

    # ---------------------------------------------------------------- generation
    @app.post("/api/generate")
    async def generate(request: Request):
        job = parse_job(await json_body(request), cfg, served, tasks)
        ticket = Ticket(generator)  # Busy -> 503 before the stream starts
        return StreamingResponse(stream(request, job, ticket), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store"}, background=BackgroundTask(ticket.release))

    async def stream(request: Request, job, ticket: Ticket):
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        cancelled = threading.Event()

        def emit(event: str, data: dict) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, (event, data))

        def work() -> None:
            try:
                generator.run(job, emit, cancelled)
            except Cancelled:
                pass
            except Exception as err:  # noqa: BLE001 - one line to the page, the traceback to the log
                log.exception("glm53 serve: a generation failed")
                known = isinstance(err, ValueError)
                emit("error", {"message": " ".join(str(err).split()) if known else
                               f"the server met an unexpected {type(err).__name__}; its log has the details"})
            finally:
                ticket.release()
                loop.call_soon_threadsafe(queue.put_nowait, None)

        loop.run_in_executor(workers, work)
        try:
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), HEARTBEAT_S)
                except asyncio.TimeoutError:
                    if await request.is_disconnected():
                        return
                    yield b": waiting\n\n"  # a comment line: keeps proxies open, and finds a closed page
                    continue
                if item is None:
                    return
                yield sse(*item)
        finally:
            cancelled.set()  # the page went away, or the stream ended: the worker stops at its next token

    @app.post("/api/attention")
    async def attention(request: Request):
        body = await json_body(request)
        if not isinstance(body, dict):
            raise BadRequest("send a JSON object with model, ids and position")
        model = body.get("model", 0)
        if type(model) is not int or not 0 <= model < len(served):
            raise BadRequest(f"model must be the index of a served checkpoint (0 to {len(served) - 1}), got {model!r}")
        config, ids, position = served[model].model.config, body.get("ids"), body.get("position")
        if (not isinstance(ids, list) or not 0 < len(ids) <= config.max_sequence_length
                or any(type(i) is not int or not 0 <= i < config.vocab_size for i in ids)):
            raise BadRequest(f"ids must be 1 to {config.max_sequence_length} token ids, each from 0 to "
                             f"{config.vocab_size - 1}")
        if type(position) is not int or not 0 <= position < len(ids):
            raise BadRequest(f"position must be a whole number from 0 to {len(ids) - 1}, got {position!r}")
        ticket = Ticket(generator)
        try:
            picks = await run_in_threadpool(generator.attention, model, ids, position, threading.Event())
        finally:
            ticket.release()
        tokenizer = tokenizer_for(config)
        return {"model": model, "position": position, "labels": [token_label(i, tokenizer) for i in ids],
                "layers": picks}

    # ---------------------------------------------------------------- the runs view
    def run_folder(name: str) -> Path:
        if runs_root is None:
            raise BadRequest("no runs are served: start glm53 serve with --runs DIR", 404)
        try:
            return run_folders.run_folder(runs_root, name)
        except LookupError as err:
            raise BadRequest(str(err), 404) from None

    @app.get("/api/runs")
    async def run_list():
        if runs_root is None:
            return {"runs": [], "message": "no runs are served: start glm53 serve with --runs DIR"}
        return {"runs": await run_in_threadpool(run_folders.list_runs, runs_root)}

    @app.get("/api/runs/{name}")
    async def run_view(name: str):
        folder = run_folder(name)

        def read() -> dict:
            return {"name": name, "report": run_folders.report_html(folder, f"/api/runs/{name}/file/"),
                    "receipt": run_folders.receipt(folder), "curves": run_folders.curves(folder)}

        return await run_in_threadpool(read)

    @app.get("/api/runs/{name}/file/{relative:path}")
    async def run_file(name: str, relative: str):
        try:
            path, media = run_folders.run_file(run_folder(name), relative)
        except LookupError as err:
            raise BadRequest(str(err), 404) from None
        return FileResponse(path, media_type=media,
                            headers={"Content-Security-Policy": SVG_CSP} if media == "image/svg+xml" else None)

    return app
