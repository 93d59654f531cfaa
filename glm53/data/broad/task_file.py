"""export_tasks: what the CLI will call to write a broad task file (with glm53.data.tasks.write_tasks)."""

from __future__ import annotations

from .check import reference_failures
from .extension import load_registry
from .splits import DEFAULT_STREAM_SEED, SPLIT_SEEDS, broad_pretraining_task, frozen_broad_tasks

SPLITS = (*SPLIT_SEEDS, "pretrain")


def export_tasks(split: str, n: int, seed: int | None = None, extra=None, check: bool = True, pool=None) -> list:
    """The first n tasks of `split` (a frozen split, or "pretrain" for the stream with `seed`, default 42).

    A frozen split's seed is fixed: `seed` must be None or that seed. `extra`: a user's primitive file (or a
    list of them), merged into the registry. With `check`, every reference body is run on its cases (through
    the verifier's python level when it exists, else by exec) and any failure raises.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown broad split {split!r}; choose from {', '.join(SPLITS)}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    registry = load_registry(extra)
    if split == "pretrain":
        seed = DEFAULT_STREAM_SEED if seed is None else seed
        tasks = [broad_pretraining_task(i, seed, registry) for i in range(n)]
    else:
        if seed is not None and seed != SPLIT_SEEDS[split]:
            raise ValueError(f"the {split} split is frozen with seed {SPLIT_SEEDS[split]}; leave seed unset")
        tasks = frozen_broad_tasks(split, n, registry)
    if check:
        method, failures = reference_failures(tasks, pool)
        if failures:
            shown = "; ".join(f"{tid}: {why}" for tid, why in failures[:3])
            raise RuntimeError(f"{len(failures)} reference bodies fail their cases ({method}): {shown}")
    return tasks
