"""How `glm53 analyze` and `glm53 sweep --plan` word their figures: a metric's unit (fractions in points) and the
smallest detectable effect beside an effect (glm53/evaluate/power.py's figures, as analysis.json records them).

The wording follows each test's own verdict: the sign-flip phrase from Holm's adjusted p, the bootstrap phrase
from whether its 95% interval excludes 0, so neither borrows the other's verdict. Figures are rounded up, so
"no difference larger than X" stays on the safe side of the figure it prints.
"""

from __future__ import annotations

import math

from ..evaluate.power import ALPHA

FRACTIONS = {"target_byte_accuracy", "exact_match", "dev_pass_rate", "pass_rate", "tasks_solved", "greedy_pass_at_1",
             "sampled_pass_at_1", "sampled_pass_at_k", "train_exact_rate", "zero_variance_fraction"}
FRACTION_SUFFIXES = ("_pass_at_1", "_pass_at_1_before", "_lift")  # rl-splits' per-split metrics


def is_fraction(metric: str) -> bool:
    return metric in FRACTIONS or metric.endswith(FRACTION_SUFFIXES)


def magnitude(metric: str, value: float) -> str:
    """A non-negative figure rounded up: fractions to 0.1 point, others to 4 significant digits."""
    if value == math.inf:
        return "inf"
    if is_fraction(metric):
        return f"{math.ceil(1000 * value - 1e-6) / 10:.1f} pp"
    if value <= 0:
        return "0"
    unit = 10.0 ** (math.floor(math.log10(value)) - 3)
    return f"{math.ceil(value / unit - 1e-6) * unit:.4g}"


def seeds(n: int) -> str:
    return f"{n} seed" + ("" if n == 1 else "s")


def _rejected(row: dict) -> bool:
    return row.get("holm_p") is not None and row["holm_p"] <= ALPHA


def _observed_sign(row: dict) -> float:
    return row.get("mean_difference", row.get("mean")) or 0.0


def _sign_flip_text(metric: str, row: dict, det: dict) -> str:
    over = f"sign-flip, Holm over {det['holm_over']}"
    if _rejected(row):  # Holm may reject at a later step, below the first step's figure: say which figure it is
        key = "sign_flip_positive" if _observed_sign(row) >= 0 else "sign_flip_negative"
        first = det.get(key, det["sign_flip"])
        at_first = ("at Holm's first step " + seeds(row["n"]) + " cannot reach p <= "
                    f"{det['sign_flip_threshold']:.3g}" if first is None else
                    f"detectable from {magnitude(metric, first)} at Holm's first step")
        return f"detected (Holm p {row['holm_p']:.3g} <= {ALPHA}); {at_first} ({over})"
    if det["sign_flip"] is None:
        return f"{seeds(row['n'])} cannot reach p <= {det['sign_flip_threshold']:.3g} ({over})"
    return f"no difference larger than {magnitude(metric, det['sign_flip'])} ({over})"


def _bootstrap_text(metric: str, row: dict, det: dict) -> str:
    if det["bootstrap"] is None:
        return "no bootstrap interval from one seed"
    low, high = row.get("bootstrap95") or (0.0, 0.0)
    if low > 0 or high < 0:
        return "bootstrap interval excludes 0 (liberal at few seeds)"
    return f"no difference larger than {magnitude(metric, det['bootstrap'])} (bootstrap)"


def detectable_text(metric: str, row: dict) -> str:
    """The figures beside an effect, each worded by its own test's verdict, e.g. "no difference larger than
    1.3 pp (sign-flip, Holm over 1); no difference larger than 1.0 pp (bootstrap)"."""
    det = row.get("detectable")
    if not det:
        return "-"
    left_out = row.get("not_finite_seeds")
    note = (f"seed{'s' if len(left_out) > 1 else ''} {', '.join(map(str, left_out))} left out (metric not a number); "
            if left_out else "")
    return f"{note}{_sign_flip_text(metric, row, det)}; {_bootstrap_text(metric, row, det)}"
