"""Keep a sweep's record in the repository: everything but its checkpoints.

    python scripts/keep_study.py SWEEP_FOLDER DOCS_FOLDER

Copies spec.json, sweep-log.jsonl, analysis.json, REPORT.md, charts/ and each finished job's folder (receipt,
log, training receipt and loss log) without checkpoint folders. `glm53 sweep SPEC --out DOCS_FOLDER` (or a copy
of it) then continues the study: kept jobs are skipped, the others run. Under docs/studies git ignores the
per-step loss logs (runs/ARM/seed-S/run/train_log.jsonl): the record in the repository is the receipts, the
analysis, the report and the charts; `glm53 analyze` needs only the receipts.
"""

from __future__ import annotations

import argparse

from glm53.sweep.runner import keep_without_checkpoints


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sweep", help="the sweep folder (--out of glm53 sweep)")
    p.add_argument("docs", help="where to keep its record")
    args = p.parse_args()
    print(f"kept {keep_without_checkpoints(args.sweep, args.docs)} finished jobs in {args.docs}")


if __name__ == "__main__":
    main()
