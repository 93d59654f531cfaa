"""`glm53 verify` on a file with bad rows: every bad row named as `path:line` (1-based), nothing written; with
--skip-bad-rows the rest judged and a `refused` verdict for each bad row; a NaN expected value is one bad row;
`--in -` reads standard input; the summary counts timeouts."""

import io
import json

import pytest

from glm53.cli import main
from glm53.verify.verifier import SandboxPool
from glm53.verify.verify_file import verify_file

GOOD = {"prompt": "def f(x):\n", "completion": "    return x + 1\n", "entry_point": "f", "cases": [[[1], 2], [[0], 1]]}


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(workers=2) as p:
        yield p


def _rows(tmp_path):
    path = tmp_path / "rows.jsonl"
    lines = [json.dumps(GOOD), "{not json", json.dumps(GOOD), "",
             '{"prompt": "def f(x):\\n", "completion": "    return x + 1\\n", "entry_point": "f", '
             '"cases": [[[1], NaN]]}',
             json.dumps({**GOOD, "cases": []}), json.dumps(GOOD)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_every_bad_row_is_named_by_its_line_and_nothing_is_written(tmp_path, pool):
    path = _rows(tmp_path)
    with pytest.raises(ValueError) as caught:
        verify_file(path, tmp_path / "out.jsonl", pool=pool)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("3 bad rows: ")
    assert f"{path}:2: not valid JSON" in message
    assert f"{path}:5: case 0: the expected value holds NaN" in message  # one row, not the whole file
    assert f"{path}:6: 'cases' is empty" in message
    assert ":1:" not in message and ":3:" not in message and ":7:" not in message
    assert "--skip-bad-rows" in message
    assert not (tmp_path / "out.jsonl").exists()


def test_skip_bad_rows_judges_the_rest_and_refuses_each_bad_row_in_order(tmp_path, pool):
    path = _rows(tmp_path)
    counts = verify_file(path, tmp_path / "out.jsonl", pool=pool, skip_bad_rows=True)
    assert counts == {"passed": 3, "refused": 3}
    verdicts = [json.loads(line)["verdict"] for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [v["status"] for v in verdicts] == ["passed", "refused", "passed", "refused", "refused", "passed"]
    assert verdicts[1]["message"].startswith(f"{path}:2: not valid JSON")
    assert "NaN" in verdicts[3]["message"] and verdicts[3]["total_cases"] == 1


def test_the_cli_reads_standard_input_and_counts_timeouts_and_refusals(tmp_path, monkeypatch, capsys):
    spinning = {**GOOD, "completion": "    while True:\n        pass\n", "language": "python"}
    text = "\n".join([json.dumps(GOOD), json.dumps(spinning), '{"prompt": 1}']) + "\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    assert main(["verify", "--in", "-", "--out", str(tmp_path / "out.jsonl"), "--skip-bad-rows"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line == "verified 3 programs: passed 1, refused 1, timeout 1", line
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(GOOD) + "\n"))
    assert main(["verify", "--in", "-", "--out", str(tmp_path / "again.jsonl")]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "verified 1 programs: passed 1, timeout 0"
    monkeypatch.setattr("sys.stdin", io.StringIO('{"prompt": 1}\n'))
    assert main(["verify", "--in", "-", "--out", str(tmp_path / "never.jsonl")]) != 0
    assert "error: 1 bad row: <stdin>:1: 'prompt' must be a str, got int. Fix the row" in capsys.readouterr().err
    assert not (tmp_path / "never.jsonl").exists()
