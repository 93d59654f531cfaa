"""`glm53 serve` refuses at start, in one line and before it listens, what `glm53 eval` refuses (a checkpoint that
cannot be read or checked), too many checkpoints, a missing --runs folder and a missing serve extra; another host
than the loopback is said in a line."""

import shutil
import sys

import pytest

from glm53.cli import main
from glm53.serve.commands import MISSING_EXTRA
from glm53.serve.serve_config import ServeConfig, exposure_line

from .conftest import require_serve_extra


def refused(capsys, *argv) -> str:
    assert main(["serve", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    return err


def test_an_unreadable_or_unverified_checkpoint_is_refused_as_eval_refuses_it(serve_files, tmp_path, capsys):
    require_serve_extra()  # the command checks the whole extra before it loads or listens
    good = serve_files / "a" / "checkpoint-0000"
    unverified = tmp_path / "unverified"
    shutil.copytree(good, unverified)
    (unverified / "metadata.json").unlink()
    assert "has no metadata.json" in refused(capsys, "--checkpoint", str(unverified))
    damaged = tmp_path / "damaged"
    shutil.copytree(good, damaged)
    with open(damaged / "model.safetensors", "r+b") as f:
        f.seek(200)
        f.write(b"\0" * 16)
    assert "the checkpoint is damaged" in refused(capsys, "--checkpoint", str(damaged))
    assert "no such folder" in refused(capsys, "--checkpoint", str(tmp_path / "nowhere"))


def test_settings_are_refused_before_anything_loads(serve_files, tmp_path, capsys):
    good = str(serve_files / "a" / "checkpoint-0000")
    assert "at most 2 times" in refused(capsys, "--checkpoint", good, "--checkpoint", good, "--checkpoint", good)
    assert "--runs" in refused(capsys, "--checkpoint", good, "--runs", str(tmp_path / "none"))
    assert "--port" in refused(capsys, "--checkpoint", good, "--port", "70000")
    assert "--max-cases" in refused(capsys, "--checkpoint", good, "--max-cases", "0")


def test_a_sandbox_below_full_isolation_is_refused_unless_accepted(serve_files, monkeypatch):
    from glm53.serve import generation
    from glm53.serve.checkpoints import open_checkpoints
    from glm53.serve.serve_config import ServeConfig

    partial = {"namespaces": "off: no user namespaces", "seccomp": "on (91 BPF instructions)", "level": "partial"}
    monkeypatch.setattr(generation, "sandbox_record", lambda accepted, pool: {**partial, "accepted_partial": accepted})
    served = open_checkpoints([str(serve_files / "a" / "checkpoint-0000")], False)
    with pytest.raises(ValueError) as refusal:
        generation.Generator(served, ServeConfig())
    assert str(refusal.value) == ("the sandbox lacks namespaces (no user namespaces) (isolation level partial); give "
                                  "--accept-partial-isolation to serve anyway (the page shows the level), or run where "
                                  "every layer is available (as root on Linux)")
    accepted = generation.Generator(served, ServeConfig(accept_partial_isolation=True))
    assert accepted.sandbox["level"] == "partial" and accepted.sandbox["accepted_partial"] is True
    accepted.close()


def test_a_taken_port_is_one_line_before_anything_loads(serve_files, capsys):
    require_serve_extra()  # the command checks the whole extra before it loads or listens
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        line = refused(capsys, "--checkpoint", str(serve_files / "a" / "checkpoint-0000"), "--port", str(port))
    assert line.startswith(f"glm53 serve: error: cannot listen on 127.0.0.1:{port} (") and "--port" in line


def test_without_the_serve_extra_one_line_says_how_to_install_it(serve_files, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "fastapi", None)
    assert refused(capsys, "--checkpoint", str(serve_files / "a" / "checkpoint-0000")) == \
        f"glm53 serve: error: {MISSING_EXTRA}"


def test_the_loopback_is_the_default_and_another_host_is_said_in_a_line():
    assert ServeConfig().host == "127.0.0.1" and exposure_line(ServeConfig()) is None
    line = exposure_line(ServeConfig(host="0.0.0.0"))
    assert line.startswith("glm53 serve: listening on 0.0.0.0:8053, not the loopback: anyone who can reach")
    assert "\n" not in line
