import json
import subprocess
import sys
from pathlib import Path

import pytest

from glm53.cli import main
from glm53.data.tasks import read_tasks


def test_info_prints_counts_and_pattern(capsys):
    assert main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["parameters"] == {"total": 25_730_592, "active": 9_805_344}
    assert info["layer_pattern"] == "LLLSLLLSLLLS"
    from glm53.runtime.device import resolve_device

    assert info["device"] == str(resolve_device("auto"))  # cpu here and in CI; cuda on a GPU machine


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "glm53"
    assert script.is_file(), "the glm53 console script is not installed next to this Python; pip install -e ."
    out = subprocess.run([str(script), "info", "--layers", "4", "--json"], capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out)["layer_pattern"] == "LLLS"


@pytest.mark.slow
def test_tasks_export_then_pretrain_and_generate(tmp_path, capsys):
    tasks_file = tmp_path / "confirm.jsonl"
    assert main(["tasks", "export", "--split", "confirm", "--per-family", "2", "--families", "double,even",
                 "--out", str(tasks_file)]) == 0
    tasks = read_tasks(tasks_file)
    assert [t.task_id for t in tasks] == ["confirm-double-000", "confirm-double-001", "confirm-even-000",
                                          "confirm-even-001"]
    run = tmp_path / "run"
    tiny = ["--dim", "32", "--layers", "4", "--heads", "4", "--expert-hidden", "48", "--experts", "4"]
    assert main(["pretrain", "--out", str(run), "--steps", "2", "--checkpoints", "2", "--batch-size", "2",
                 "--device", "cpu", "--no-progress", "--tasks", str(tasks_file), *tiny]) == 0
    assert (run / "checkpoint-0002" / "model.safetensors").is_file()
    capsys.readouterr()
    assert main(["generate", "--checkpoint", str(run / "checkpoint-0002"), "--prompt", tasks[0].prompt,
                 "--max-new-tokens", "5", "--json", "--device", "cpu"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert len(result["token_ids"]) <= 5
    # evaluate on the exported task file, compare two receipts, verify completions
    receipt, receipt2 = tmp_path / "eval.json", tmp_path / "eval2.json"
    assert main(["eval", "--checkpoint", str(run / "checkpoint-0002"), "--tasks", str(tasks_file),
                 "--max-new-tokens", "6", "--device", "cpu", "--out", str(receipt)]) == 0
    assert main(["eval", "--checkpoint", str(run / "checkpoint-0000"), "--tasks", str(tasks_file),
                 "--max-new-tokens", "6", "--device", "cpu", "--out", str(receipt2)]) == 0
    sampled = tmp_path / "sampled.json"
    assert main(["eval", "--checkpoint", str(run / "checkpoint-0000"), "--tasks", str(tasks_file), "--samples", "2",
                 "--max-new-tokens", "6", "--device", "cpu", "--out", str(sampled)]) == 0
    data = json.loads(receipt.read_text())
    assert len(data["checkpoint_sha256"]) == 64 and len(data["tasks"]) == 4
    assert json.loads(sampled.read_text())["settings"]["temperature"] == 0.35  # the several-samples default
    assert main(["compare", str(receipt), str(receipt2)]) == 0
    assert "McNemar" in capsys.readouterr().out
    assert main(["compare", str(receipt), str(sampled)]) == 2
    assert "sampled differently" in capsys.readouterr().err
    completions = tmp_path / "completions.jsonl"
    completions.write_text("".join(json.dumps({"prompt": t.prompt, "completion": c, "entry_point": t.entry_point,
                                               "cases": [[list(a), e] for a, e in t.cases]}) + "\n"
                                   for t, c in zip(tasks, ["\n    return x * 2\n", "\n    import os\n",
                                                           "\n    return x\n", "\n    return x % 2 == 0\n"])))
    verified = tmp_path / "verified.jsonl"
    assert main(["verify", "--in", str(completions), "--out", str(verified)]) == 0
    statuses = [json.loads(line)["verdict"]["status"] for line in verified.read_text().splitlines()]
    assert statuses == ["passed", "invalid", "failed", "passed"]
    # a second run into the same folder is refused with a clear message
    assert main(["pretrain", "--out", str(run), "--steps", "2", "--checkpoints", "2", "--device", "cpu", *tiny]) == 2
    assert "never overwrites" in capsys.readouterr().err


def test_bad_arguments_are_clear_errors(capsys, tmp_path):
    assert main(["generate", "--checkpoint", str(tmp_path / "nope"), "--prompt", "x", "--device", "cpu"]) == 2
    assert "not a glm53 checkpoint" in capsys.readouterr().err


def test_escapes_keep_non_ascii_text():
    from glm53.decode.commands import unescape

    assert unescape(r"café\n\tx\\y\x41\u00e9") == "café\n\tx\\yAé"


def test_ctrl_c_names_the_checkpoint_and_the_resume_command(tmp_path):
    import argparse

    from glm53.cli import interrupted_message

    run = tmp_path / "run"
    (run / "checkpoint-0100").mkdir(parents=True)
    (run / "checkpoint-0100" / "metadata.json").write_text("{}")
    (run / "checkpoint-0200").mkdir()  # no metadata: an incomplete one is not offered
    args = argparse.Namespace(command="pretrain", out=str(run))
    text = interrupted_message(args, ["pretrain", "--out", str(run), "--steps", "400"])
    assert str(run / "checkpoint-0100") in text and "checkpoint-0200" not in text
    assert text.endswith(f"glm53 pretrain --out {run} --steps 400 --resume")
    assert "nothing partial" in interrupted_message(argparse.Namespace(command="eval", out="x.json"), ["eval"])


def test_every_flag_has_help_text():
    import argparse

    from glm53.cli import build_parser

    missing = []

    def walk(parser, name):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(sub, f"{name} {sub_name}")
            elif not action.help and action.dest not in ("help", "command", "tasks_command"):
                missing.append(f"{name} {action.option_strings or action.dest}")

    walk(build_parser(), "glm53")
    assert not missing, missing
