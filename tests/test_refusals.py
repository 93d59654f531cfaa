"""A newcomer's refusals (issue 35): outputs probed before any work, task files that cannot contradict, cryptic
errors said in plain words. Each bad input ends in one stderr line with the key words, exit code 2, and nothing
written; the table shares tests/test_bad_inputs.py's files and check."""

import json
import os

import pytest
import torch

from glm53 import GLM53, ModelConfig
from glm53.cli import main
from glm53.data.tasks import frozen_tasks
from glm53.checkpoints.format import save_checkpoint

from .test_bad_inputs import TINY_FLAGS, files  # noqa: F401 - the shared fixture of damaged and good inputs
from .tiny import TINY


@pytest.fixture(scope="module")
def more(files):  # noqa: F811 - the fixture imported above
    """Task files that contradict themselves, a folder, and two eval receipts to compare."""
    root = files["root"] / "refusals"
    root.mkdir()
    good = frozen_tasks("dev", 1, "double")[0].to_json()
    rows = {"duplicate-ids": [good, good],
            "wrong-entry": [{**good, "entry_point": "triple"}],
            "no-def": [{**good, "prompt": "# Complete this Python function.\n# Double x.\n"}]}
    out = {}
    for name, lines in rows.items():
        (root / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
        out[name] = root / f"{name}.jsonl"
    out["folder"] = root
    receipt = {"settings": {"greedy": True}, "tasks": [{"task_id": "t", "family": "f", "samples": [{}], "passed": 1}]}
    for name in ("receipt-a", "receipt-b"):
        (root / f"{name}.json").write_text(json.dumps(receipt))
        out[name] = root / f"{name}.json"
    model = GLM53(ModelConfig(**{**TINY, "max_sequence_length": 160}))
    with torch.no_grad():
        model.embedding.weight.fill_(float("inf"))  # every score of every token inf: what a diverged run leaves
    save_checkpoint(root / "diverged", model, {"step": 0})
    out["diverged"] = root / "diverged"
    from glm53.train.rl_config import RLConfig

    (root / "rl-run.json").write_text(json.dumps(RLConfig(init="x", out=str(root / "rl")).to_dict()))
    out["rl-run"] = root / "rl-run.json"
    return {**files, **out}


UNDER_A_FILE = "is a file, not a folder"
# (name, argv with {placeholders}, what stderr must say)
CASES = [
    # 1. the output is probed before any work (here its folder is a file; every command that takes --out)
    ("eval into a file's folder", ["eval", "--checkpoint", "{root}/nope", "--tasks", "{tasks}", "--out",
                                   "{a-file}/r.json"], UNDER_A_FILE),  # before the checkpoint is even read
    ("verify into a file's folder", ["verify", "--in", "{no-cases}", "--out", "{a-file}/v.jsonl"], UNDER_A_FILE),
    ("compare into a file's folder", ["compare", "{receipt-a}", "{receipt-b}", "--out", "{a-file}/c.json"],
     UNDER_A_FILE),
    ("tasks export into a file's folder", ["tasks", "export", "--split", "dev", "--out", "{a-file}/t.jsonl"],
     UNDER_A_FILE),
    ("bench into a file's folder", ["bench", "--quick", "--out", "{a-file}/b.json"], UNDER_A_FILE),
    ("vision into a file's folder", ["vision", "--steps", "1", "--out", "{a-file}/v"], UNDER_A_FILE),
    ("export into a file's folder", ["export", "{good}", "--out", "{a-file}/e"], UNDER_A_FILE),
    ("pretrain into a file's folder", ["pretrain", "--out", "{a-file}/run", "--steps", "1", *TINY_FLAGS], UNDER_A_FILE),
    ("rl into a file's folder", ["rl", "--init", "{good}", "--out", "{a-file}/run", "--groups", "1"], UNDER_A_FILE),
    # 2. task files that contradict themselves
    ("a family twice", ["tasks", "export", "--split", "dev", "--families", "double,double", "--out", "{new}.jsonl"],
     "--families names double more than once"),
    ("an empty family list", ["tasks", "export", "--split", "dev", "--families", "", "--out", "{new}.jsonl"],
     "names no family"),
    ("a stray comma", ["tasks", "export", "--split", "dev", "--families", "double,", "--out", "{new}.jsonl"],
     "holds an empty name"),
    ("an empty broad family list", ["tasks", "export", "--suite", "broad", "--split", "dev", "--families", ",",
                                    "--out", "{new}.jsonl"], "names no family"),
    ("eval a family twice", ["eval", "--checkpoint", "{good}", "--split", "dev", "--families", "even,even", "--out",
                             "{new}.json"], "--families names even more than once"),
    ("duplicate task ids", ["eval", "--checkpoint", "{good}", "--tasks", "{duplicate-ids}", "--out", "{new}.json"],
     "duplicate-ids.jsonl:2: duplicate task_id 'dev-double-000' (first on line 1)"),
    ("an entry point the prompt does not open", ["eval", "--checkpoint", "{good}", "--tasks", "{wrong-entry}",
                                                 "--out", "{new}.json"],
     "wrong-entry.jsonl:1: entry_point 'triple' is not a function its prompt opens (the prompt defines double_"),
    ("a prompt with no def", ["pretrain", "--tasks", "{no-def}", "--out", "{new}", *TINY_FLAGS],
     "no-def.jsonl:1: entry_point 'double_"),
    ("a folder as the task file", ["eval", "--checkpoint", "{good}", "--tasks", "{folder}", "--out", "{new}.json"],
     "is a folder; give a JSON Lines file"),
    # 3. cryptic errors in plain words
    ("a temperature past float32", ["generate", "--checkpoint", "{good}", "--prompt", "x", "--temperature", "1e39"],
     "--temperature must be a finite number at most 3.4e38"),
    ("an infinite temperature", ["generate", "--checkpoint", "{good}", "--prompt", "x", "--temperature", "inf"],
     "--temperature must be a finite number at most 3.4e38"),
    ("scores that are not finite", ["generate", "--checkpoint", "{diverged}", "--prompt", "x", "--temperature", "0.8"],
     "next-token scores are not finite"),
    ("a verify timeout past poll's range", ["verify", "--in", "{no-cases}", "--out", "{new}.jsonl", "--timeout",
                                            "1e300"],
     "--timeout must be a finite number of seconds > 0 and at most 86400"),
    ("an eval timeout past poll's range", ["eval", "--checkpoint", "{good}", "--tasks", "{tasks}", "--timeout-s",
                                           "1e300", "--out", "{new}.json"],
     "--timeout-s must be at most 86400 seconds"),
    ("a context no memory holds", ["info", "--max-sequence-length", str(10**12)],
     "--max-sequence-length 1,000,000,000,000 needs about"),
    # 4. small ones
    ("vision with no seed", ["vision", "--seeds", ",", "--out", "{new}"], "argument --seeds: expected at least one"),
    ("vision with a seed twice", ["vision", "--seeds", "3,3", "--out", "{new}"], "expected each integer once"),
    ("vision with no eval examples", ["vision", "--eval-examples", "0", "--out", "{new}"],
     "--eval-examples must be >= 1"),
    # 5. issue 44's newcomer findings: refused before any work, naming the setting and the fix
    ("more threads than cores", ["pretrain", "--out", "{new}", "--steps", "1", "--threads", "100000", *TINY_FLAGS],
     "--threads 100000 is more than this machine's"),
    ("a vision batch past its bound", ["vision", "--batch-size", "100000", "--out", "{new}"],
     "--batch-size must be <= 10000, got 100000"),
    ("a dev token cap the context cannot hold", ["pretrain", "--out", "{new}", "--steps", "1",
                                                 "--max-sequence-length", "128", *TINY_FLAGS],
     "--dev-max-new-tokens 48 after the longest task prompt (95 tokens with BOS) needs a context of 143, more than "
     "--max-sequence-length 128; give --dev-max-new-tokens 33 or less, or --max-sequence-length 143 or more"),
    ("a rollout token cap the context cannot hold", ["rl", "--init", "{good}", "--out", "{new}", "--max-new-tokens",
                                                     "150"], "--max-new-tokens 150 after the longest task prompt"),
    ("a main job whose dev cap the context cannot hold", ["run", "--preset", "quick", "--out", "{new}",
                                                          "--pretrain.max-sequence-length", "128"],
     "give --pretrain.dev-max-new-tokens 33 or less, or --pretrain.max-sequence-length 143 or more"),
    ("more confirm tasks than the split holds", ["run", "--preset", "quick", "--out", "{new}", "--confirm-per-family",
                                                 "100000"],
     "--confirm-per-family 100,000 is more than the reference suite's splits hold (256 tasks per family)"),
    ("more rl tasks than the split holds", ["rl", "--init", "{good}", "--out", "{new}", "--tasks-per-family", "1000"],
     "--tasks-per-family 1,000 is more than the reference suite's splits hold"),
    ("a seed torch cannot take", ["pretrain", "--out", "{new}", "--seed", str(2 ** 70), *TINY_FLAGS],
     "--seed must be <= 4294967295"),
    ("a sweep seed torch cannot take", ["sweep", "pretraining-data", "--seeds", str(2 ** 70), "--plan"],
     "seeds must lie in [0, 4294967295]"),
    ("another command's run record as --config", ["pretrain", "--config", "{rl-run}", "--out", "{new}"],
     "rl-run.json records an RL run (glm53 rl), not a pretraining run (glm53 pretrain); replay it with the command "
     "that made it"),
]


@pytest.mark.parametrize("name, argv, message", CASES, ids=[c[0] for c in CASES])
def test_refused_in_one_plain_line(more, tmp_path, capsys, name, argv, message):
    from glm53.train.run_folder import started

    values = {**{k: str(v) for k, v in more.items()}, "new": str(tmp_path / "out")}
    assert main([a.format(**values) for a in argv]) == 2, name
    err = capsys.readouterr().err.strip()
    assert message in err, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err and ".tmp" not in err, err
    for suffix in ("", ".json", ".jsonl"):
        assert not (tmp_path / f"out{suffix}").exists() or not started(tmp_path / f"out{suffix}"), name
    assert sorted(p.name for p in more["a-file"].parent.iterdir() if p.name.startswith(".")) == []  # no probe left


# ---------------------------------------------------------------- 1. the probe itself

def test_a_read_only_folder_is_refused_before_any_work_and_named_as_given(tmp_path, monkeypatch):
    """Root ignores permission bits, so the probe makes a file; a read-only mount refuses it with EROFS."""
    import errno
    import tempfile

    from glm53.runtime.files import refuse_unwritable

    refuse_unwritable(tmp_path / "new" / "deeper" / "r.json")  # a missing folder is made in a writable one
    assert list(tmp_path.iterdir()) == []  # the probe file is gone again

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    with pytest.raises(ValueError, match=r"cannot write .*r\.json: the folder .* is not writable \(a read-only "
                                         r"file system\); choose another --out"):
        refuse_unwritable(tmp_path / "r.json")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a folder whatever its permission bits say")
def test_a_folder_without_write_permission_is_refused(tmp_path):
    from glm53.runtime.files import refuse_unwritable

    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        with pytest.raises(ValueError, match="Permission denied"):
            refuse_unwritable(locked / "r.json")
    finally:
        locked.chmod(0o755)


def test_a_write_that_fails_at_the_end_names_the_path_given_not_its_temporary(tmp_path):
    from glm53.runtime.files import AtomicDirectory, atomic_write_text

    (tmp_path / "file").write_text("x")
    for write in (lambda: atomic_write_text(tmp_path / "file" / "r.json", "{}"),
                  lambda: AtomicDirectory(tmp_path / "file" / "folder").__enter__()):
        with pytest.raises(ValueError) as caught:
            write()
        assert str(tmp_path / "file") in str(caught.value) and ".tmp" not in str(caught.value)


# ---------------------------------------------------------------- 2. task files

def test_write_tasks_refuses_what_read_tasks_would_refuse_and_writes_nothing(tmp_path):
    from dataclasses import replace

    from glm53.data.tasks import read_tasks, write_tasks

    tasks = frozen_tasks("dev", 2, "double")
    with pytest.raises(ValueError, match=r"t\.jsonl:3 \(not written\): duplicate task_id 'dev-double-000' \(first "
                                         r"on line 1\)"):
        write_tasks([*tasks, tasks[0]], tmp_path / "t.jsonl")
    with pytest.raises(ValueError, match=r"t\.jsonl:2 \(not written\): entry_point 'nope' is not a function"):
        write_tasks([tasks[0], replace(tasks[1], entry_point="nope")], tmp_path / "t.jsonl")
    assert list(tmp_path.iterdir()) == []
    write_tasks(tasks, tmp_path / "t.jsonl")  # the good ones still go through, and read back
    assert read_tasks(tmp_path / "t.jsonl") == tasks


def test_the_broad_and_human_splits_open_their_entry_points():
    from glm53.data.broad.human import human_tasks
    from glm53.data.suites import get_suite
    from glm53.data.tasks import check_entry_point

    for task in [*human_tasks(), *get_suite("broad").tasks("dev", 20)]:
        check_entry_point(task.prompt, task.entry_point, task.task_id)


# ---------------------------------------------------------------- 3. a full disk

SHORT_WRITE = """
import resource, signal, sys, torch
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails instead of killing the process
resource.setrlimit(resource.RLIMIT_FSIZE, (65536, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    torch.save({"x": torch.zeros(100_000)}, sys.argv[1])
except Exception as err:
    print(str(err))
"""


def test_torch_saves_short_write_is_said_as_a_likely_full_disk(tmp_path):
    """torch.save's own words for a write that came up short (a file-size limit here, a full disk in use), made
    in a child process so the limit touches nothing else."""
    import subprocess
    import sys

    from glm53.runtime.files import disk_full_message

    said = subprocess.run([sys.executable, "-c", SHORT_WRITE, str(tmp_path / "state.pt")], capture_output=True,
                          text=True, timeout=120).stdout.strip()
    assert "inline_container.cc" in said, said
    line = disk_full_message(RuntimeError(said), tmp_path / "run")
    assert line.startswith(f"the disk is likely full: writing {tmp_path / 'run'} failed, torch.save wrote fewer "
                           f"bytes than it meant to on the device that holds {tmp_path}"), line


def test_a_full_disk_on_a_real_small_file_system_is_one_plain_line(files, tmp_path, capsys):  # noqa: F811
    """A 256 KiB tmpfs (where mounting is allowed: root with CAP_SYS_ADMIN) fills as a 475 KB model is exported:
    safetensors' own error, said as one line naming the folder."""
    import subprocess

    disk = tmp_path / "disk"
    disk.mkdir()
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)],
                                 capture_output=True).returncode == 0
    except OSError:  # no mount command
        mounted = False
    if not mounted:
        pytest.skip("cannot mount a small tmpfs here")
    try:
        assert main(["export", str(files["good"]), "--out", str(disk / "e")]) == 2
        line = capsys.readouterr().err.strip()
        assert line.startswith(f"glm53 export: error: the disk is full: writing {disk / 'e'} failed, no space left "
                               f"on the device that holds {disk}"), line
        assert len(line.splitlines()) == 1 and "--debug" not in line
        assert list(disk.iterdir()) == []  # no partial folder, no temporary
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_a_full_disk_message_names_the_folder(tmp_path):
    import errno

    from glm53.runtime.files import disk_full_message

    assert disk_full_message(ValueError("other"), tmp_path) is None
    err = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    line = disk_full_message(err, tmp_path / "r.json")
    assert f"no space left on the device that holds {tmp_path}" in line and "MiB free now" in line


# ---------------------------------------------------------------- 4. small ones

def test_a_damaged_calibration_cache_is_said_once_and_rebuilt(capsys):
    from glm53.runtime.device import resolve_precision
    from glm53.runtime.kernel_settings import cache_file, read_cache

    path = cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    auto = [resolve_precision("auto", torch.device("cpu")) for _ in range(3)]  # falls back to the CPU-flag rule
    assert len(set(auto)) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and "rebuilds it" in err[0], err
    assert read_cache(path) == {}  # what calibrate starts from, so its write replaces the damaged file


def test_checkpoints_and_exports_are_readable_like_other_files(tmp_path):
    from glm53.checkpoints.export import export_model

    old = os.umask(0o022)
    try:
        save_checkpoint(tmp_path / "c", GLM53(ModelConfig(**TINY)), {"step": 0})
        export_model(tmp_path / "c", tmp_path / "e")
    finally:
        os.umask(old)
    modes = {f"{p.parent.name}/{p.name}": oct(p.stat().st_mode & 0o777) for p in tmp_path.glob("*/*")}
    assert set(modes.values()) == {"0o644"}, modes


@pytest.mark.slow
def test_a_resumed_receipt_carries_the_resume_points_hash(tmp_path):
    import shutil

    from glm53.checkpoints.format import read_metadata
    from glm53.train.pretrain import pretrain
    from glm53.train.pretrain_config import PretrainConfig

    def run(resume: bool) -> dict:
        cfg = PretrainConfig(out=str(tmp_path), steps=1, batch_size=1, sequence_length=128, progress=False,
                             resume=resume, model=ModelConfig(**{**TINY, "max_sequence_length": 160}))
        return pretrain(cfg, dev_tasks=[], log=lambda *_: None)  # no dev sampling: only the hash matters

    run(False)
    shutil.rmtree(tmp_path / "checkpoint-0001")  # as if stopped after the first checkpoint (step 0)
    (tmp_path / "training-receipt.json").unlink()
    receipt = run(True)
    assert receipt["resumed_from"] == {"path": "checkpoint-0000",
                                       "weights_sha256": read_metadata(tmp_path / "checkpoint-0000")["weights_sha256"]}


def test_a_folder_without_metadata_is_refused_unless_trusted(tmp_path, capsys):
    """A checkpoint folder without metadata.json cannot be checked against its recorded hashes: every command that
    loads one refuses it in one line, and --trust-unverified loads it and says so in the receipt."""
    import json
    import shutil

    from glm53.cli import main
    from glm53.model.config import ModelConfig
    from glm53.model.model import GLM53
    from glm53.checkpoints.format import save_checkpoint
    from tests.tiny import TINY

    good = tmp_path / "good"
    save_checkpoint(good, GLM53(ModelConfig(**{**TINY, "max_sequence_length": 192})), {"stage": "test"})
    bare = tmp_path / "bare"
    shutil.copytree(good, bare)
    (bare / "metadata.json").unlink()
    tasks = tmp_path / "tasks.jsonl"
    assert main(["tasks", "export", "--split", "dev", "--per-family", "1", "--families", "double",
                 "--out", str(tasks)]) == 0
    capsys.readouterr()
    for argv in (["eval", "--checkpoint", str(bare), "--tasks", str(tasks), "--out", str(tmp_path / "e.json"),
                  "--max-new-tokens", "4"],
                 ["generate", "--checkpoint", str(bare), "--prompt", "def f(x):", "--max-new-tokens", "2"],
                 ["rl", "--init", str(bare), "--out", str(tmp_path / "rl")],
                 ["export", str(bare), "--out", str(tmp_path / "exported")]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert "has no metadata.json" in err and "--trust-unverified" in err and len(err.splitlines()) == 1, err
        assert not any(p.name in ("e.json", "rl", "exported") for p in tmp_path.iterdir()), argv
    assert main(["eval", "--checkpoint", str(bare), "--tasks", str(tasks), "--out", str(tmp_path / "e.json"),
                 "--max-new-tokens", "4", "--trust-unverified"]) == 0
    receipt = json.loads((tmp_path / "e.json").read_text())
    assert receipt["checkpoint_verified"] is False and "loaded unchecked" in capsys.readouterr().err


def test_resuming_another_commands_run_says_so_in_one_line(tmp_path):
    """`glm53 rl --resume` on a pretraining folder named twenty "differing" settings; it names the kind of run."""
    import json

    from glm53.train.run_folder import check_run_folder
    from glm53.train.pretrain_config import PretrainConfig
    from glm53.train.rl_config import RLConfig

    (tmp_path / "run.json").write_text(json.dumps(PretrainConfig(out=str(tmp_path)).to_dict()))
    rl = RLConfig(init="x", out=str(tmp_path), resume=True).to_dict()
    with pytest.raises(ValueError, match=r"holds a pretraining run \(glm53 pretrain\), not an RL run \(glm53 rl\)"):
        check_run_folder(tmp_path, rl, True, set())


# ---------------------------------------------------------------- 5. issue 44's newcomer findings

def test_a_corpus_documents_key_is_hashed_once_not_once_per_row(monkeypatch):
    """A 5 MB JSON Lines row took minutes before step 1: its text (the row's key) was hashed again for each of its
    128-byte rows. The order keys now hash it once, and equal the plain per-row hash they replace."""
    import hashlib

    from glm53.data import corpus

    key = "x" * 50_000  # a JSON Lines row: its text is its key; 391 rows of 128 bytes
    rows = -(-(len(key) + 1) // 128)
    plain = [corpus._unit_hash(f"{key}\0{k}", "glm53-validation-order") for k in range(rows)]
    hashed, sha256 = [], hashlib.sha256

    class Counting:
        def __init__(self, data=b""):
            self.inner = sha256(data)
            hashed.append(len(data))

        def update(self, data):
            hashed.append(len(data))
            self.inner.update(data)

        def copy(self):
            twin = Counting.__new__(Counting)
            twin.inner = self.inner.copy()
            return twin

        def digest(self):
            return self.inner.digest()

    monkeypatch.setattr(corpus.hashlib, "sha256", Counting)
    cut = corpus._rows([corpus.Document("line 1", key, key.encode())], 128)
    assert len(cut) == rows and cut.order_keys == plain  # the same keys as the plain per-row hash, exactly
    assert sum(hashed) < len(key) + 10 * rows, sum(hashed)  # the key once, then a few bytes a row


def test_a_symlinked_folder_in_a_corpus_is_read_and_a_link_loop_ends(tmp_path):
    from glm53.data.corpus import read_documents

    sources = tmp_path / "sources"
    sources.mkdir()
    (sources / "a.py").write_text("def a():\n    return 1\n")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "linked").symlink_to(sources)
    (corpus / "loop").symlink_to(corpus)  # a link to the folder above: entered once, not forever
    documents, skipped, kind = read_documents(str(corpus))
    assert [d.name for d in documents] == ["linked/a.py"] and kind == "folder"


def test_a_raw_line_separator_inside_a_json_string_is_one_row(tmp_path):
    """U+2028 is legal raw inside a JSON string (json_text writes it raw); str.splitlines cut such a row in two."""
    from dataclasses import replace

    from glm53.data.tasks import read_tasks, write_tasks
    from glm53.runtime.files import atomic_write_text, json_text, read_jsonl

    task = frozen_tasks("dev", 1, "double")[0]
    task = replace(task, prompt=task.prompt.replace("# Complete", "# \u2028Complete"))
    write_tasks([task], tmp_path / "t.jsonl")
    assert "\u2028" in (tmp_path / "t.jsonl").read_text(encoding="utf-8")  # written raw, not escaped
    assert read_tasks(tmp_path / "t.jsonl") == [task]
    atomic_write_text(tmp_path / "log.jsonl", json_text({"completion": "a\u2028b"}) + "\n")
    assert read_jsonl(tmp_path / "log.jsonl") == [{"completion": "a\u2028b"}]


def test_a_damaged_sweep_file_is_named(tmp_path):
    from glm53.sweep.analysis import saved_spec

    (tmp_path / "spec.json").write_text('{"name": "x",')
    with pytest.raises(ValueError, match=rf"{tmp_path / 'spec.json'} is not valid JSON \(Expecting"):
        saved_spec(tmp_path)


def test_the_losing_writer_of_one_out_leaves_no_temporary(tmp_path):
    """Two commands writing one --out: the later rename fails; it said OSError and left its temporary folder."""
    from glm53.runtime.files import AtomicDirectory

    final = tmp_path / "e"
    with pytest.raises(FileExistsError, match=r"e appeared while this was being written .* Choose another --out"):
        with AtomicDirectory(final) as tmp:
            (tmp / "model.safetensors").write_bytes(b"x" * 1000)
            final.mkdir()  # the other writer finishes first
            (final / "model.safetensors").write_bytes(b"theirs")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e"]
    assert (final / "model.safetensors").read_bytes() == b"theirs"


def test_export_makes_a_missing_folder_above_out(more, tmp_path, capsys):
    assert main(["export", str(more["good"]), "--out", str(tmp_path / "new" / "deeper" / "e")]) == 0
    assert (tmp_path / "new" / "deeper" / "e" / "model.safetensors").is_file()


def test_a_resumed_run_that_changes_the_threads_is_refused_with_the_fix(tmp_path):
    from glm53.train.run_folder import check_resume_settings
    from glm53.train.pretrain_config import PretrainConfig
    from glm53.runtime.config import RESUMABLE_CHANGES

    (tmp_path / "run.json").write_text(json.dumps(PretrainConfig(out=str(tmp_path), threads=1).to_dict()))
    now = PretrainConfig(out=str(tmp_path), threads=2, force_threads=True, resume=True).to_dict()
    with pytest.raises(ValueError, match=r"started with --threads 1, not 2; torch's thread count changes how its "
                                         r"sums are split, so the weights: resume with --threads 1"):
        check_resume_settings(tmp_path, now, RESUMABLE_CHANGES)
    check_resume_settings(tmp_path, {**now, "threads": 1}, RESUMABLE_CHANGES)  # the same threads resume


def test_more_threads_than_cores_run_when_forced(tmp_path, capsys):
    from glm53.runtime.config import available_cores, threads_problem

    cores = available_cores()
    assert threads_problem(cores, False) is None and threads_problem(cores + 1, True) is None
    assert threads_problem(cores + 1, False).startswith(f"--threads {cores + 1} is more than this machine's {cores}")
    # the main job's stages take the job's --force-threads (their runtimes are built before it applies)
    flags = ["run", "--preset", "quick", "--out", str(tmp_path / "r"), "--rl.threads", str(cores + 1)]
    assert main(flags) == 2 and f"--rl.threads {cores + 1} is more" in capsys.readouterr().err
    assert main([*flags, "--force-threads", "--print-config"]) == 0 and "threads" in capsys.readouterr().out


def test_a_moved_main_job_folder_resumes(tmp_path):
    """rl.init is recorded as a path inside the run folder; moved whole, the run kept it by its old text."""
    import shutil

    from glm53.run_config import RunConfig
    from glm53.runtime.config import RESUMABLE_CHANGES
    from glm53.train.run_folder import check_resume_settings
    from glm53.checkpoints.retention import RETENTION_CHANGES

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "run.json").write_text(json.dumps(RunConfig.from_preset(str(tmp_path / "a"), "quick")
                                                        .folder_settings()))
    shutil.move(tmp_path / "a", tmp_path / "b")
    moved = RunConfig.from_preset(str(tmp_path / "b"), "quick").folder_settings()
    check_resume_settings(tmp_path / "b", moved, RESUMABLE_CHANGES | RETENTION_CHANGES)
    elsewhere = {**moved, "rl": {**moved["rl"], "init": str(tmp_path / "other" / "checkpoint-0100")}}
    with pytest.raises(ValueError, match=r"started from the checkpoint .*a/pretrain/checkpoint-0100 \(rl.init\)"):
        check_resume_settings(tmp_path / "b", elsewhere, RESUMABLE_CHANGES | RETENTION_CHANGES)


def test_vision_memory_is_estimated_before_any_work():
    from glm53.vision.training_config import memory_problem

    gib = 2 ** 30
    assert memory_problem("--batch-size", 40, 200, 1.0, 8 * gib) is None
    assert memory_problem("--batch-size", 9000, 200, 1.0, 8 * gib) == (
        "--batch-size 9,000 needs about 8.8 GiB (about 1.0 MiB a training image), more than half of this machine's "
        "8.0 GiB of memory; give --batch-size 4,093 or less")
    assert "give --eval-examples 174,762 or less" in memory_problem("--batch-size", 40, 10 ** 7, 1.0, 8 * gib)
    assert "--pilot.batch-size 100 needs about 6.3 GiB (about 64.0 MiB" in memory_problem(
        "--pilot.batch-size", 100, 100, 64.0, 8 * gib)


def test_from_pretrained_checks_the_recorded_hashes(tmp_path, capsys):
    model = GLM53(ModelConfig(**TINY))
    model.save_pretrained(tmp_path / "m")
    assert GLM53.from_pretrained(tmp_path / "m").verified
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    config["position"] = "none" if config["position"] != "none" else "rope"  # every weight keeps its shape
    (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="differs from the config these weights were saved with"):
        GLM53.from_pretrained(tmp_path / "m")
    loaded = GLM53.from_pretrained(tmp_path / "m", trust_unverified=True)
    assert not loaded.verified and loaded.config.position == config["position"]
    assert "loaded unchecked, as trust_unverified=True asked" in capsys.readouterr().err
    (tmp_path / "m" / "metadata.json").unlink()
    with pytest.raises(ValueError, match=r"has no metadata.json, .* load it anyway with trust_unverified=True"):
        GLM53.from_pretrained(tmp_path / "m")
