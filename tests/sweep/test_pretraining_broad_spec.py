"""The pretraining-broad study: its spec plans four arms that differ only in the data's order or diversity, and
its pretrain-splits job runs on a tiny model, scoring body loss (against a plain recomputation) and pass@1."""


import pytest

from glm53.data.broad.human import human_rows
from glm53.evaluate.body_loss import body_loss, body_nats, reference_bodies
from glm53.sweep.jobs import job_kind
from glm53.sweep.runner import plan_jobs
from glm53.sweep.spec import load_spec
from glm53.sweep.timing import time_jobs
from glm53.checkpoints.format import load_model

from ..tiny import TINY

TINY_BROAD = {**TINY, "max_sequence_length": 384}


def test_pretraining_broad_plans_arms_that_change_only_the_data(tmp_path):
    spec = load_spec("pretraining-broad")
    assert spec.job == "pretrain-splits" and len(spec.seeds) >= 10 and spec.baseline == "stream"
    base = spec.settings("stream")
    made = {arm: job_kind(spec.job).make(spec.settings(arm), 1, spec.checkpoints, tmp_path / arm) for arm in spec.arms}
    for arm, job in made.items():
        differs = {k for k in spec.settings(arm) if spec.settings(arm).get(k) != base.get(k)}
        assert differs <= {"data_order", "distinct_documents"}, arm
        assert job.pretrain.suite == "broad" and job.extra.splits() == ("confirm", "compose", "phrase", "human")
    assert made["repeated"].pretrain.distinct_documents * 8 == 400 * 16  # eight passes at the same budget
    assert (made["blocked"].pretrain.data_order, made["curriculum"].pretrain.data_order) == ("blocked", "curriculum")
    assert len(plan_jobs(spec, tmp_path)) == 4 * len(spec.seeds)
    assert not any(tmp_path.iterdir())


def test_body_loss_pools_nats_over_bytes_and_reads_the_human_solutions():
    from glm53 import GLM53, ModelConfig

    model = GLM53(ModelConfig(**TINY_BROAD))
    items = reference_bodies("broad", "human", 3)
    assert [i[2] for i in items] == [r["solution"] for r in human_rows()[:3]]
    nats = [body_nats(model, p, b) for _, p, b in items]
    assert body_loss(model, items) == pytest.approx(sum(n for n, _ in nats) / sum(k for _, k in nats))
    assert all(k == len(b.encode()) + 1 for (_, _, b), (_, k) in zip(items, nats))  # the body's bytes and EOS
    with pytest.raises(ValueError, match="reference suite's splits do not carry"):
        reference_bodies("reference", "confirm", 2)


@pytest.mark.slow
def test_pretrain_splits_job_on_a_tiny_model(tmp_path):
    kind = job_kind("pretrain-splits")
    settings = {"suite": "broad", "steps": 4, "batch_size": 2, "validation_rows": 0, "dev_max_new_tokens": 1,
                "data_order": "curriculum", "eval_count": 2, "eval_splits": "compose,human",
                "eval_max_new_tokens": 4, "keep_weights": True,
                **{k: v for k, v in TINY_BROAD.items()}}
    job = kind.make(settings, 3, (2, 4), tmp_path / "job")
    receipt = kind.run(job, tmp_path / "job", lambda *_: None)
    assert set(receipt["metrics"]) == {"2", "4"}
    row = receipt["metrics"]["4"]
    model = load_model(tmp_path / "job" / "run" / "checkpoint-0004").model
    assert row["compose_body_loss"] == pytest.approx(body_loss(model, reference_bodies("broad", "compose", 2)))
    assert row["human_body_loss"] == pytest.approx(body_loss(model, reference_bodies("broad", "human", None)))
    assert 0 <= row["human_pass_at_1"] <= 1 and len(receipt["task_outcomes"]["human_pass_at_1"]) == len(human_rows())
    assert receipt["settings"]["data_order"] == "curriculum"
    assert receipt["parameter_counts"] == model.parameter_counts()
    with pytest.raises(ValueError, match="set suite"):
        kind.make({**settings, "suite": "reference", "data_order": "blocked"}, 3, (2,), tmp_path / "ref")
    with pytest.raises(ValueError, match="eval_splits"):
        kind.make({**settings, "eval_splits": "confirm,pretrain"}, 3, (2,), tmp_path / "bad")


@pytest.mark.slow
def test_a_pretrain_splits_job_without_checkpoints_is_scored_once_at_its_end(tmp_path):
    """A spec of pretrain-splits may name no checkpoints: each job is scored at its own last update, labelled "end",
    so arms of different lengths pair (code-size); the other kinds still need checkpoints."""
    kind = job_kind("pretrain-splits")
    settings = {"suite": "broad", "steps": 3, "batch_size": 2, "validation_rows": 0, "dev_max_new_tokens": 1,
                "eval_count": 1, "eval_splits": "compose", "eval_max_new_tokens": 2, **TINY_BROAD}
    assert kind.labels(()) == ["end"] and job_kind("pretrain").labels((3,)) == ["3"]
    job = kind.make(settings, 3, (), tmp_path / "job")
    assert job.pretrain.checkpoints == (3,)
    receipt = kind.run(job, tmp_path / "job", lambda *_: None)
    assert set(receipt["metrics"]) == {"end"} and receipt["task_outcomes_at"] == "end"
    assert "compose_body_loss" in receipt["metrics"]["end"]


@pytest.mark.slow
def test_plan_times_pretrain_splits_jobs(tmp_path):
    spec = load_spec("pretraining-broad")
    tiny = {k: v for k, v in TINY_BROAD.items()}
    spec.base.update({**tiny, "eval_count": 1, "eval_splits": "compose"})
    timing = time_jobs(spec, threads=1)
    assert timing["per_update"] > 0 and timing["per_evaluation"] > 0
    assert set(timing["job_seconds"]) == set(spec.arms)
