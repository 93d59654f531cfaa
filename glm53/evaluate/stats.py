"""Paired statistics shared by `glm53 compare` (tasks) and `glm53 analyze` (seeds).

- `sign_vectors`: the sign vectors that test enumerates (or draws).
- `sign_flip_test`: two-sided paired permutation test of a mean difference. Under the null each paired
  difference is as likely negated, so p = the fraction of the 2^n sign vectors whose mean is at least as far
  from 0 as the observed one; exact up to 20 pairs, Monte Carlo (with its seed recorded) beyond.
- `bootstrap_interval`: percentile interval of the mean by scipy.stats.bootstrap.
- `mcnemar_exact`: the exact McNemar test (a two-sided binomial test on the discordant pairs).
- `holm`: Holm's step-down adjustment across a family of tests.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

BOOTSTRAP_RESAMPLES = 10_000
EXACT_LIMIT = 20  # 2^20 sign vectors, about a second
MONTE_CARLO_RESAMPLES = 200_000
# Floating-point slack: a sign vector whose mean equals the observed one up to rounding counts as "as extreme".
TIE_TOLERANCE = 1e-12


def sign_vectors(n: int, seed: int = 0, exact_limit: int = EXACT_LIMIT, resamples: int = MONTE_CARLO_RESAMPLES):
    """Blocks of +-1 rows: all 2^n sign vectors when n <= exact_limit, else `resamples` drawn with `seed` (the
    same draws for the same seed, so the test and its power figures in glm53.evaluate.power see the same vectors)."""
    if n <= exact_limit:
        total, block, bits = 1 << n, 1 << min(n, 16), np.arange(n)
        for start in range(0, total, block):
            codes = np.arange(start, min(start + block, total))[:, None]
            yield 1.0 - 2.0 * ((codes >> bits) & 1)
        return
    rng = np.random.default_rng(seed)
    for start in range(0, resamples, 10_000):
        yield rng.choice((-1.0, 1.0), size=(min(10_000, resamples - start), n))


def sign_flip_test(differences, seed: int = 0, exact_limit: int = EXACT_LIMIT,
                   resamples: int = MONTE_CARLO_RESAMPLES) -> dict:
    """{"p", "method": "exact" | "monte-carlo", "sign_vectors", "seed" (Monte Carlo only)}."""
    d = np.asarray(differences, dtype=float)
    n = len(d)
    if n == 0:
        raise ValueError("sign_flip_test needs at least one paired difference")
    if not np.isfinite(d).all():
        bad = int(np.flatnonzero(~np.isfinite(d))[0])
        raise ValueError(f"sign_flip_test: difference {bad + 1} of {n} is {d[bad]} (not finite), which would count "
                         "as no sign vector's equal; drop or rerun the seeds whose metric is not a number")
    observed = abs(d.mean())
    tolerance = TIE_TOLERANCE * max(1.0, float(np.abs(d).max()))
    extreme = sum(int((np.abs(signs @ d) / n >= observed - tolerance).sum())
                  for signs in sign_vectors(n, seed, exact_limit, resamples))
    if n <= exact_limit:
        return {"p": extreme / (1 << n), "method": "exact", "sign_vectors": 1 << n}
    # the observed sign vector counts as one of the draws, so p is never 0
    return {"p": (extreme + 1) / (resamples + 1), "method": "monte-carlo", "sign_vectors": resamples, "seed": seed}


def bootstrap_interval(differences, seed: int, confidence: float = 0.95,
                       resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (a single point when every value is equal)."""
    d = np.asarray(differences, dtype=float)
    if len(d) == 0:
        return (0.0, 0.0)
    if np.all(d == d[0]):
        return (float(d[0]), float(d[0]))
    res = stats.bootstrap((d,), np.mean, n_resamples=resamples, confidence_level=confidence,
                          method="percentile", random_state=np.random.default_rng(seed))
    return (float(res.confidence_interval.low), float(res.confidence_interval.high))


def seed_task_bootstrap(differences, seed: int, confidence: float = 0.95,
                        resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float]:
    """Percentile interval of the mean of a [seeds x tasks] matrix of paired differences, resampling seeds and
    then tasks (both with replacement, independently: every seed was scored on the same tasks, so a resample
    keeps the crossing). Resample b's mean is w_s' D w_t / (n_s n_t) for multinomial counts w_s, w_t."""
    d = np.asarray(differences, dtype=float)
    if d.ndim != 2 or 0 in d.shape:
        raise ValueError(f"seed_task_bootstrap needs a non-empty [seeds x tasks] matrix, got shape {d.shape}")
    n_seeds, n_tasks = d.shape
    rng = np.random.default_rng(seed)
    seed_counts = rng.multinomial(n_seeds, np.full(n_seeds, 1 / n_seeds), size=resamples)
    task_counts = rng.multinomial(n_tasks, np.full(n_tasks, 1 / n_tasks), size=resamples)
    means = np.einsum("bs,st,bt->b", seed_counts, d, task_counts) / (n_seeds * n_tasks)
    alpha = (1 - confidence) / 2
    return (float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha)))


def mcnemar_exact(gains: int, losses: int) -> float:
    n = gains + losses
    return 1.0 if n == 0 else float(stats.binomtest(gains, n, 0.5).pvalue)


def holm(pvalues: list[float]) -> list[float]:
    """Holm step-down adjusted p-values (same order as given)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted
