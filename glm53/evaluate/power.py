"""Power of the paired tests in glm53.evaluate.stats: the smallest true shift of the mean difference that a design
would detect, given the spread it observed (a minimum detectable effect, MDE).

The spread is that of the centered differences c = d - mean(d): the MDE asks "had the true mean been delta
instead of mean(d), with the same scatter around it, would the test have rejected?", so it does not depend on
the effect observed, only on the design (n pairs, the family of tests) and the scatter.

- `sign_flip_mde`: the exact sign-flip test at alpha / m. Holm's first and strictest step: no comparison of a
  family of m is rejected unless one reaches p <= alpha / m, so this is what any single rejection needs (later
  comparisons, once others are rejected, face alpha / (m - 1), ...; the MDE does not count on them).
  For a shift delta >= 0 of c, sign vector s (sum S) is as extreme as the observed mean iff
  |s.c + delta S| >= n delta, that is iff delta <= t_s = max(s.c / (n - S), -s.c / (n + S)) (t = inf for
  the two constant vectors). So p(delta) = #{s: t_s >= delta} / 2^n is a non-increasing step function whose
  steps are the t_s, and the MDE is read off the sorted t_s exactly: it is the (K+1)-th largest t_s, K the
  largest count of extreme vectors with p <= alpha / m, nudged up by a rounding margin (at the step itself
  the vector still counts). Exact up to 20 pairs; beyond, the same Monte Carlo draws as `sign_flip_test`.
- `bootstrap_mde`: the paired percentile bootstrap's 95% interval of c + delta is the interval of c shifted
  by delta (the same resamples, as the seed fixes the indices), so the interval excludes 0 once delta > -low
  (or, for a negative shift, delta > high).

Both are reported for either sign (the larger of the two shifts), the tests being two-sided.
- `seeds_needed`: the smallest seed count whose MDE at a pilot's spread is at most a given effect.
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
    c = np.asarray(differences, dtype=float)
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
                "reason": f"{n} seeds cannot reach p <= {threshold:.4g} (the smallest exact p is 2/2^{n} = "
                          f"{2 / total:.4g}); at least {exact_floor_seeds(alpha, comparisons)} are needed"}
    ups, downs = _shift_thresholds(c, seed, exact_limit, resamples)
    scale = max(1.0, float(np.abs(c).max()))
    up, down = _step_mde(ups, largest, scale), _step_mde(downs, largest, scale)
    mde = None if up is None or down is None else max(up, down)
    if monte_carlo:
        row["seed"] = seed
    if mde is None:
        row["reason"] = f"{resamples} Monte Carlo draws cannot reach p <= {threshold:.4g}"
    return {**row, "mde": mde, "positive": up, "negative": down}


def bootstrap_mde(differences, seed: int, confidence: float = 0.95) -> dict:
    """{"mde", "positive", "negative"}: the smallest shift of the centered differences whose paired percentile
    bootstrap interval (the same resamples: `seed`) excludes 0. None for one pair: its "interval" is a point,
    which would call any shift detected."""
    c = np.asarray(differences, dtype=float)
    if len(c) == 0:
        raise ValueError("bootstrap_mde needs at least one paired difference")
    if len(c) == 1:
        return {"mde": None, "positive": None, "negative": None, "confidence": confidence}
    low, high = bootstrap_interval(c - c.mean(), seed, confidence)
    up, down = max(0.0, -low), max(0.0, high)
    return {"mde": max(up, down), "positive": up, "negative": down, "confidence": confidence}


def detectable_effects(differences, comparisons: int, seed: int, alpha: float = ALPHA) -> dict:
    """Both MDEs of one comparison (or lift test) in a study: what analysis.json records under "detectable"."""
    sign_flip = sign_flip_mde(differences, alpha, comparisons, seed)
    return {"sign_flip": sign_flip["mde"], "sign_flip_method": sign_flip["method"],
            "sign_flip_threshold": sign_flip["threshold"], "holm_over": comparisons,
            **({"sign_flip_reason": sign_flip["reason"]} if "reason" in sign_flip else {}),
            "bootstrap": bootstrap_mde(differences, seed)["mde"]}


def design_like(differences, n: int) -> np.ndarray:
    """n centered differences spread as the pilot's: the pilot's centered values, each taken about n / n0 times
    (its empirical quantiles at (i + 1/2) / n), scaled by sqrt(n0 / (n0 - 1)) so that their variance is the
    pilot's sample variance (the empirical distribution's own is smaller by (n0 - 1) / n0). A simplification: the
    pilot's scatter is taken for the population's; with few pilot seeds that is itself uncertain."""
    c = np.asarray(differences, dtype=float)
    if len(c) < 2:
        raise ValueError("a pilot's spread needs at least 2 paired differences")
    c = (c - c.mean()) * np.sqrt(len(c) / (len(c) - 1))
    design = np.quantile(c, (np.arange(n) + 0.5) / n, method="inverted_cdf")
    return design - design.mean()


def seeds_needed(differences, effect: float, comparisons: int, seed: int, alpha: float = ALPHA,
                 most: int = 100, resamples: int = 20_000) -> dict:
    """{"sign_flip", "bootstrap": the fewest seeds whose MDE at the pilot's spread (`design_like`) is <= effect,
    None beyond `most`; "floor": the exact test's hard floor}. Beyond 20 seeds the sign-flip MDE uses `resamples`
    Monte Carlo draws (fewer than the analysis draws: a plan needs the count, not the third digit)."""
    if effect <= 0:
        raise ValueError(f"the effect to detect must be > 0, got {effect}")
    floor = exact_floor_seeds(alpha, comparisons)
    found = {"sign_flip": None, "bootstrap": None}
    for n in range(2, most + 1):
        design = design_like(differences, n)
        if found["bootstrap"] is None and bootstrap_mde(design, seed)["mde"] <= effect:
            found["bootstrap"] = n
        if found["sign_flip"] is None and n >= floor:
            mde = sign_flip_mde(design, alpha, comparisons, seed, resamples=resamples)["mde"]
            if mde is not None and mde <= effect:
                found["sign_flip"] = n
        if None not in found.values():
            break
    return {**found, "floor": floor, "most": most}
