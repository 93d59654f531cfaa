"""A user's own primitive file: the worked example works, bad files are refused with one line."""

import pytest

from glm53.data.broad import EXAMPLE, RegistryError, export_tasks, frozen_broad_tasks, load_registry

GOOD = '''
[[primitive]]
name = "triple"
args = { a = "int" }
result = "int"
expr = "{a} * 3"
phrasings = ["three times {a}", "{a} tripled", "the triple of {a}"]
examples = [[[2], 6]]
'''


def test_worked_example_merges_and_generates():
    registry = load_registry(EXAMPLE)
    assert {"count_upper", "clamp", "second_largest"} <= set(registry.by_name)
    assert "{a} and {b} added together" in registry.by_name["add"].phrasings
    assert "count_upper/h1" in registry.held_out_phrasing_ids
    roots = {t.root for t in frozen_broad_tasks("dev", 80, registry)}
    assert roots & {"count_upper", "clamp", "second_largest"}


def test_export_with_an_extra_file(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(GOOD)
    tasks = export_tasks("dev", 5, extra=path)
    assert len(tasks) == 5 and all(t.language == "python" for t in tasks)
    with pytest.raises(ValueError, match="frozen"):
        export_tasks("dev", 5, seed=1)


@pytest.mark.parametrize("text, problem", [
    ("[[primitive]\nname = 'x'", "not valid TOML"),
    (GOOD.replace('examples = [[[2], 6]]', 'examples = [[[2], 7]]'), "returns 6 on example 0, expected 7"),
    (GOOD.replace('"{a} tripled", ', ''), "at least 3 phrasings"),
    (GOOD.replace('"{a} tripled"', '"tripled"'), "must name every slot"),
    (GOOD.replace('expr = "{a} * 3"', 'expr = "{a} * 3"\ncolour = "red"'), "unknown keys"),
    (GOOD.replace('"{a} * 3"', '"__import__(\'os\')"'), "placeholders|slots|name"),
    (GOOD.replace('name = "triple"', 'name = "add"'), "already defined"),
    (GOOD.replace('result = "int"', 'result = "float"'), "unknown type"),
    (GOOD + 'block = """\n{out} = {a} + 3\n"""\n', "block returns 5 on example 0"),
    (GOOD + 'requires = "{a} > 5"\n', "requires returns False on example 0, expected True"),
    (GOOD.replace('"{a} * 3"', '"{a} * 0"').replace("[[[2], 6]]", "[[[2], 0]]"), "no usable task"),
    ('[[phrasing]]\nprimitive = "nope"\ntext = "x"\n', "unknown primitive"),
])
def test_bad_files_are_refused_with_one_line(tmp_path, text, problem):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(RegistryError, match=problem) as err:
        load_registry(path)
    assert "\n" not in str(err.value) and str(path.name) in str(err.value)
