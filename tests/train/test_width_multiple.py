"""`--width-multiple`: a length-bucketed batch cut to its longest row rounded up to a multiple, so a compiled step
meets a few shapes. The extra columns are padding outside the loss, and no real position attends to them, so the
model's outputs at the real positions are the unrounded batch's."""

import pytest
import torch

from glm53 import GLM53, ModelConfig
from glm53.data.pretrain_batches import IGNORE_INDEX, pretraining_batch
from glm53.data.suites import BROAD_SEQUENCE_LENGTH
from glm53.train.pretrain_config import PretrainConfig

from ..tiny import TINY


def test_the_width_is_rounded_and_the_extra_columns_are_padding():
    widths = set()
    for step in range(8):
        plain = pretraining_batch(step, 4, BROAD_SEQUENCE_LENGTH, suite="broad", loss_on="completion")
        rounded = pretraining_batch(step, 4, BROAD_SEQUENCE_LENGTH, suite="broad", loss_on="completion",
                                    width_multiple=64)
        w = plain[0].shape[1]
        assert rounded[0].shape[1] in (BROAD_SEQUENCE_LENGTH, -(-w // 64) * 64)
        assert torch.equal(rounded[0][:, :w], plain[0]) and torch.equal(rounded[1][:, :w], plain[1])
        assert (rounded[1][:, w:] == IGNORE_INDEX).all()
        widths.add(rounded[0].shape[1])
    assert len(widths) <= 6  # (324 / 64 rounded up): few shapes, however the rows fall


def test_the_real_positions_see_the_same_outputs():
    model = GLM53(ModelConfig(**{**TINY, "max_sequence_length": 384, "sparse_window": 384})).eval()
    plain = pretraining_batch(3, 2, BROAD_SEQUENCE_LENGTH, suite="broad", loss_on="completion")[0]
    rounded = pretraining_batch(3, 2, BROAD_SEQUENCE_LENGTH, suite="broad", loss_on="completion",
                                width_multiple=128)[0]
    assert rounded.shape[1] > plain.shape[1]  # the check below compares something
    with torch.no_grad():
        a, b = model(plain), model(rounded)[:, :plain.shape[1]]
    torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)


def test_the_setting_is_checked():
    with pytest.raises(ValueError, match="--width-multiple must be >= 0"):
        PretrainConfig(out="o", width_multiple=-1)

