"""The `glm53 serve` command (thin: parse, check, load, then hand the app to uvicorn). Every refusal comes before
the port is opened: a checkpoint that cannot be read or checked (as `glm53 eval` refuses it), a sandbox below full
isolation without --accept-partial-isolation, a --runs folder that is not there, a port that is taken, or the serve
extra not installed."""

from __future__ import annotations

from pathlib import Path

from ..runtime.settings import add_config_arguments, config_from_args
from .serve_config import MAX_CHECKPOINTS, ServeConfig, exposure_line

MISSING_EXTRA = ("glm53 serve needs the serve extra (FastAPI, uvicorn, Markdown and nh3): pip install -e "
                 "'.[serve]', or bash scripts/install.sh --serve")


def add_serve_parser(sub) -> None:
    p = sub.add_parser("serve", help="a playground in the browser: completions, verdicts, expert routing and runs",
                       description="Serve a page on http://127.0.0.1:8053 where a description or a task becomes a "
                                   "completion streamed token by token, judged in the sandbox, with the experts "
                                   "each byte was routed to; two --checkpoint folders side by side; a --runs "
                                   "folder's reports and curves.")
    p.add_argument("--checkpoint", action="append", required=True, metavar="DIR",
                   help=f"checkpoint folder (holding model.safetensors); give it twice (at most {MAX_CHECKPOINTS}) "
                        "to compare two side by side")
    add_config_arguments(p, ServeConfig, title="serve", block="runtime")  # the request limits and the sandbox's
    p.set_defaults(func=cmd_serve)


def serve_config(args) -> ServeConfig:
    """The settings and the checkpoint list, checked (one line each) before anything loads."""
    cfg = config_from_args(ServeConfig, args)
    if len(args.checkpoint) > MAX_CHECKPOINTS:
        raise ValueError(f"give --checkpoint at most {MAX_CHECKPOINTS} times (the page shows two side by side), "
                         f"got {len(args.checkpoint)}")
    if cfg.runs is not None and not Path(cfg.runs).is_dir():
        raise FileNotFoundError(f"--runs {cfg.runs} is not a folder; give the folder that holds your run folders")
    return cfg


def listening_socket(host: str, port: int):
    """The server's socket, bound now (before anything loads), so a taken port or an unknown host is one line."""
    import errno
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except OSError as err:
        raise ValueError(f"--host {host} is not an address this machine can listen on ({err.strerror or err}); give "
                         "one such as 127.0.0.1") from None
    try:
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as err:
        fix = ("give another --port, or stop what holds it" if err.errno == errno.EADDRINUSE else
               "give an address of this machine with --host (127.0.0.1 by default), or a --port above 1023")
        raise ValueError(f"cannot listen on {host}:{port} ({err.strerror or err}); {fix}") from None
    sock.listen(128)
    return sock


def cmd_serve(args) -> int:
    cfg = serve_config(args)
    try:
        import fastapi  # noqa: F401
        import markdown  # noqa: F401
        import nh3  # noqa: F401
        import uvicorn
    except ImportError:
        raise ValueError(MISSING_EXTRA) from None
    from .app import create_app
    from .checkpoints import open_checkpoints
    from .generation import Generator

    sock = listening_socket(cfg.host, cfg.port)
    try:
        served = open_checkpoints(args.checkpoint, cfg.trust_unverified)
        generator = Generator(served, cfg)  # refuses a sandbox below full isolation unless accepted
    except BaseException:
        sock.close()
        raise
    line = exposure_line(cfg)
    if line:
        print(line)
    names = " and ".join(s.name for s in served)
    print(f"glm53 serve: {names} on http://{cfg.host}:{cfg.port} (Ctrl-C stops)", flush=True)
    server = uvicorn.Server(uvicorn.Config(create_app(generator, cfg), log_level="warning", access_log=False))
    try:
        server.run(sockets=[sock])
    finally:
        generator.close()
        sock.close()
    return 0
