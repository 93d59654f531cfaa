"""The suite registry (glm53/data/suites.py): the reference suite is tasks.py unchanged, the broad suite gives its
splits, stream, language level, stop rule and cap; --suite and a sweep spec's `suite` choose it; bad input is one
line before anything is written."""

import json

import pytest

from glm53.cli import main
from glm53.data import tasks as reference
from glm53.data.broad import broad_pretraining_text, frozen_broad_tasks
from glm53.data.suites import SUITE_NAMES, get_suite, suite_settings
from glm53.data.tasks import Task, read_tasks, task_from_json
from glm53.train.run_folder import started
from glm53.train.pretrain_config import PretrainConfig


def test_registry_names_and_unknown_suite():
    assert SUITE_NAMES == ("reference", "broad") and get_suite(None).name == "reference"
    with pytest.raises(ValueError, match="unknown suite 'bogus'; suites are reference, broad"):
        get_suite("bogus")


def test_reference_suite_is_tasks_py_unchanged():
    suite = get_suite("reference")
    assert (suite.language, suite.stop, suite.max_new_tokens, suite.fit_context) == ("reference", "statement", 48,
                                                                                      False)
    assert suite.tasks("confirm", 2, "double,even") == reference.frozen_tasks("confirm", 2, "double,even")
    assert [suite.pretraining_text(i, 7) for i in range(20)] == [reference.pretraining_text(i, 7) for i in range(20)]
    assert suite.defaults("pretrain") == suite.defaults("rl") == suite.defaults("eval") == {}
    assert suite.context_problem(64, 32) is None  # the reference keeps its own (runtime) length checks
    assert "language" not in reference.frozen_tasks("dev", 1)[0].to_json()  # its task files stay as they were


def test_broad_suite_splits_stream_and_defaults():
    suite = get_suite("broad")
    assert (suite.language, suite.stop, suite.fit_context) == ("python", "function", True)
    assert suite.eval_splits == ("dev", "rl", "confirm", "compose", "phrase", "human")
    assert [t.task_id for t in suite.tasks("compose", 5)] == [t.task_id for t in frozen_broad_tasks("compose", 5)]
    assert len(suite.tasks("human", 88)) == 88
    assert suite.pretraining_text(3) == broad_pretraining_text(3)
    roots = suite.tasks("dev", 100, "is_even,broad/every_other")
    assert len(roots) == 10 and {t.family for t in roots} == {"broad/is_even", "broad/every_other"}
    with pytest.raises(ValueError, match="no family 'increment'"):
        suite.tasks("rl", 5, "increment")
    with pytest.raises(ValueError, match="unknown split 'final' of the broad suite"):
        suite.tasks("final", 5)
    assert suite.max_document_tokens() == 337  # the human split's longest prompt + solution (335 bytes), BOS, EOS
    assert "too short for the broad suite" in suite.context_problem(192)
    assert "--sequence-length 128 is too short" in suite.context_problem(384, 128)
    assert suite.context_problem(384, 324) is None
    assert suite_settings({"suite": "broad", "steps": 3}, "pretrain") == {
        "sequence_length": 324, "dev_max_new_tokens": 192, "max_sequence_length": 384, "suite": "broad", "steps": 3}
    assert suite_settings({"steps": 3}, "pretrain") == {"steps": 3}


def test_task_rows_carry_their_language_and_comment_lines_are_skipped(tmp_path):
    row = {"task_id": "t", "family": "f", "prompt": "def f(x):", "entry_point": "f", "cases": [[[1], 1]]}
    assert task_from_json({**row, "language": "python"}).language == "python"
    assert task_from_json(row).language == "reference"
    with pytest.raises(ValueError, match="'language' must be one of reference, python"):
        task_from_json({**row, "language": "cobol"})
    path = tmp_path / "t.jsonl"
    path.write_text("# a header\n#\n" + json.dumps(row) + "\n\n")
    assert read_tasks(path) == [Task("t", "f", "def f(x):", "f", (((1,), 1),))]


def test_configs_take_the_suite_and_check_the_context():
    assert PretrainConfig(out="x", suite="broad", sequence_length=324, model=_model(384)).suite == "broad"
    with pytest.raises(ValueError, match="--max-sequence-length 192 is too short for the broad suite"):
        PretrainConfig(out="x", suite="broad")
    with pytest.raises(ValueError, match="--suite must be one of reference, broad"):
        PretrainConfig(out="x", suite="bogus")


def _model(context):
    from glm53 import ModelConfig

    return ModelConfig(max_sequence_length=context)


def test_tasks_export_suite_broad(tmp_path, capsys):
    out = tmp_path / "compose.jsonl"
    assert main(["tasks", "export", "--suite", "broad", "--split", "compose", "--count", "3", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["task_id"] for r in rows] == ["broad-compose-0000", "broad-compose-0001", "broad-compose-0002"]
    assert all(r["language"] == "python" for r in rows)
    assert [t.language for t in read_tasks(out)] == ["python"] * 3


BAD = [
    ("unknown suite", ["tasks", "export", "--suite", "bogus", "--split", "dev", "--out", "{out}.jsonl"],
     "unknown suite 'bogus'"),
    ("a split of the other suite", ["tasks", "export", "--split", "human", "--out", "{out}.jsonl"],
     "the reference suite has no split 'human'"),
    ("per family in the broad suite", ["tasks", "export", "--suite", "broad", "--split", "dev", "--per-family", "2",
                                       "--out", "{out}.jsonl"], "--per-family is for the reference suite"),
    ("a primitive file that does not parse", ["tasks", "export", "--suite", "broad", "--split", "dev", "--primitives",
                                              "{bad_toml}", "--out", "{out}.jsonl"], "not valid TOML"),
    ("a primitive that fails its own cases", ["tasks", "export", "--suite", "broad", "--split", "dev", "--primitives",
                                              "{bad_example}", "--out", "{out}.jsonl"], "returns 6 on example 0"),
    ("pretraining context too short", ["pretrain", "--suite", "broad", "--out", "{out}", "--max-sequence-length",
                                       "256"], "--max-sequence-length 256 is too short for the broad suite"),
    ("pretraining rows too short", ["pretrain", "--suite", "broad", "--out", "{out}", "--sequence-length", "200"],
     "--sequence-length 200 is too short for the broad pretraining stream"),
    ("run of the broad suite with the full preset", ["run", "--suite", "broad", "--preset", "full", "--out", "{out}"],
     "too short for the broad suite"),
    ("run of an unknown suite", ["run", "--suite", "bogus", "--out", "{out}"], "invalid choice: 'bogus'"),
    ("eval of an unknown suite", ["eval", "--suite", "bogus", "--checkpoint", "{out}", "--split", "dev", "--out",
                                  "{out}.json"], "invalid choice: 'bogus'"),
]

PRIMITIVE = '''
[[primitive]]
name = "triple"
args = { a = "int" }
result = "int"
expr = "{a} * 3"
phrasings = ["three times {a}", "{a} tripled", "the triple of {a}"]
examples = [[[2], 7]]
'''


@pytest.mark.parametrize("name, argv, message", BAD, ids=[b[0] for b in BAD])
def test_bad_suite_input_is_one_line_and_writes_nothing(tmp_path, capsys, name, argv, message):
    (tmp_path / "bad.toml").write_text("[[primitive]\nname = 'x'")
    (tmp_path / "example.toml").write_text(PRIMITIVE)
    values = {"out": str(tmp_path / "out"), "bad_toml": str(tmp_path / "bad.toml"),
              "bad_example": str(tmp_path / "example.toml")}
    assert main([a.format(**values) for a in argv]) == 2, name
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    for suffix in ("", ".json", ".jsonl"):
        assert not ((tmp_path / f"out{suffix}").is_file() or started(tmp_path / f"out{suffix}")), name


def test_a_run_started_before_suites_resumes_as_the_reference_suite(tmp_path):
    from glm53.train.run_folder import check_resume_settings
    from glm53.runtime.config import RESUMABLE_CHANGES

    now = PretrainConfig(out=str(tmp_path)).to_dict()
    (tmp_path / "run.json").write_text(json.dumps({k: v for k, v in now.items() if k != "suite"}))
    check_resume_settings(tmp_path, now, RESUMABLE_CHANGES)
    with pytest.raises(ValueError, match="settings differ .*: suite"):
        check_resume_settings(tmp_path, {**now, "suite": "broad"}, RESUMABLE_CHANGES)


def test_a_suite_says_which_splits_it_scores_whole():
    """`Suite.eval_tasks` is the one place the rule is written: the broad suite's human split is scored whole
    (88 tasks) whatever count is asked; every other split gives its first `count` tasks (reference: per family)."""
    broad, reference = get_suite("broad"), get_suite("reference")
    assert broad.scored_whole == ("human",) and reference.scored_whole == ()
    assert len(broad.eval_tasks("human", 3)) == 88
    assert [t.task_id for t in broad.eval_tasks("compose", 3)] == [t.task_id for t in broad.tasks("compose", 3)]
    assert [t.task_id for t in reference.eval_tasks("confirm", 2)] == [t.task_id for t in reference.tasks("confirm", 2)]
