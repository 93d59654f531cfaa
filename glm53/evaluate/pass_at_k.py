"""The unbiased pass@k estimator of Chen et al. (2021): from c passing samples among n drawn for a problem, the
chance that at least one of k samples passes. Plain Python (no torch, no scipy), so reports and `--help` can
import it light."""

from __future__ import annotations

from math import comb


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of the chance that at least one of k samples passes, from c passes in n samples:
    1 - C(n - c, k) / C(n, k)."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per task, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)
