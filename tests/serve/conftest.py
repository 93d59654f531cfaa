"""Tiny checkpoints, a run folder and a real server on the loopback for glm53 serve's tests (the modules that
need the serve extra skip, with the reason, where it is not installed: `require_serve_extra`)."""

import json
import socket
import threading
from pathlib import Path

import pytest
import torch

from glm53 import GLM53, ModelConfig
from glm53.checkpoints.format import save_checkpoint

from ..tiny import TINY

NEEDS_EXTRA = "the serve extra is not installed (bash scripts/install.sh --serve)"


def require_serve_extra() -> None:
    for name in ("fastapi", "uvicorn", "httpx", "markdown", "nh3"):
        pytest.importorskip(name, reason=NEEDS_EXTRA)

CONTEXT = 256
# a 1x1 PNG: the chart a report links
PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
                    "0000000d4944415478da63f8cfc0f01f0005000201a5c2a86e0000000049454e44ae426082")


def tiny_checkpoint(path, seed: int, **changes):
    torch.manual_seed(seed)
    save_checkpoint(path, GLM53(ModelConfig(**{**TINY, "max_sequence_length": CONTEXT, **changes})), {"step": 0})
    return path


@pytest.fixture(scope="session")
def serve_files(tmp_path_factory):
    """Two checkpoints of different weights, and a runs folder with one finished run (report, chart, receipt,
    log) and one folder that is no run."""
    root = tmp_path_factory.mktemp("serve")
    tiny_checkpoint(root / "a" / "checkpoint-0000", 0)
    tiny_checkpoint(root / "b" / "checkpoint-0000", 1)
    run = root / "runs" / "demo"
    (run / "charts").mkdir(parents=True)
    (run / "charts" / "loss.png").write_bytes(PNG)
    (run / "REPORT.md").write_text("# Demo run\n\n| step | loss |\n| --- | --- |\n| 1 | 5.6 |\n\n"
                                   "![loss](charts/loss.png)\n")
    (run / "run-receipt.json").write_text(json.dumps({"suite": "reference", "final": {"passed": 3}}))
    (run / "pretrain").mkdir()
    (run / "pretrain" / "train_log.jsonl").write_text(
        "".join(json.dumps({"step": s, "loss": 6.0 - s, **({"val_loss": 5.5 - s} if s % 2 == 0 else {})}) + "\n"
                for s in range(1, 5)) + '{"step": 5, "lo')  # a run still writing: its last line is cut
    (root / "runs" / "notes").mkdir()
    return root


def make_generator(paths, **settings):
    from glm53.serve.checkpoints import open_checkpoints
    from glm53.serve.generation import Generator
    from glm53.serve.serve_config import ServeConfig

    cfg = ServeConfig(**settings)
    return Generator(open_checkpoints([str(p) for p in paths], False), cfg), cfg


@pytest.fixture(scope="session")
def generator_pair(serve_files):
    generator, cfg = make_generator([serve_files / "a" / "checkpoint-0000", serve_files / "b" / "checkpoint-0000"],
                                    runs=str(serve_files / "runs"), max_new_tokens=200, max_waiting=6)
    yield generator, cfg
    generator.close()


@pytest.fixture(scope="session")
def client(generator_pair):
    from fastapi.testclient import TestClient

    from glm53.serve.app import create_app

    # the Host a browser on this machine sends (the app refuses TestClient's own `testserver`, as any other name)
    return TestClient(create_app(*generator_pair), base_url="http://127.0.0.1:8053", raise_server_exceptions=False)


CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
BROWSER_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1400,1000")


def start_browser(profile, *flags):
    """Debian's headless Chromium driven by Selenium, or a skip saying what to install."""
    if not (CHROMIUM.is_file() and DRIVER.is_file()):
        pytest.skip("no Chromium: apt-get install chromium chromium-driver (.ci/run does)")
    webdriver = pytest.importorskip("selenium.webdriver",
                                    reason="Selenium is not installed (bash scripts/install.sh --serve)")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*BROWSER_FLAGS, *flags, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=str(DRIVER)))
    driver.set_page_load_timeout(60)
    return driver


class LoopbackServer:
    """uvicorn serving the app on a socket bound here first (127.0.0.1, a free port), in a thread: connections
    made before it accepts wait in the socket's backlog, so no test waits for it to start."""

    def __init__(self, app):
        import uvicorn

        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(64)
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.socket.close()


@pytest.fixture(scope="session")
def live_server(generator_pair):
    from glm53.serve.app import create_app

    server = LoopbackServer(create_app(*generator_pair))
    yield server
    server.stop()


def events(text: str) -> list[tuple[str, dict]]:
    """The (event, data) pairs of a server-sent event stream (comment lines skipped)."""
    found = []
    for block in text.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
        if "event" in lines:
            found.append((lines["event"], json.loads(lines["data"])))
    return found
