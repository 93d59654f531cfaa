"""`glm53 run --preset broad` on a tiny model: pretraining on the broad stream, RL on its rl split from the
checkpoint dev supports, every broad split scored before and after with paired tests, REPORT.md, charts,
receipts that record the suite, and final/ in the save_pretrained format."""

import json

import pytest

from glm53 import GLM53
from glm53.data.suites import BROAD_CONTEXT
from glm53.model.config import MODEL_PRESETS
from glm53.data.pretrain_batches import bucketed_texts, pretraining_batch
from glm53.data.suites import get_suite
from glm53.run import RunConfig, run_pipeline

from .tiny import TINY

SPLITS = ["dev", "rl", "confirm", "compose", "phrase", "human"]


@pytest.mark.slow
def test_tiny_broad_run(tmp_path):
    cfg = RunConfig.from_preset(  # the tiny model's settings by their flat names, over the preset's model
        str(tmp_path / "run"), "broad", device="cpu", progress=False,
        pretrain=dict(steps=3, checkpoints=(2, 3), batch_size=2, warmup_steps=1, seed=5, dev_max_new_tokens=8,
                      **{**TINY, "max_sequence_length": 384}),
        rl=dict(groups=2, group_size=2, tasks_per_family=4, checkpoints=(2,), groups_per_step=2, dev_per_family=2,
                max_new_tokens=24),
        confirm_per_family=2)
    assert (cfg.suite, cfg.pretrain.suite, cfg.rl.suite, cfg.rl_start) == ("broad", "broad", "broad", 0)
    receipt = run_pipeline(cfg, log=lambda *_: None)
    run = tmp_path / "run"
    assert receipt["suite"] == "broad" and receipt["language"] == "python"
    assert list(receipt["splits"]) == SPLITS
    assert receipt["splits"]["human"]["tasks"] == 88 and receipt["splits"]["confirm"]["tasks"] == 2
    pretraining = json.loads((run / "pretrain" / "training-receipt.json").read_text())
    rl = json.loads((run / "rl" / "training-receipt.json").read_text())
    assert (pretraining["suite"], pretraining["language"], rl["suite"], rl["language"]) == ("broad", "python") * 2
    assert pretraining["run"]["sequence_length"] == 324 and pretraining["config"]["max_sequence_length"] == 384
    assert pretraining["run"]["loss_on"] == "completion" and pretraining["config"]["sparse_every"] == 1
    # the speedrun's record recipe (muon-qk-bpe): byte pairs, QK-norm, Muon
    assert (pretraining["config"]["tokenizer"], pretraining["config"]["qk_norm"]) == ("broad-bpe-2048", True)
    assert rl["initial_checkpoint"].endswith("pretrain/checkpoint-0003")  # dev ties: the later checkpoint
    assert all(r["token_ids"] and len(r["token_ids"]) <= 24 for r in rl["rollouts"])
    for split in SPLITS:
        after = json.loads((run / "eval" / f"after-{split}.json").read_text())
        assert after["suite"] == "broad" and len(after["tasks"]) == receipt["splits"][split]["tasks"]
        assert (run / "eval" / f"comparison-{split}.json").is_file()
        assert (run / "eval" / f"{split}-tasks.jsonl").is_file()
    report = (run / "REPORT.md").read_text()
    assert "| compose | held-out primitive pairs |" in report and "## By depth" in report and "McNemar" in report
    assert "### human: human-001" in report
    assert all((run / c).is_file() for c in receipt["charts"])
    assert "charts/before_after_by_split.png" in receipt["charts"]
    final = GLM53.from_pretrained(run / "final")  # the save_pretrained format, loaded as the hub mixin does
    assert final.config.max_sequence_length == 384
    assert receipt["final"]["weights_sha256"] == receipt["checkpoint_sha256"]["after"]
    assert json.loads((run / "final" / "metadata.json").read_text())["suite"] == "broad"


def test_the_broad_model_attends_over_the_whole_broad_context():
    model = MODEL_PRESETS["broad"]
    assert model["max_sequence_length"] == BROAD_CONTEXT and model["sparse_window"] >= BROAD_CONTEXT
    assert model["sparse_every"] == 1  # every layer softmax attention: no linear layer


def test_broad_batches_are_bucketed_by_length_and_cut_to_their_longest_row():
    suite = get_suite("broad")
    seen = []
    for step in range(suite.bucket_steps):
        texts = bucketed_texts(suite, step, 4, 42)
        inputs, labels = pretraining_batch(step, 4, 324, 42, "broad")
        assert inputs.shape == labels.shape == (4, max(len(t) for t in texts) + 1)
        assert (labels[:, -1] != -100).any()  # the longest row fills the batch to its EOS
        seen += texts
    assert sorted(seen) == sorted(suite.pretraining_text(i) for i in range(4 * suite.bucket_steps))
    again = pretraining_batch(5, 4, 324, 42, "broad")
    assert all((a == b).all() for a, b in zip(again, pretraining_batch(5, 4, 324, 42, "broad")))
