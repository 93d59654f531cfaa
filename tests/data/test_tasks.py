import itertools
import json

import pytest

from glm53.data.tasks import (EVAL_SPLITS, FAMILIES, FAMILY_NAMES, frozen_tasks, pretraining_task, pretraining_text,
                              read_tasks, reserved_entry_points, write_tasks)


def run_case(source: str, entry_point: str, args, expected) -> bool:
    namespace: dict = {}
    exec(compile(source, "<task>", "exec"), namespace)  # our own canonical bodies only
    actual = namespace[entry_point](*args)
    return type(actual) is type(expected) and actual == expected


def test_reference_names_and_prompt_are_reproduced_exactly():
    task = frozen_tasks("confirm", 1, "double")[0]
    assert task.task_id == "confirm-double-000"
    assert task.prompt == "# Complete this Python function.\n# Return two times x.\ndef double_ywkaoot(x):"
    assert frozen_tasks("confirm", 1, "increment")[0].entry_point == "increment_jgsmuqb"
    assert frozen_tasks("dev", 1, "increment")[0].entry_point == "increment_axkyima"
    dev_double = frozen_tasks("dev", 1, "double")[0]
    assert dev_double.entry_point == "double_hphcjzx" and "# Double the input.\n" in dev_double.prompt
    assert frozen_tasks("final", 1, "increment")[0].entry_point == "increment_ltjnkay"
    first = [pretraining_task(i).entry_point for i in range(5)]
    assert first[0] == "double_fofienq"
    assert [name.split("_")[0] for name in first] == ["double", "even", "square", "double", "increment"]


def test_family_table_and_completion_shape():
    assert FAMILY_NAMES == ("increment", "double", "square", "absolute", "nonnegative", "even", "reverse", "list_sum")
    for family in FAMILIES:
        assert family.body.startswith("\n    return ") and family.body.endswith("\n")


@pytest.mark.parametrize("split", EVAL_SPLITS)
def test_canonical_bodies_pass_every_hidden_case(split):
    for task in frozen_tasks(split, per_family=3):
        assert len(task.cases) >= 8
        source = task.prompt + task.canonical_completion
        for args, expected in task.cases:
            assert run_case(source, task.entry_point, args, expected), (task.task_id, args)
        assert not run_case(task.prompt + "\n    return None\n", task.entry_point, *task.cases[0])


def test_hidden_cases_exclude_public_examples_and_defeat_a_lookup_table():
    for family in FAMILIES:
        task = frozen_tasks("confirm", 1, family.name)[0]
        public_inputs = [args for args, _ in family.public_examples]
        assert not any(tuple(args) in public_inputs for args, _ in task.cases)
        table = "".join(f"    if {family.arg} == {args[0]!r}:\n        return {expected!r}\n"
                        for args, expected in family.public_examples)
        source = task.prompt + "\n" + table + "    return None\n"
        assert not all(run_case(source, task.entry_point, a, e) for a, e in task.cases)


def test_hidden_cases_differ_between_tasks_of_a_family():
    a, b = frozen_tasks("rl", 2, "increment")
    assert a.cases != b.cases


def test_splits_are_disjoint():
    names = {split: {t.entry_point for t in frozen_tasks(split, 256)} for split in EVAL_SPLITS}
    for a, b in itertools.combinations(EVAL_SPLITS, 2):
        assert not names[a] & names[b], (a, b)
    assert len(reserved_entry_points()) == sum(len(v) for v in names.values())


def test_no_evaluation_name_in_the_pretraining_stream():
    reserved = reserved_entry_points()
    # 400 steps x 32 rows: the whole reference pretraining run, and more
    stream = {pretraining_task(i).entry_point for i in range(16_000)}
    assert not stream & reserved
    for split in EVAL_SPLITS:
        for task in frozen_tasks(split, 8):
            assert task.entry_point in reserved


def test_pretraining_text_is_prompt_plus_body():
    text = pretraining_text(0)
    assert text == "# Complete this Python function.\n# Double the input.\ndef double_fofienq(x):\n    return x * 2\n"


def test_task_file_round_trip_and_validation(tmp_path):
    tasks = frozen_tasks("confirm", 2)
    path = tmp_path / "confirm.jsonl"
    write_tasks(tasks, path)
    assert read_tasks(path) == tasks
    line = json.loads(path.read_text().splitlines()[0])
    assert set(line) == {"task_id", "family", "prompt", "entry_point", "cases"}
    with pytest.raises(FileExistsError):
        write_tasks(tasks, path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": "x", "family": "f", "prompt": "p"}\n')
    with pytest.raises(ValueError, match="missing keys"):
        read_tasks(bad)
    bad.write_text("not json\n")
    with pytest.raises(ValueError, match="not valid JSON"):
        read_tasks(bad)


def test_unknown_split_and_family_are_clear_errors():
    with pytest.raises(ValueError, match="unknown split"):
        frozen_tasks("test")
    with pytest.raises(ValueError, match="unknown task family"):
        frozen_tasks("dev", 1, "fizzbuzz")
