"""The learning-rate schedules by hand: warmup, then constant, cosine, or warmup-stable-decay."""

import math

import pytest

from glm53.train.optimization import Optimization
from glm53.train.schedule import scheduled_lr


def test_wsd_holds_the_peak_then_decays_linearly_to_the_floor():
    lr, steps, warmup = 1.0, 110, 10  # 100 steps after warmup, the last 20 decaying
    got = [scheduled_lr(lr, s, steps, warmup, "wsd", 0.1, 0.2) for s in range(steps)]
    assert got[:10] == pytest.approx([(s + 1) / 10 for s in range(10)])
    assert got[10:90] == [1.0] * 80
    assert got[90:] == pytest.approx([1 - 0.9 * (i + 1) / 20 for i in range(20)])
    assert got[-1] == pytest.approx(0.1) and all(a >= b for a, b in zip(got[9:], got[10:]))


def test_cosine_and_constant_are_unchanged():
    assert scheduled_lr(2.0, 50, 100, 0, "constant") == 2.0
    assert scheduled_lr(2.0, 50, 100, 0, "cosine", 0.0) == pytest.approx(2.0 * 0.5 * (1 + math.cos(math.pi * 0.5)))


def test_the_decay_fraction_is_checked_and_reaches_the_schedule():
    with pytest.raises(ValueError, match="--decay-fraction must be > 0"):
        Optimization(decay_fraction=0.0)
    opt = Optimization(lr=1.0, lr_schedule="wsd", decay_fraction=0.5, min_lr_ratio=0.0)
    assert opt.lr_at(49, 100) == 1.0 and opt.lr_at(50, 100) == pytest.approx(1 - 1 / 50)
