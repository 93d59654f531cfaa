import pytest
import torch
import torch.nn.functional as F

from glm53 import GLM53, ModelConfig
from glm53.data.tokenizer import IMAGE_END_ID, IMAGE_PLACEHOLDER_ID, IMAGE_START_ID
from glm53.vision.digits import held_out_set, render_digits, training_batch
from glm53.vision.tower import (DirectPatchTower, FaithfulVisionTower, VisionConfig, VisionLanguageModel,
                                image_prompt_ids)
from glm53.vision.train import (MINI_LM, DigitTraining, answer_ids, build, evaluate_digits, prompt_ids,
                                train_digits)


def test_token_layout():
    ids = image_prompt_ids([1, 10, 11])
    assert ids == [1, IMAGE_START_ID] + [IMAGE_PLACEHOLDER_ID] * 16 + [IMAGE_END_ID, 10, 11]


def test_shapes_through_every_stage():
    tower = FaithfulVisionTower(VisionConfig(), lm_dim=32)
    stages = tower.stages(torch.rand(3, 3, 32, 32))
    assert stages["patches"].shape == (3, 64, 32)
    assert stages["encoded"].shape == (3, 64, 32)
    assert stages["merged"].shape == (3, 16, 32)
    assert stages["projected"].shape == (3, 16, 32)
    assert DirectPatchTower(VisionConfig(), 32)(torch.rand(3, 3, 32, 32)).shape == (3, 16, 32)


@pytest.mark.parametrize("architecture", ["faithful", "baseline"])
def test_placeholders_are_replaced_by_visual_features(architecture):
    model = build(architecture, seed=0)
    images = torch.rand(2, 3, 32, 32)
    ids = prompt_ids(2, "cpu")
    embeds = model.embed(images, ids)
    visual = model.tower(images)
    placeholder = ids[0] == IMAGE_PLACEHOLDER_ID
    torch.testing.assert_close(embeds[:, placeholder], visual)
    torch.testing.assert_close(embeds[:, ~placeholder], model.language_model.embedding(ids)[:, ~placeholder])
    logits = model(images, ids)
    assert logits.shape == (2, ids.shape[1], 263)
    with pytest.raises(ValueError, match="exactly 16 image placeholders"):
        model.embed(images, ids[:, :-3].clone().fill_(5))


def test_gradients_reach_patch_embedding_merger_and_projector():
    model = build("faithful", seed=0)
    images, labels = training_batch(0, 4, seed=0)
    logits = model(images, prompt_ids(4, "cpu"))
    F.cross_entropy(logits[:, -1], answer_ids(labels)).backward()
    tower = model.tower
    for name, p in [("patch", tower.patch_embedding.weight), ("merger", tower.merger.weight),
                    ("projector", tower.projector.down.weight), ("block", tower.blocks[0].attention.proj.weight)]:
        assert p.grad is not None and p.grad.abs().sum() > 0, name


@pytest.mark.slow
def test_two_example_overfit():
    torch.manual_seed(0)
    model = build("faithful", seed=0)
    images, labels = render_digits([3, 7], seed=5), torch.tensor([3, 7])
    start = evaluate_digits(model, images, labels)["loss"]
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(80):
        loss = F.cross_entropy(model(images, prompt_ids(2, "cpu"))[:, -1], answer_ids(labels))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.25 * start
    assert model(images, prompt_ids(2, "cpu"))[:, -1].argmax(-1).tolist() == answer_ids(labels).tolist()


def test_digits_are_deterministic_and_held_out_differs():
    a, la = training_batch(3, 10, seed=42)
    b, _ = training_batch(3, 10, seed=42)
    assert torch.equal(a, b) and a.shape == (10, 3, 32, 32) and 0 <= a.min() and a.max() <= 1
    assert la.tolist() == [(i + 3) % 10 for i in range(10)]
    h, _ = held_out_set(10, seed=42)
    assert not torch.equal(h, render_digits(torch.arange(10), seed=42))
    with pytest.raises(ValueError, match="0..9"):
        render_digits([10], seed=0)


def test_language_model_needs_image_ids_in_its_vocabulary():
    with pytest.raises(ValueError, match="vocab_size >= 263"):
        VisionLanguageModel(GLM53(ModelConfig(**{**MINI_LM, "vocab_size": 260})), DirectPatchTower(VisionConfig(), 32))


@pytest.mark.slow
def test_tower_warmup_scales_only_the_towers_first_steps():
    """Adam's first step moves each weight by about lr, so a tower ramp of 4 steps moves the tower a quarter as
    far on step one, while the language model moves exactly as it does without the ramp."""
    images, labels = held_out_set(10, seed=0)
    moved = {}
    for warmup in (0, 4):
        model = build("faithful", seed=0)
        tower0 = [p.detach().clone() for p in model.tower.parameters()]
        lm0 = [p.detach().clone() for p in model.language_model.parameters()]
        train_digits(model, DigitTraining(steps=1, batch_size=10, lr=1e-3, tower_warmup_steps=warmup), 0,
                     images, labels)
        moved[warmup] = (sum((p - q).abs().sum() for p, q in zip(model.tower.parameters(), tower0)),
                         [p.detach() - q for p, q in zip(model.language_model.parameters(), lm0)])
    assert moved[0][0] > 0
    torch.testing.assert_close(moved[4][0] / moved[0][0], torch.tensor(0.25), rtol=0.02, atol=0)
    for a, b in zip(moved[0][1], moved[4][1]):
        torch.testing.assert_close(a, b)


def test_pilot_vision_config_is_wider_with_larger_positions():
    from glm53.vision.train import PILOT_VISION

    tower = FaithfulVisionTower(PILOT_VISION, lm_dim=192)
    assert tower.positions.shape == (1, 64, 64)
    assert 0.08 < float(tower.positions.detach().std()) < 0.12
    assert FaithfulVisionTower(VisionConfig(), 32).positions.std() < 0.03


@pytest.mark.slow
def test_cli_vision_writes_receipts_and_never_overwrites(tmp_path, capsys):
    import json

    from glm53.cli import main
    from glm53.evaluate.compare import mcnemar_exact
    from glm53.runtime.files import sha256_file

    out = tmp_path / "mini"
    assert main(["vision", "--architecture", "both", "--seeds", "1,2", "--steps", "2", "--batch-size", "4",
                 "--eval-examples", "10", "--out", str(out)]) == 0
    receipt = json.loads((out / "vision-receipt.json").read_text())
    assert set(receipt["runs"]) == {"faithful/seed1", "baseline/seed1", "faithful/seed2", "baseline/seed2"}
    per_seed, pooled = receipt["comparison"]["per_seed"], receipt["comparison"]["pooled"]
    assert len(per_seed) == 2 and pooled["faithful_only"] == sum(s["faithful_only"] for s in per_seed)
    assert pooled["mcnemar_p"] == mcnemar_exact(pooled["faithful_only"], pooled["baseline_only"])
    assert main(["vision", "--architecture", "faithful", "--steps", "1", "--out", str(out)]) == 2
    assert "never overwrites" in capsys.readouterr().err

    checkpoint = tmp_path / "lm"
    small = {**MINI_LM, "dim": 48, "heads": 4, "layers": 2}
    GLM53(ModelConfig(**{**small, "vocab_size": 260})).save_pretrained(str(checkpoint))
    (checkpoint / "metadata.json").unlink()  # a folder another tool wrote: weights and config, no recorded hashes
    pilot = tmp_path / "pilot"
    pilot_flags = ["vision", "--pilot", str(checkpoint), "--seeds", "5,6", "--pilot.steps", "2", "--eval-examples",
                   "10", "--out", str(pilot)]
    assert main(pilot_flags) == 2 and "--trust-unverified" in capsys.readouterr().err  # no metadata
    assert main([*pilot_flags, "--trust-unverified"]) == 0
    receipt = json.loads((pilot / "vision-receipt.json").read_text())["pilot"]
    assert receipt["checkpoint_sha256"] == sha256_file(checkpoint / "model.safetensors")
    assert receipt["checkpoint_verified"] is False
    assert set(receipt["runs"]) == {"5", "6"} and len(receipt["after_correct"]) == 2
    run = receipt["runs"]["5"]
    assert run["settings"]["tower_warmup_steps"] == 1 and run["before"]["examples"] == 10
    # trainable: the tower, the last block, the final norm and the (extended) embedding, nothing else
    lm = GLM53(ModelConfig(**{**small, "vocab_size": 263}))
    expected = (run["parameters"]["vision"] + sum(p.numel() for p in lm.layers[-1].parameters())
                + sum(p.numel() for p in lm.final_norm.parameters()) + lm.embedding.weight.numel())
    assert run["trainable_parameters"] == expected < run["parameters"]["total"]


@pytest.mark.slow
def test_large_embedding_eps_keeps_unrelated_rows_still():
    """With plain Adam every embedding row the softmax touches takes a full-size first step; a large epsilon
    leaves rows with a tiny gradient almost where they were while the answer rows still move."""
    images, labels = held_out_set(10, seed=0)
    moved = {}
    for eps in (1e-8, 1e-2):
        model = build("faithful", seed=0)
        before = model.language_model.embedding.weight.detach().clone()
        train_digits(model, DigitTraining(steps=1, batch_size=10, lr=1e-3, weight_decay=0.0, embedding_eps=eps), 0,
                     images, labels)
        moved[eps] = (model.language_model.embedding.weight.detach() - before).abs().mean(dim=1)
    unrelated = moved[1e-8].new_ones(263, dtype=torch.bool)
    unrelated[answer_ids(torch.arange(10))] = False
    unrelated[prompt_ids(1, "cpu")[0]] = False
    answers = answer_ids(torch.arange(10))
    ratio = {eps: float(m[answers].mean() / m[unrelated].mean()) for eps, m in moved.items()}
    assert ratio[1e-8] < 2.0  # plain Adam: unrelated rows move about as far as the answer rows
    assert ratio[1e-2] > 5 * ratio[1e-8], ratio  # 1e-2: the miniature's gradients are larger than the pilot's
