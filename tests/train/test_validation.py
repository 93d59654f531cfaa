"""The validation loss (in the log rows, the log lines, the trackers and the receipt, leaving training untouched)
and pretraining on a corpus of one's own (deterministic, exactly resumable, refused on resume with other files)."""

import json

import pytest

from glm53.data.corpus import load_corpus
from glm53.train.pretrain import pretrain
from glm53.checkpoints.format import read_metadata

from .test_pretrain import tiny_run


def rows(out):
    return [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]


def quiet(*_):
    return None


@pytest.mark.slow
def test_validation_leaves_the_weights_alone_and_is_logged_at_eval_steps_and_checkpoints(tmp_path):
    off = pretrain(tiny_run(tmp_path / "off", steps=3, checkpoints=(2, 3), batch_size=2, validation_rows=0),
                   dev_tasks=[], log=quiet)
    lines = []
    on = pretrain(tiny_run(tmp_path / "on", steps=3, checkpoints=(2, 3), batch_size=2, validation_rows=6,
                           eval_every=1), dev_tasks=[], log=lines.append)
    # the same weights at every checkpoint (step 0 included) and the same training losses, with or without it
    assert [c["weights_sha256"] for c in on["checkpoints"]] == [c["weights_sha256"] for c in off["checkpoints"]]
    assert [r["loss"] for r in rows(tmp_path / "on")] == [r["loss"] for r in rows(tmp_path / "off")]
    assert not any("val_loss" in r for r in rows(tmp_path / "off")) and off["validation"] is None
    # every step (--eval-every 1), step 0 in its checkpoint record
    assert [r["step"] for r in rows(tmp_path / "on") if "val_loss" in r] == [1, 2, 3]
    by_step = {r["step"]: r["val_loss"] for r in rows(tmp_path / "on")}
    assert [c["step"] for c in on["checkpoints"] if "val_loss" in c] == [0, 2, 3]
    assert all(c["val_loss"] == by_step[c["step"]] for c in on["checkpoints"][1:])
    assert on["final_val_loss"] == by_step[3] and on["validation"]["rows"] == 6
    assert on["checkpoints"][0]["val_loss"] > by_step[3]  # 3 steps at lr 1e-3 already lower it
    assert any("val_loss" in line for line in lines) and any("validation: 6 rows" in line for line in lines)


@pytest.mark.slow
def test_only_checkpoints_without_eval_every_and_the_loss_reaches_the_tracker(tmp_path, monkeypatch):
    logged = []

    class Recording:
        def log(self, row, step):
            logged.append((step, row))

        def close(self):
            pass

    monkeypatch.setattr("glm53.runtime.tracking.open_tracker", lambda *a, **k: Recording())
    pretrain(tiny_run(tmp_path / "r", steps=2, checkpoints=(2,), batch_size=2, validation_rows=3), dev_tasks=[],
             log=quiet)
    assert [step for step, row in logged if "val_loss" in row] == [0, 2]


def write_corpus(root, n=30):
    root.mkdir()
    for i in range(n):
        (root / f"m{i:02d}.py").write_text("".join(f"def f{i}_{k}(x):\n    return x * {k}\n" for k in range(2 + i % 4)))
    return root


def corpus_run(out, corpus, **kw):
    return tiny_run(out, corpus=str(corpus), batch_size=2, sequence_length=32, validation_rows=8, eval_every=1, **kw)


@pytest.mark.slow
def test_a_corpus_run_resumes_exactly_and_records_its_corpus(tmp_path):
    corpus = write_corpus(tmp_path / "corpus")
    whole, part = tmp_path / "whole", tmp_path / "part"
    receipt = pretrain(corpus_run(whole, corpus, steps=3, checkpoints=(1, 3)), dev_tasks=[], log=quiet)
    pretrain(corpus_run(part, corpus, steps=1, checkpoints=(1,)), dev_tasks=[], log=quiet)
    (part / "training-receipt.json").unlink()  # as if stopped right after checkpoint 1
    pretrain(corpus_run(part, corpus, steps=3, checkpoints=(1, 3), resume=True), dev_tasks=[], log=quiet)
    assert [(r["loss"], r["val_loss"]) for r in rows(part)] == [(r["loss"], r["val_loss"]) for r in rows(whole)]
    assert read_metadata(part / "checkpoint-0003")["weights_sha256"] == receipt["checkpoints"][-1]["weights_sha256"]
    summary = load_corpus(str(corpus), 0.05, 32).summary
    assert receipt["corpus"] == summary and summary["documents"] == 30 and summary["skipped"] == 0
    assert receipt["validation"]["source"] == "the corpus's held-out documents"


@pytest.mark.slow
def test_resume_refuses_other_corpus_files(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", n=12)
    out = tmp_path / "run"
    pretrain(corpus_run(out, corpus, steps=1, checkpoints=(1,)), dev_tasks=[], log=quiet)
    (out / "training-receipt.json").unlink()
    (corpus / "m03.py").write_text("changed = True\n")
    before = (out / "train_log.jsonl").read_bytes()
    with pytest.raises(ValueError, match="--corpus files differ"):
        pretrain(corpus_run(out, corpus, steps=2, checkpoints=(1, 2), resume=True), dev_tasks=[], log=quiet)
    assert (out / "train_log.jsonl").read_bytes() == before


@pytest.mark.slow
def test_a_run_recorded_before_these_settings_still_resumes(tmp_path):
    out = tmp_path / "run"
    pretrain(tiny_run(out, steps=1, checkpoints=(1,), batch_size=2, validation_rows=0), dev_tasks=[], log=quiet)
    (out / "training-receipt.json").unlink()
    recorded = json.loads((out / "run.json").read_text())
    for key in ("corpus", "corpus_validation_share", "corpus_mix", "eval_every", "validation_rows"):
        del recorded[key]
    (out / "run.json").write_text(json.dumps(recorded))
    receipt = pretrain(tiny_run(out, steps=2, checkpoints=(1, 2), batch_size=2, validation_rows=4, resume=True),
                       dev_tasks=[], log=quiet)
    assert receipt["resumed_from_step"] == 1 and "val_loss" in rows(out)[-1]
