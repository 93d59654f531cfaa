import pytest

from glm53.evaluate.body_loss import body_loss, body_loss_batched, reference_bodies

from ..tiny import TINY


def test_batched_body_loss_equals_the_plain_one():
    from glm53 import GLM53, ModelConfig

    model = GLM53(ModelConfig(**{**TINY, "max_sequence_length": 384}))
    items = reference_bodies("broad", "dev", 5)  # bodies of different lengths: rows are padded
    assert len({len(b) for _, _, b in items}) > 1
    assert body_loss_batched(model, items, batch_size=2) == pytest.approx(body_loss(model, items), rel=1e-5)
    assert model.training  # left as it was
