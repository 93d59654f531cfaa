"""glm53.interop.datasets_io: task splits written by `glm53 tasks export --format datasets|parquet` (a reference split,
a broad split in docstring style, the whole suite) read back by --tasks as the rows the JSON Lines file holds, so as
equal tasks; a corpus as a Dataset or parquet reads as the JSON Lines corpus's documents; bad input is one line, and
nothing is written over an existing --out."""

from __future__ import annotations

import json
import sys

import pytest

datasets = pytest.importorskip("datasets", reason="needs the hf extra: bash scripts/install.sh --hf")

import torch  # noqa: E402

from glm53 import GLM53, ModelConfig  # noqa: E402
from glm53.checkpoints.format import save_checkpoint  # noqa: E402
from glm53.cli import main  # noqa: E402
from glm53.data.corpus import load_corpus, read_documents  # noqa: E402
from glm53.data.suites import get_suite  # noqa: E402
from glm53.data.tasks import read_tasks  # noqa: E402
from glm53.interop.datasets_io import read_dataset_tasks  # noqa: E402

from ..tiny import TINY  # noqa: E402

REFERENCE = ["--split", "dev", "--per-family", "2"]
BROAD = ["--suite", "broad", "--split", "dev", "--count", "3", "--prompt-style", "docstring"]
TEXTS = ["def f(x):\n    return x\n", "print('h\u00e9llo')\n", "", "# a comment\n", "x = 1\n" * 40,
         "def g():\n    pass\n"]


def export(tmp_path, name: str, flags: list[str], form: str) -> str:
    out = str(tmp_path / name)
    assert main(["tasks", "export", *flags, "--format", form, "--out", out]) == 0
    return out


def one_line_error(capsys, argv: list[str], message: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("flags", [REFERENCE, BROAD], ids=["reference", "broad-docstring"])
def test_a_split_round_trips_through_save_to_disk_and_parquet(tmp_path, flags):
    jsonl = export(tmp_path, "tasks.jsonl", flags, "jsonl")
    lines = [json.loads(line) for line in open(jsonl, encoding="utf-8")]
    for out in (export(tmp_path, "ds", flags, "datasets"), export(tmp_path, "tasks.parquet", flags, "parquet")):
        assert [row for _, _, row in read_dataset_tasks(out)] == lines  # every field, cases' ints and bools exact
        assert read_tasks(out) == read_tasks(jsonl)
    if "broad" in flags:
        assert lines[0]["task_id"].endswith("-doc") and '"""' in lines[0]["prompt"] and lines[0]["depth"] >= 1


def test_cases_are_stored_as_their_json_text(tmp_path):
    out = export(tmp_path, "ds", ["--split", "dev", "--per-family", "1", "--families", "increment,even"], "datasets")
    dataset = datasets.load_from_disk(out)
    assert dataset.column_names == ["task_id", "family", "prompt", "entry_point", "cases"]  # a reference row's keys
    assert isinstance(dataset[0]["cases"], str)
    assert [[12345678901234567890], 12345678901234567891] in json.loads(dataset[0]["cases"])  # past int64
    assert {expected for _, expected in json.loads(dataset[1]["cases"])} == {True, False}


def test_the_whole_suite_is_a_datasetdict_of_every_split(tmp_path):
    out = export(tmp_path, "suite", ["--suite", "broad", "--split", "all", "--count", "2"], "datasets")
    suite = get_suite("broad")
    assert list(datasets.load_from_disk(out)) == list(suite.splits)
    for split in suite.splits:
        assert [t.task_id for t in read_tasks(f"{out}:{split}")] == [t.task_id for t in suite.tasks(split, 2)]
    folder = export(tmp_path, "parquets", ["--split", "all", "--per-family", "1"], "parquet")
    assert read_tasks(f"{folder}:confirm") == read_tasks(f"{folder}/confirm.parquet") == \
        get_suite("reference").tasks("confirm", 1)


def test_generate_reads_a_split_of_a_datasetdict(tmp_path):
    torch.manual_seed(0)
    save_checkpoint(tmp_path / "ckpt", GLM53(ModelConfig(**{**TINY, "max_sequence_length": 128})), {"step": 0})
    out = export(tmp_path, "suite", ["--split", "all", "--per-family", "1", "--families", "double,even"], "datasets")
    completions = tmp_path / "completions.jsonl"
    assert main(["generate", "--checkpoint", str(tmp_path / "ckpt"), "--tasks", f"{out}:confirm", "--max-new-tokens",
                 "4", "--device", "cpu", "--out", str(completions)]) == 0
    rows = [json.loads(line) for line in completions.read_text().splitlines()]
    assert [r["task_id"] for r in rows] == ["confirm-double-000", "confirm-even-000"]


def test_a_dataset_made_elsewhere_reads_with_cases_as_lists_and_nulls_as_absent(tmp_path):
    prompt = "# Complete this Python function.\n# Reverse the list.\ndef flip(values):"
    rows = {"task_id": ["a", "b"], "family": ["lists"] * 2, "prompt": [prompt] * 2, "entry_point": ["flip"] * 2,
            "cases": [[[[1, 2], [2, 1]]], [[[3], [3]]]], "language": [None, "python"], "note": ["x", "y"]}
    datasets.Dataset.from_dict(rows).save_to_disk(str(tmp_path / "made"))
    first, second = read_tasks(tmp_path / "made")
    assert first.cases == (((1, 2), [2, 1]),) and first.language == "reference" and second.language == "python"


def test_a_corpus_as_a_dataset_or_parquet_reads_as_the_jsonl_corpus(tmp_path):
    jsonl = tmp_path / "corpus.jsonl"
    jsonl.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS), encoding="utf-8")
    table = datasets.Dataset.from_dict({"text": TEXTS, "source": ["a"] * len(TEXTS)})  # other columns are ignored
    table.save_to_disk(str(tmp_path / "ds"))
    table.to_parquet(str(tmp_path / "corpus.parquet"))
    datasets.DatasetDict({"train": table}).save_to_disk(str(tmp_path / "dd"))
    expected, skipped, _ = read_documents(str(jsonl))
    assert skipped["empty"] == 1
    reference = load_corpus(str(jsonl), 0.3, 16).summary
    for path, kind in ((tmp_path / "ds", "datasets"), (tmp_path / "corpus.parquet", "parquet"),
                       (f"{tmp_path / 'dd'}:train", "datasets")):
        documents, again, found = read_documents(str(path))
        assert [(d.key, d.data) for d in documents] == [(d.key, d.data) for d in expected] and again == skipped
        assert found == kind and documents[0].name == "row 0"
        summary = load_corpus(str(path), 0.3, 16).summary
        for key in ("documents", "bytes", "validation_documents", "tokens", "train_rows", "validation_rows"):
            assert summary[key] == reference[key], key


@pytest.fixture
def bad(tmp_path):
    """A folder that is no dataset, a DatasetDict, datasets without the column they need, a null text."""
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("not a dataset\n")
    datasets.DatasetDict({"dev": datasets.Dataset.from_dict({"text": ["a"]}),
                          "rl": datasets.Dataset.from_dict({"text": ["b"]})}).save_to_disk(str(tmp_path / "dd"))
    datasets.Dataset.from_dict({"task_id": ["t"], "family": ["f"], "prompt": ["def f(x):"],
                                "entry_point": ["f"]}).save_to_disk(str(tmp_path / "no-cases"))
    datasets.Dataset.from_dict({"content": ["x = 1\n"]}).to_parquet(str(tmp_path / "no-text.parquet"))
    datasets.Dataset.from_dict({"text": ["x = 1\n", None]}).to_parquet(str(tmp_path / "null-text.parquet"))
    return tmp_path


@pytest.mark.parametrize("name, message", [
    ("plain", "is a folder; give a JSON Lines file"),
    ("dd", "holds the splits dev, rl, not one dataset; choose one as"),
    ("dd:test", "has no split 'test'; its splits are dev, rl"),
    ("no-cases", "has no column 'cases' (its columns: task_id, family, prompt, entry_point)"),
])
def test_a_bad_task_dataset_is_one_line_before_any_model_loads(bad, capsys, name, message):
    one_line_error(capsys, ["generate", "--checkpoint", str(bad / "no-checkpoint"), "--tasks", str(bad / name),
                            "--device", "cpu", "--out", str(bad / "out.jsonl")], message)
    assert not (bad / "out.jsonl").exists()


@pytest.mark.parametrize("name, message", [
    ("dd", "holds the splits dev, rl, not one dataset; choose one as"),
    ("dd:test", "has no split 'test'"),
    ("no-text.parquet", "has no column 'text' (its columns: content); it needs 'text'"),
    ("null-text.parquet", 'null-text.parquet: row 1 has no "text" string (it is null)'),
])
def test_a_bad_corpus_dataset_is_one_line_before_the_run_folder(bad, capsys, name, message):
    one_line_error(capsys, ["pretrain", "--out", str(bad / "run"), "--corpus", str(bad / name), "--steps", "1",
                            "--device", "cpu", "--no-progress"], message)
    assert not (bad / "run").exists()


@pytest.mark.parametrize("form, name", [("datasets", "existing"), ("parquet", "existing.parquet")])
def test_an_existing_out_is_refused_and_nothing_written(tmp_path, capsys, form, name):
    (tmp_path / name).write_text("keep me\n")
    one_line_error(capsys, ["tasks", "export", *REFERENCE, "--format", form, "--out", str(tmp_path / name)],
                   "already exists; glm53 never overwrites")
    assert sorted(p.name for p in tmp_path.iterdir()) == [name] and (tmp_path / name).read_text() == "keep me\n"


def test_split_all_needs_a_dataset_form(tmp_path, capsys):
    one_line_error(capsys, ["tasks", "export", "--split", "all", "--out", str(tmp_path / "all.jsonl")],
                   "--split all writes every split of the suite")
    one_line_error(capsys, ["tasks", "export", *REFERENCE, "--format", "parquet", "--out", str(tmp_path / "dev")],
                   "give an --out ending in .parquet")
    one_line_error(capsys, ["tasks", "export", *REFERENCE, "--out", str(tmp_path / "dev.parquet")],
                   "--format jsonl writes JSON Lines, which a .parquet name would hide")
    assert list(tmp_path.iterdir()) == []


def test_without_the_package_each_use_is_one_line_naming_the_extra(tmp_path, capsys, monkeypatch):
    parquet, jsonl = export(tmp_path, "dev.parquet", REFERENCE, "parquet"), export(tmp_path, "dev.jsonl", REFERENCE,
                                                                                    "jsonl")
    monkeypatch.setitem(sys.modules, "datasets", None)  # as if not installed: find_spec and import both fail
    one_line_error(capsys, ["tasks", "export", *REFERENCE, "--format", "datasets", "--out", str(tmp_path / "ds")],
                   "install.sh --hf")
    assert not (tmp_path / "ds").exists()
    with pytest.raises(ValueError, match=r"dev\.parquet \(a parquet file\) needs datasets, from the hf extra: bash "
                                         r"scripts/install\.sh --hf"):
        read_tasks(parquet)
    assert len(read_tasks(jsonl)) == 16  # JSON Lines needs no extra
