"""The learning-rate schedules by hand: warmup, then constant or cosine. (Warmup-stable-decay was retired: a record
holding it is refused, tests/runtime/test_setting_history.py.)"""

import math

import pytest

from glm53.train.optimization import Optimization
from glm53.train.schedule import scheduled_lr


def test_warmup_then_constant_or_cosine_by_hand():
    assert [scheduled_lr(2.0, s, 100, 4, "constant") for s in range(6)] == [0.5, 1.0, 1.5, 2.0, 2.0, 2.0]
    assert scheduled_lr(2.0, 50, 100, 0, "constant") == 2.0
    assert scheduled_lr(2.0, 50, 100, 0, "cosine", 0.0) == pytest.approx(2.0 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert scheduled_lr(2.0, 100, 100, 0, "cosine", 0.1) == pytest.approx(0.2)  # the floor at the end


def test_wsd_is_no_longer_a_schedule():
    with pytest.raises(ValueError, match="--lr-schedule must be one of constant, cosine"):
        Optimization(lr_schedule="wsd")
    assert "decay_fraction" not in Optimization().__dataclass_fields__
