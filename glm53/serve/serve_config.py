"""What `glm53 serve` takes (`ServeConfig`): where it listens, what it serves and the bounds every request is held
to. Light: no torch and no FastAPI, so `glm53 --help` and `glm53 serve --help` answer at once."""

from __future__ import annotations

from dataclasses import dataclass

from ..runtime.composition import composed, record
from ..runtime.settings import Checks, setting

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
MAX_CHECKPOINTS = 2  # side by side: two panes


@composed
@dataclass(frozen=True)
class ServeConfig:
    """The server's settings. The bounds hold every request: one past them gets a 4xx with one sentence."""

    host: str = setting("127.0.0.1", "address to listen on; another than the loopback exposes the model and the "
                                     "sandbox to whoever reaches it", block="command")
    port: int = setting(8053, "port to listen on", at_least=1, at_most=65535, block="command")
    runs: str | None = setting(None, "folder whose run folders the runs view shows (read-only)", shown="none",
                               block="command")
    max_prompt_chars: int = setting(2000, "longest prompt or description a request may send, in characters",
                                    at_least=1, at_most=100_000)
    max_cases: int = setting(16, "most test cases a request may send", at_least=1, at_most=256)
    max_new_tokens: int = setting(256, "highest token cap a request may ask for", at_least=1, at_most=4096)
    max_waiting: int = setting(16, "most requests waiting for the model at once; one more is told the server is busy",
                               at_least=1, at_most=1000)
    timeout_s: float = setting(2.0, "seconds per program in the sandbox", above=0, at_most=60)
    accept_partial_isolation: bool = setting(
        False, "serve even when the sandbox lacks an isolation layer (level partial or none)")
    trust_unverified: bool = setting(
        False, "load a checkpoint folder that has no metadata.json (its weights and config unchecked)")

    def __post_init__(self) -> None:
        check = Checks("serve")
        check.declared(self)
        check.require(bool(self.host.strip()) and not any(c.isspace() for c in self.host),
                      f"--host must be an address or a host name without spaces, got {self.host!r}")
        check.done()

    @property
    def loopback(self) -> bool:
        return self.host in LOOPBACK_HOSTS

    def to_dict(self) -> dict:
        return record(self)


def exposure_line(cfg: ServeConfig) -> str | None:
    """What listening on a host other than the loopback exposes, in one line (None on the loopback)."""
    if cfg.loopback:
        return None
    return (f"glm53 serve: listening on {cfg.host}:{cfg.port}, not the loopback: anyone who can reach this machine "
            "on that port can make the model generate, run programs in this machine's sandbox and read the run "
            "folders under --runs; there is no login")
