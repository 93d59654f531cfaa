"""A corpus's rows in the broad suite's length buckets (--corpus-in-buckets, data/pretrain_batches.py): a window of
8 steps holds exactly the corpus rows and generated documents the plain order gives those steps (as rows, token for
token), each batch is cut to its longest row, a window costs fewer padded cells than the plain order, the order is a
pure function of (seed, step), and under --loss-on completion the generated rows' prompts are no target while the
corpus rows stay whole. A suite that does not bucket (the reference) reads the plain order either way."""

import json

import pytest
import torch

from glm53.data.bpe_tokenizer import load_bpe
from glm53.data.broad.docstring import mixed_stream
from glm53.data.corpus import load_corpus
from glm53.data.pretrain_batches import (IGNORE_INDEX, completion_labels, last_target_ends, mixed_batch,
                                         plain_mixed_rows)
from glm53.data.suites import get_suite
from glm53.recipes.book import pretraining
from glm53.train.pretrain_config import PretrainConfig

CODE = load_bpe("code-bpe-2048")
BATCH, LENGTH, MIX, SEED = 8, 256, 0.25, 3


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    rows = []
    for i in range(60):  # functions from a few lines to a few hundred tokens: rows of many lengths
        body = "".join(f"    total = total + {j} * x  # step {j}\n" for j in range(1 + (i * 7) % 23))
        rows.append({"text": f'def f{i}(x):\n    """Sum part {i}."""\n    total = 0\n{body}    return total\n'})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return load_corpus(str(path), 0.1, LENGTH, tokenizer=CODE)


def as_rows(inputs: torch.Tensor, labels: torch.Tensor) -> list[tuple]:
    """Each row as (its input ids, its labels) to its last target, for comparing rows whatever their width."""
    ends = last_target_ends(labels).tolist()
    return [(tuple(x[:n]), tuple(y[:n])) for x, y, n in zip(inputs.tolist(), labels.tolist(), ends)]


@pytest.mark.parametrize("loss_on", ["all", "completion"])
def test_a_window_holds_the_plain_orders_rows_each_batch_cut_to_its_longest(corpus, loss_on):
    stream = mixed_stream(get_suite("broad"), 0.5)
    steps = stream.bucket_steps
    for window in (0, 3):
        plain, bucketed, plain_cells, bucketed_cells, shares = [], [], 0, 0, []
        first, end = int(window * steps * BATCH * MIX), int((window + 1) * steps * BATCH * MIX)
        corpus_rows = set(as_rows(*corpus.training_batch(first, end - first, SEED)))
        for step in range(window * steps, (window + 1) * steps):
            x, y = mixed_batch(stream, step, BATCH, LENGTH, SEED, corpus, MIX, CODE, loss_on, buckets=False)
            plain += as_rows(x, y)
            plain_cells += x.numel()
            bx, by = mixed_batch(stream, step, BATCH, LENGTH, SEED, corpus, MIX, CODE, loss_on, buckets=True)
            assert bx.shape == by.shape and bx.shape[0] == BATCH
            assert (by[:, -1] != IGNORE_INDEX).any()  # cut to its longest row's last target, no column more
            bucketed += as_rows(bx, by)
            bucketed_cells += bx.numel()
            shares.append(sum(r in corpus_rows for r in as_rows(bx, by)))
        assert sorted(bucketed) == sorted(plain)  # the window's rows, each once
        assert sum(shares) == len(corpus_rows) and len(set(shares)) > 1  # a window's share; a step's varies
        assert bucketed_cells < plain_cells / 2, (bucketed_cells, plain_cells)
        backwards = [mixed_batch(stream, step, BATCH, LENGTH, SEED, corpus, MIX, CODE, loss_on, buckets=True)
                     for step in reversed(range(window * steps, (window + 1) * steps))]
        forwards = [mixed_batch(stream, step, BATCH, LENGTH, SEED, corpus, MIX, CODE, loss_on, buckets=True)
                    for step in range(window * steps, (window + 1) * steps)]
        for (a, b), (c, d) in zip(forwards, reversed(backwards)):  # a pure function of (seed, step), in any order
            assert torch.equal(a, c) and torch.equal(b, d)


def test_completion_leaves_out_the_generated_prompts_and_keeps_the_corpus_rows_whole(corpus):
    stream = mixed_stream(get_suite("broad"), 0.5)
    x_all, y_all = plain_mixed_rows(stream, 0, 4 * BATCH, LENGTH, SEED, corpus, MIX, CODE, "all")
    x_c, y_c = plain_mixed_rows(stream, 0, 4 * BATCH, LENGTH, SEED, corpus, MIX, CODE, "completion")
    assert torch.equal(x_all, x_c)
    corpus_rows = int(4 * BATCH * MIX)
    assert torch.equal(y_c[:corpus_rows], y_all[:corpus_rows])  # corpus rows: every token a target
    texts = [stream.pretraining_text(i, SEED) for i in range(4 * BATCH - corpus_rows)]
    assert torch.equal(y_c[corpus_rows:], completion_labels(y_all[corpus_rows:], texts, CODE))
    assert (y_c[corpus_rows:] == IGNORE_INDEX).sum() > (y_all[corpus_rows:] == IGNORE_INDEX).sum()


def test_a_suite_that_does_not_bucket_reads_the_plain_order(tmp_path):
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"text": f"x{i} = {i}\n" * (1 + i)}) + "\n"
                                              for i in range(20)))
    byte_corpus = load_corpus(str(tmp_path / "c.jsonl"), 0.1, 128)
    stream = mixed_stream(get_suite("reference"), 0.0)
    for step in range(3):
        a = mixed_batch(stream, step, 4, 128, SEED, byte_corpus, 0.5, buckets=True)
        b = mixed_batch(stream, step, 4, 128, SEED, byte_corpus, 0.5, buckets=False)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_completion_with_a_corpus_alone_is_refused_and_beside_the_stream_is_taken(tmp_path):
    (tmp_path / "c.jsonl").write_text(json.dumps({"text": "x = 1\n"}) + "\n")
    with pytest.raises(ValueError, match="with --corpus-mix 1 use --loss-on all"):
        PretrainConfig(out=str(tmp_path / "a"), corpus=str(tmp_path / "c.jsonl"), loss_on="completion")
    cfg = PretrainConfig(out=str(tmp_path / "b"), corpus=str(tmp_path / "c.jsonl"), corpus_mix=0.25,
                         loss_on="completion")
    assert cfg.corpus_in_buckets and cfg.loss_on == "completion"


def test_pretraining_reads_the_setting(tmp_path, monkeypatch):
    import glm53.train.pretrain as pretrain

    (tmp_path / "c.jsonl").write_text(json.dumps({"text": "def f():\n    return 1\n"}) + "\n")
    seen = []

    class Read(Exception):
        pass

    def spy(*args, **kwargs):
        seen.append(kwargs["corpus_in_buckets"])
        raise Read

    monkeypatch.setattr(pretrain, "pretraining_batch", spy)
    for value in (True, False):
        cfg = PretrainConfig(**pretraining("code"), out=str(tmp_path / "run"), suite="broad",
                             corpus=str(tmp_path / "c.jsonl"), corpus_mix=0.25, corpus_in_buckets=value)
        with pytest.raises(Read):
            pretrain.train_step(cfg, 0, None, None, None, "cpu", "fp32")
    assert seen == [True, False]


def test_the_setting_is_recorded_where_it_acts(tmp_path):
    (tmp_path / "c.jsonl").write_text(json.dumps({"text": "def f():\n    return 1\n"}) + "\n")
    corpus = dict(corpus=str(tmp_path / "c.jsonl"), corpus_mix=0.25)
    code = pretraining("code")
    assert PretrainConfig(**code, out="x", suite="broad", **corpus).to_dict()["corpus_in_buckets"] is True
    assert "corpus_in_buckets" not in PretrainConfig(**code, out="x", suite="broad").to_dict()  # no corpus: as before
    assert "corpus_in_buckets" not in PretrainConfig(out="x", **corpus).to_dict()  # the reference suite: no buckets
    from glm53.run_config import RunConfig

    run = RunConfig.from_preset("x", "code")  # the run's corpus comes later: its record holds the setting now
    assert run.pretrain.corpus == "" and run.to_dict()["pretrain"]["corpus_in_buckets"] is True
    assert "corpus_in_buckets" not in RunConfig.from_preset("x", "broad").to_dict()["pretrain"]


def test_a_record_from_before_the_setting_replays_in_the_order_it_ran(tmp_path):
    from glm53.runtime.config_file import file_settings

    (tmp_path / "c.jsonl").write_text(json.dumps({"text": "def f():\n    return 1\n"}) + "\n")
    code = pretraining("code")
    with_corpus = PretrainConfig(**code, out="x", suite="broad", corpus=str(tmp_path / "c.jsonl"), corpus_mix=0.25)
    old = with_corpus.to_dict()
    del old["corpus_in_buckets"]  # written before the setting: its rows came in the plain order
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert file_settings(PretrainConfig, tmp_path / "old.json")["corpus_in_buckets"] is False
    (tmp_path / "new.json").write_text(json.dumps(with_corpus.to_dict()))
    assert file_settings(PretrainConfig, tmp_path / "new.json")["corpus_in_buckets"] is True
    (tmp_path / "none.json").write_text(json.dumps(PretrainConfig(**code, out="x", suite="broad").to_dict()))
    assert "corpus_in_buckets" not in file_settings(PretrainConfig, tmp_path / "none.json")  # today's default
