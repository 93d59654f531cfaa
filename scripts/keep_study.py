"""Keep a sweep's record in the repository: everything but its checkpoints.

    python scripts/keep_study.py SWEEP_FOLDER DOCS_FOLDER [--setup]

Copies spec.json, sweep-log.jsonl, analysis.json, REPORT.md, charts/ and each finished job's folder (receipt,
log, training receipt and loss log) without checkpoint folders; a job's files over 64 KB but its receipt.json
are kept gzipped (NAME.gz), and under docs/studies git ignores them (an RL run's training receipt carries every
rollout) along with the RL runs' per-step and per-rollout logs. `glm53 sweep SPEC --out DOCS_FOLDER` (or a copy
of it) then continues the study: kept jobs are skipped, the others run. Under docs/studies git ignores the
per-step loss logs (runs/ARM/seed-S/run/train_log.jsonl): the record in the repository is the receipts, the
analysis, the report and the charts; `glm53 analyze` needs only the receipts.

--setup also keeps the sweep's [setup] job's record (its receipt, console log, run settings and training
receipt, and its per-step log compressed) under DOCS_FOLDER/setup-record/: not as `setup/`, which a later
`glm53 sweep --out DOCS_FOLDER` would take for a finished setup whose checkpoints it lacks.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
from pathlib import Path

from glm53.sweep.runner import keep_without_checkpoints

COMPRESS_OVER = 64 * 1024  # an RL job's rollouts and training receipt (hundreds of KB each) are kept gzipped


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sweep", help="the sweep folder (--out of glm53 sweep)")
    p.add_argument("docs", help="where to keep its record")
    p.add_argument("--setup", action="store_true", help="also keep the setup job's record under setup-record/")
    args = p.parse_args()
    kept = keep_without_checkpoints(args.sweep, args.docs, compress_over=COMPRESS_OVER)
    print(f"kept {kept} finished jobs in {args.docs}")
    if args.setup:
        print(f"kept the setup job's record in {keep_setup_record(Path(args.sweep), Path(args.docs))}")


def keep_setup_record(sweep: Path, docs: Path) -> Path:
    setup, target = sweep / "setup", docs / "setup-record"
    if not (setup / "receipt.json").is_file():
        raise SystemExit(f"{setup} holds no finished setup job (receipt.json is missing)")
    target.mkdir(parents=True, exist_ok=True)
    for name in ("receipt.json", "log.txt", "run/run.json", "run/training-receipt.json"):
        if (setup / name).is_file():
            shutil.copy2(setup / name, target / Path(name).name)
    log = setup / "run" / "train_log.jsonl"
    if log.is_file():
        with open(log, "rb") as f, gzip.open(target / "train_log.jsonl.gz", "wb") as out:
            shutil.copyfileobj(f, out)
    return target


if __name__ == "__main__":
    main()
