"""The human split (glm53/data/broad/human.jsonl): packaged with its header, evaluation only (nothing of it in
the pretraining stream or the rl split), every reference solution passing its cases through the verifier."""

import json
import re

from glm53.cli import main
from glm53.data.broad import broad_pretraining_task, frozen_broad_tasks
from glm53.data.broad.human import HUMAN_FILE, human_rows, human_tasks
from glm53.data.tasks import read_tasks
from glm53.verify import verify_many

STREAM_DOCS = 5000
HEADER = "# Complete this Python function."


def _descriptions(prompt: str) -> list[str]:
    """A prompt's description lines, without the header line, the '# ' and the def line."""
    return [line[2:] for line in prompt.split("\n")[:-1] if line != HEADER]


def test_the_file_opens_with_its_header_and_holds_88_tasks():
    lines = HUMAN_FILE.read_text(encoding="utf-8").splitlines()
    header = [line for line in lines if line.startswith("#")]
    assert lines[: len(header)] == header and header[0] == "# # glm53 human split"
    assert any("evaluation-only split (never train on it)" in line for line in header)
    assert any("none was taken or adapted from any public benchmark" in line for line in header)
    tasks = human_tasks()
    assert len(tasks) == 88 and len({t.entry_point for t in tasks}) == 88
    assert {t.family for t in tasks} == {"human"} and {t.language for t in tasks} == {"python"}
    assert [t.task_id for t in tasks] == [f"human-{i:03d}" for i in range(1, 89)]
    assert all(r["solution"].startswith("\n    ") for r in human_rows())
    assert read_tasks(HUMAN_FILE) == tasks  # the ordinary task-file reader skips the header


def test_every_solution_passes_its_cases_at_the_python_level():
    rows, tasks = human_rows(), human_tasks()
    items = [(t.prompt + r["solution"], t.entry_point, t.cases) for t, r in zip(tasks, rows)]
    verdicts = verify_many(items, timeout_s=5.0, language="python")
    failed = [(t.task_id, v.status, v.message) for t, v in zip(tasks, verdicts) if not v.passed]
    assert not failed


def test_nothing_of_the_human_split_is_in_the_stream_or_the_rl_split():
    tasks = human_tasks()
    names = {t.entry_point for t in tasks}
    prompts = [t.prompt for t in tasks]
    lines = {d for t in tasks for d in _descriptions(t.prompt) if len(d.split()) >= 4}  # not "list." (wrapping)
    descriptions = {" ".join(_descriptions(t.prompt)) for t in tasks}
    for source, docs in (("stream", [broad_pretraining_task(i) for i in range(STREAM_DOCS)]),
                         ("rl split", frozen_broad_tasks("rl", 1000))):
        texts = [d.prompt + d.body for d in docs]
        assert not names & {d.entry_point for d in docs}, source
        joined = "\n".join(texts)
        # a human name is never defined or called, and one with an underscore never appears as a whole word (plain
        # words such as "total" may: "the total of the decimal digits")
        assert not [n for n in names if re.search(rf"\b{n}\(", joined)], source
        assert not [n for n in names if "_" in n and re.search(rf"\b{n}\b", joined)], source
        assert not [p for p in prompts if p in joined], source
        seen_lines = {line for d in docs for line in _descriptions(d.prompt)}
        assert not lines & seen_lines, source
        seen = "\n".join(" ".join(_descriptions(d.prompt)) for d in docs)
        assert not [d for d in descriptions if d in seen], source


def test_export_the_human_split(tmp_path, capsys):
    out = tmp_path / "human.jsonl"
    assert main(["tasks", "export", "--suite", "broad", "--split", "human", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 88 and all(r["language"] == "python" and "solution" not in r for r in rows)
    assert read_tasks(out) == human_tasks()
    first = tmp_path / "first.jsonl"
    assert main(["tasks", "export", "--suite", "broad", "--split", "human", "--count", "5", "--out", str(first)]) == 0
    assert len(read_tasks(first)) == 5
