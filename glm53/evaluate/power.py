"""Power of the paired tests in glm53.evaluate.stats: the smallest true shift of the mean difference at which a
design with the scatter it observed would reach significance.

What the figure is: a critical shift, not the conventional 80%-power minimum detectable effect. A study whose
differences scatter exactly as observed would reject once the true mean is this far from 0; a true effect of that
size, re-measured with fresh scatter, is detected in about half of repeated studies (about 50% power). The
conventional 80%-power figure is larger, by about (z(1 - alpha/2m) + z(0.8)) / z(1 - alpha/2m) under a normal
approximation: about 1.4 times at alpha 0.05. "No difference larger than X" in a report means: had the true
difference been beyond X either way, with this scatter, the test would have rejected.

The spread is that of the centered differences c = d - mean(d): the figure asks "had the true mean been delta
instead of mean(d), with the same scatter around it, would the test have rejected?", so it does not depend on
the effect observed, only on the design (n pairs, the family of tests) and the scatter.

- `sign_flip_mde`: the exact sign-flip test at alpha / m. Holm's first and strictest step: no comparison of a
  family of m is rejected unless one reaches p <= alpha / m, so this is what any single rejection needs (later
  comparisons, once others are rejected, face alpha / (m - 1), ...; the figure does not count on them).
  For a shift delta >= 0 of c, sign vector s (sum S) is as extreme as the observed mean iff
  |s.c + delta S| >= n delta, that is iff delta <= t_s = max(s.c / (n - S), -s.c / (n + S)) (t = inf for
  the two constant vectors). So p(delta) = #{s: t_s >= delta} / 2^n is a non-increasing step function whose
  steps are the t_s, and the figure is read off the sorted t_s exactly: it is the (K+1)-th largest t_s, K the
  largest count of extreme vectors with p <= alpha / m, nudged up by a rounding margin (at the step itself
  the vector still counts). Exact up to 20 pairs; beyond, the same Monte Carlo draws as `sign_flip_test`.
- `bootstrap_mde`: the paired percentile bootstrap's 95% interval of c + delta is the interval of c shifted
  by delta (the same resamples, as the seed fixes the indices), so the interval excludes 0 once delta > -low
  (or, for a negative shift, delta > high).

Both are reported for either sign (the larger of the two shifts), the tests being two-sided. Differences that
are not finite (NaN, inf) are refused with a ValueError.
- `seeds_needed`: the fewest seeds from which on, up to a search limit, the figure at a pilot's spread
  (`design_like`) stays at most a given effect.
"""

from __future__ import annotations

import math

import numpy as np

from .stats import EXACT_LIMIT, MONTE_CARLO_RESAMPLES, bootstrap_interval, sign_vectors

ALPHA = 0.05
# How far above the step an MDE is placed: well above sign_flip_test's tie tolerance (1e-12, scaled), far below
# any figure a report prints.
ROUNDING_MARGIN = 1e-9


def exact_floor_seeds(alpha: float = ALPHA, comparisons: int = 1) -> int:
    """The fewest pairs at which the exact two-sided test can reach p <= alpha / comparisons: 2 / 2^n <= it."""
    return max(1, math.ceil(math.log2(2 * comparisons / alpha) - 1e-12))


def finite_differences(differences, what: str) -> np.ndarray:
    """The differences as floats; a ValueError naming the first non-finite one (a NaN metric in a receipt)."""
    c = np.asarray(differences, dtype=float)
    bad = np.flatnonzero(~np.isfinite(c))
    if len(bad):
        raise ValueError(f"{what}: difference {bad[0] + 1} of {len(c)} is {c[bad[0]]} (not finite); drop or rerun "
                         "the seeds whose metric is not a number")
    return c


def _shift_thresholds(c: np.ndarray, seed: int, exact_limit: int, resamples: int) -> tuple[np.ndarray, np.ndarray]:
    """t_s for a positive shift of c and for a negative one (a positive shift of -c), one per sign vector."""
    n, ups, downs = len(c), [], []
    with np.errstate(divide="ignore", invalid="ignore"):
        for signs in sign_vectors(n, seed, exact_limit, resamples):
            a, total = signs @ c, signs.sum(axis=1)
            constant = np.abs(total) == n  # all + or all -: as extreme as the observed mean whatever the shift
            up = np.maximum(a / (n - total), -a / (n + total))
            down = np.maximum(-a / (n - total), a / (n + total))
            ups.append(np.where(constant, np.inf, up))
            downs.append(np.where(constant, np.inf, down))
    return np.concatenate(ups), np.concatenate(downs)


def _largest_extreme_count(threshold: float, total: int, monte_carlo: bool) -> int:
    """The most sign vectors that may be as extreme with p <= threshold (-1: none may, p cannot get there)."""
    # exact: p = k / total; Monte Carlo: p = (k + 1) / (total + 1), the observed vector counted as one draw
    p = (lambda k: (k + 1) / (total + 1)) if monte_carlo else (lambda k: k / total)
    k = math.floor(threshold * total) + 1
    while k >= 0 and p(k) > threshold:
        k -= 1
    return k


def _step_mde(t: np.ndarray, largest: int, scale: float) -> float | None:
    if largest < 0:
        return None
    if largest >= len(t):
        return 0.0
    boundary = -np.partition(-t, largest)[largest]  # the (largest + 1)-th largest t_s
    if not np.isfinite(boundary):
        return None
    return float(boundary) + ROUNDING_MARGIN * scale


def sign_flip_mde(differences, alpha: float = ALPHA, comparisons: int = 1, seed: int = 0,
                  exact_limit: int = EXACT_LIMIT, resamples: int = MONTE_CARLO_RESAMPLES) -> dict:
    """{"mde": the larger of "positive" and "negative" (None: not reachable), "threshold": alpha / comparisons,
    "method", "reason" (when None)}: the smallest shift of the centered differences the exact sign-flip test
    (two-sided) rejects at Holm's first threshold over `comparisons` tests."""
    c = finite_differences(differences, "sign_flip_mde")
    n = len(c)
    if n == 0:
        raise ValueError("sign_flip_mde needs at least one paired difference")
    if comparisons < 1 or not 0 < alpha < 1:
        raise ValueError(f"sign_flip_mde needs comparisons >= 1 and 0 < alpha < 1, got {comparisons}, {alpha}")
    c = c - c.mean()
    threshold = alpha / comparisons
    monte_carlo = n > exact_limit
    total = resamples if monte_carlo else 1 << n
    largest = _largest_extreme_count(threshold, total, monte_carlo)
    row = {"threshold": threshold, "comparisons": comparisons, "method": "monte-carlo" if monte_carlo else "exact"}
    if largest < 2 and not monte_carlo:  # the two constant vectors are always as extreme
        return {**row, "mde": None, "positive": None, "negative": None,
                "reason": f"{n} seed{'s' if n > 1 else ''} cannot reach p <= {threshold:.4g} (the smallest exact p "
                          f"is 2/2^{n} = "
                          f"{2 / total:.4g}); at least {exact_floor_seeds(alpha, comparisons)} are needed"}
    ups, downs = _shift_thresholds(c, seed, exact_limit, resamples)
    scale = max(1.0, float(np.abs(c).max()))
    up, down = _step_mde(ups, largest, scale), _step_mde(downs, largest, scale)
    mde = None if up is None or down is None else max(up, down)
    if monte_carlo:
        row["seed"] = seed
    if mde is None:  # only Monte Carlo: exactly, K >= 2 vectors leave a finite step (the differences are finite)
        row["reason"] = f"{total} Monte Carlo draws cannot reach p <= {threshold:.4g}"
    return {**row, "mde": mde, "positive": up, "negative": down}


def bootstrap_mde(differences, seed: int, confidence: float = 0.95) -> dict:
    """{"mde", "positive", "negative"}: the smallest shift of the centered differences whose paired percentile
    bootstrap interval (the same resamples: `seed`) excludes 0. None for one pair: its "interval" is a point,
    which would call any shift detected."""
    c = finite_differences(differences, "bootstrap_mde")
    if len(c) == 0:
        raise ValueError("bootstrap_mde needs at least one paired difference")
    if len(c) == 1:
        return {"mde": None, "positive": None, "negative": None, "confidence": confidence}
    low, high = bootstrap_interval(c - c.mean(), seed, confidence)
    up, down = max(0.0, -low), max(0.0, high)
    return {"mde": max(up, down), "positive": up, "negative": down, "confidence": confidence}


def detectable_effects(differences, comparisons: int, seed: int, alpha: float = ALPHA) -> dict:
    """Both figures of one comparison (or lift test) in a study, either sign and each direction's: what
    analysis.json records under "detectable"."""
    sign_flip, bootstrap = sign_flip_mde(differences, alpha, comparisons, seed), bootstrap_mde(differences, seed)
    return {"sign_flip": sign_flip["mde"], "sign_flip_positive": sign_flip["positive"],
            "sign_flip_negative": sign_flip["negative"], "sign_flip_method": sign_flip["method"],
            "sign_flip_threshold": sign_flip["threshold"], "holm_over": comparisons,
            **({"sign_flip_reason": sign_flip["reason"]} if "reason" in sign_flip else {}),
            "bootstrap": bootstrap["mde"], "bootstrap_positive": bootstrap["positive"],
            "bootstrap_negative": bootstrap["negative"]}


def design_like(differences, n: int) -> np.ndarray:
    """n centered differences spread as the pilot's: the pilot's centered values, each taken about n / n0 times
    (its empirical quantiles at (i + 1/2) / n), rescaled at every n so that their sample SD (ddof 1) is the
    pilot's: the scatter an n-seed study would observe were the pilot's sample SD the population's (at n = n0 the
    design is the pilot itself, centered). A simplification: with few pilot seeds that SD is itself uncertain."""
    c = finite_differences(differences, "a pilot's spread")
    if len(c) < 2:
        raise ValueError("a pilot's spread needs at least 2 paired differences")
    if n < 2:
        return np.zeros(max(n, 0))
    c = c - c.mean()
    design = np.quantile(c, (np.arange(n) + 0.5) / n, method="inverted_cdf")
    design = design - design.mean()
    spread = design.std(ddof=1)
    return design * (c.std(ddof=1) / spread) if spread > 0 else design


BOOTSTRAP_FEWEST = 10  # below this the percentile bootstrap is too liberal to plan on


def _first_of_the_rest(fails, start: int, most: int) -> int | None:
    """The smallest n in [start, most] such that no n' in [n, most] fails (None: `most` itself fails). Scans
    down from `most`, so a figure that is not monotone in n (quantile designs, exact steps) cannot give a count
    that one more seed would undo."""
    if start > most:
        return None
    for n in range(most, start - 1, -1):
        if fails(n):
            return None if n == most else n + 1
    return start


def seeds_needed(differences, effect: float, comparisons: int, seed: int, alpha: float = ALPHA,
                 most: int = 100, resamples: int = 20_000) -> dict:
    """{"sign_flip", "bootstrap": the fewest seeds n such that the figure at the pilot's spread (`design_like`) is
    <= effect at n and at every count above it up to `most` (None: not even at `most`); "floor": the exact test's
    hard floor; "bootstrap_fewest": the bootstrap is searched from that count up, never below (a bootstrap count
    equal to it means "that many or fewer": use the sign-flip count below it)}. Beyond 20 seeds the sign-flip
    figure uses `resamples` Monte Carlo draws (fewer than the analysis draws: a plan needs the count, not the
    third digit)."""
    if not effect > 0:
        raise ValueError(f"the effect to detect must be > 0, got {effect}")
    floor = max(2, exact_floor_seeds(alpha, comparisons))

    def flip_fails(n):
        mde = sign_flip_mde(design_like(differences, n), alpha, comparisons, seed, resamples=resamples)["mde"]
        return mde is None or mde > effect

    def boot_fails(n):
        return bootstrap_mde(design_like(differences, n), seed)["mde"] > effect

    return {"sign_flip": _first_of_the_rest(flip_fails, floor, most),
            "bootstrap": _first_of_the_rest(boot_fails, BOOTSTRAP_FEWEST, most),
            "floor": floor, "bootstrap_fewest": BOOTSTRAP_FEWEST, "most": most}
