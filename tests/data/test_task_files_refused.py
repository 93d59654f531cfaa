"""Task files no completion could ever pass are refused when read and before one is written, in one line naming
the file and line, the task and the fix: an entry point that is a class, a method or a nested function (opened by
an indented `def`), or a prompt whose code starts indented (every program an IndentationError)."""

import json

import pytest

from glm53.cli import main
from glm53.data.suites import get_suite
from glm53.data.tasks import Task, check_entry_point, frozen_tasks, read_tasks, write_tasks

ROW = {"family": "f", "cases": [[[1], 1]]}
BAD = [
    # (name, prompt, entry point, what the line says after "FILE:1: ")
    ("a class", "class Foo:\n    def Foo(self, x):", "Foo",
     "entry_point 'Foo' is a class the prompt defines, not a function, so no completion of task 't-a class' can ever "
     "pass (the verifier calls the entry point with each case's arguments and compares what it returns); set "
     "entry_point to a function the prompt opens with a `def` at the start of a line"),
    ("a class with no def", "class Foo:\n    pass\n", "Foo", "entry_point 'Foo' is a class the prompt defines"),
    ("a method", "class K:\n    def f(self, x):", "f",
     "entry_point 'f' is opened by an indented `def` (a method or a nested function), which the verifier cannot call "
     "by its name, so no completion of task 't-a method' can ever pass; open it with `def f(` at the start of a line"),
    ("a nested function", "def outer(x):\n    def f(y):", "f", "entry_point 'f' is opened by an indented `def`"),
    ("an indented prompt", "    def f(x):", "f",
     "the prompt of task 't-an indented prompt' starts indented ('def f(x):' after 4 blanks), so every program made "
     "from it is an IndentationError and no completion can ever pass; remove the indentation, so that `def f(` "
     "starts its line"),
    ("an indented comment then code", "# doubles x\n\tdef f(x):", "f", "starts indented ('def f(x):' after 1 blanks)"),
    ("a name defined by no def", "f = lambda x: x\n", "f",
     "entry_point 'f' is not a function its prompt opens (the prompt has no `def`), so no completion of task "
     "'t-a name defined by no def' can ever pass"),
]


@pytest.mark.parametrize("name, prompt, entry_point, message", BAD, ids=[b[0] for b in BAD])
def test_a_task_nothing_can_pass_is_refused_naming_file_task_and_fix(tmp_path, capsys, name, prompt, entry_point,
                                                                      message):
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"task_id": f"t-{name}", "prompt": prompt, "entry_point": entry_point, **ROW}) + "\n")
    with pytest.raises(ValueError) as caught:
        read_tasks(path)
    assert str(caught.value).startswith(f"{path}:1: ") and message in str(caught.value), str(caught.value)
    # the commands that read task files say it in one line, before any work
    assert main(["eval", "--checkpoint", str(tmp_path / "none"), "--tasks", str(path), "--out",
                 str(tmp_path / "e.json"), "--accept-partial-isolation"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{path}:1: " in err and message in err, err
    # and write_tasks will not write what read_tasks refuses
    task = Task(f"t-{name}", "f", prompt, entry_point, (((1,), 1),))
    with pytest.raises(ValueError, match="(not written)"):
        write_tasks([task], tmp_path / "out.jsonl")
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "e.json").exists()


@pytest.mark.parametrize("prompt", [
    "def f(x):",
    "# Complete this Python function.\n# Double x.\ndef f(x):",
    "    # an indented comment is no code\ndef f(x):",
    "\n\ndef f(x):\n    \"\"\"Docstring lines are indented, as a body is.\"\"\"",
    "def helper(y):\n    return y\n\n\ndef f(x):",
    "import math\n\n@staticmethod\ndef f(x):",
])
def test_prompts_that_open_their_entry_point_at_the_top_level_pass(prompt):
    check_entry_point(prompt, "f", "t", "t")


def test_every_shipped_split_opens_its_entry_points_at_the_top_level():
    from glm53.data.broad.human import human_tasks

    broad = get_suite("broad")
    tasks = [*(t for split in ("dev", "rl", "final", "confirm") for t in frozen_tasks(split, 4)), *human_tasks(),
             *(t for split in ("dev", "rl", "confirm", "compose", "phrase") for t in broad.tasks(split, 20))]
    for task in tasks:
        check_entry_point(task.prompt, task.entry_point, task.task_id, task.task_id)
