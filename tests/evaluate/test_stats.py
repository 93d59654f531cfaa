import itertools

import numpy as np
import pytest
from scipy import stats as scipy_stats

from glm53.evaluate.stats import bootstrap_interval, holm, sign_flip_test


def test_sign_flip_exact_by_hand():
    # mean 2; of the 8 sign vectors only (+,+,+) and (-,-,-) reach |mean| >= 2
    assert sign_flip_test([1, 2, 3]) == {"p": 0.25, "method": "exact", "sign_vectors": 8}
    # [1, -1]: observed mean 0, so all 4 sign vectors are as extreme
    assert sign_flip_test([1, -1])["p"] == 1.0
    # one positive pair out of one: both signs are as extreme
    assert sign_flip_test([0.5])["p"] == 1.0


def test_sign_flip_exact_equals_enumeration_and_scipy():
    rng = np.random.default_rng(3)
    d = rng.normal(0.4, 1.0, size=10)
    ours = sign_flip_test(d)["p"]
    enumerated = np.mean([abs(np.mean(np.array(s) * d)) >= abs(d.mean()) - 1e-12
                          for s in itertools.product((-1, 1), repeat=len(d))])
    theirs = scipy_stats.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=np.inf,
                                          alternative="two-sided").pvalue
    assert ours == pytest.approx(enumerated) and ours == pytest.approx(theirs)


def test_sign_flip_ties_within_rounding_count_as_extreme():
    # differences of accuracies: 0.1 + 0.2 style rounding must not drop the observed vector itself
    d = [0.1 + 0.2 - 0.3 + 0.3, 0.3, 0.3]
    assert sign_flip_test(d)["p"] == pytest.approx(0.25)


def test_sign_flip_monte_carlo_beyond_twenty_is_seeded_and_close():
    d = np.random.default_rng(5).normal(0.3, 1.0, size=24)
    a, b = sign_flip_test(d, seed=1), sign_flip_test(d, seed=1)
    assert a == b and a["method"] == "monte-carlo" and a["seed"] == 1
    exact = sign_flip_test(d, exact_limit=24)["p"]  # 2^24 vectors: still exact, about a second
    assert a["p"] == pytest.approx(exact, abs=0.01)


def test_holm_known_example():
    assert holm([0.01, 0.02, 0.03, 0.04]) == pytest.approx([0.04, 0.06, 0.06, 0.06])
    assert holm([0.5, 0.001]) == pytest.approx([0.5, 0.002])
    assert holm([]) == []


def test_bootstrap_interval_contains_mean_and_is_seeded():
    d = np.array([0.01, 0.03, 0.02, 0.05, -0.01, 0.04])
    low, high = bootstrap_interval(d, seed=7)
    assert low <= d.mean() <= high and (low, high) == bootstrap_interval(d, seed=7)
    assert bootstrap_interval([0.2, 0.2], seed=1) == (0.2, 0.2)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_sign_flip_test_refuses_a_difference_that_is_not_a_number(bad):
    # a NaN compares false with everything, so it used to count no sign vector as extreme: p = 0
    with pytest.raises(ValueError, match=rf"sign_flip_test: difference 2 of 3 is {bad} \(not finite\)") as raised:
        sign_flip_test([0.1, bad, 0.2])
    assert "\n" not in str(raised.value)
