"""How many of a split's tasks any job of some kept studies solved: the ceiling those runs reach together.

    python scripts/split_coverage.py docs/studies/code-mix docs/studies/code-prompts [--metric human_pass_at_1]

Reads every job receipt under each study's runs/ (`scripts/keep_study.py` keeps them; a job records each task's
outcome under `task_outcomes`) and prints, for the metric's tasks: how many jobs were read, how many distinct tasks
at least one of them solved, and each solved task with the number of jobs that solved it. A split whose union over
many runs is small is out of reach of what those runs varied, however the arms compare.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path


def coverage(studies: list[Path], metric: str) -> tuple[int, int, Counter]:
    """(jobs read, tasks of the metric, task id -> jobs that solved it) over the studies' kept job receipts."""
    jobs, tasks, solved = 0, set(), Counter()
    for study in studies:
        receipts = sorted((study / "runs").glob("*/*/receipt.json"))
        if not receipts:
            raise SystemExit(f"{study}: no job receipts under runs/*/*/ (keep a sweep's record with "
                             "scripts/keep_study.py)")
        for path in receipts:
            outcomes = json.loads(path.read_text()).get("task_outcomes", {}).get(metric)
            if outcomes is None:
                continue
            jobs += 1
            tasks |= set(outcomes)
            solved.update(task for task, passed in outcomes.items() if passed > 0)
    return jobs, len(tasks), solved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("studies", nargs="+", type=Path, help="kept study folders (docs/studies/NAME)")
    parser.add_argument("--metric", default="human_pass_at_1", help="a per-task metric of the job receipts")
    args = parser.parse_args()
    jobs, tasks, solved = coverage(args.studies, args.metric)
    if not jobs:
        raise SystemExit(f"no job receipt records per-task outcomes for {args.metric!r}")
    print(f"{args.metric}: {jobs} jobs, {len(solved)} of {tasks} tasks solved by at least one "
          f"({len(solved) / tasks:.1%}); the best job's score is at most that")
    for task, count in solved.most_common():
        print(f"  {task}: {count} of {jobs} jobs")


if __name__ == "__main__":
    main()
