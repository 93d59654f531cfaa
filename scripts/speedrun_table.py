"""The speedrun's paired figures from kept records: each recipe's time to target per seed and its median, and each
recipe's ratio to the nearest of its ancestors that was timed (the previous record), on the seeds both ran
(docs/speedrun.md's record table is written from this).

    python scripts/speedrun_table.py docs/records/speedrun-records-2026-12-03

A record is a folder holding speedrun.json (glm53 speedrun's output); its recipe and seed are read from that file,
so folder names do not matter. A run that missed the target counts as missing, and the table says so.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from glm53.recipes.book import read_recipe, recipe_chain, recipe_names


def load(folder: Path) -> dict[str, dict[int, dict]]:
    """recipe -> seed -> the record's speedrun.json."""
    runs: dict[str, dict[int, dict]] = {}
    for path in sorted(folder.glob("*/speedrun.json")):
        record = json.loads(path.read_text())
        record["folder"] = path.parent.name
        runs.setdefault(record["recipe"], {})[record["seed"]] = record
    return runs


def minutes(seconds: float | None) -> str:
    return "missed" if seconds is None else f"{seconds / 60:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a folder of speedrun record folders")
    args = parser.parse_args()
    runs = load(args.folder)
    if not runs:
        print(f"{args.folder}: no */speedrun.json found; give the folder that holds the record folders",
              file=sys.stderr)
        return 2
    order = sorted((name for name in recipe_names() if name in runs), key=lambda name: len(recipe_chain(name)))
    print("| recipe | previous record | seeds | minutes to target, per seed | median "
          "| ratio to the previous record, per seed | CPU |")
    print("|---|---|---|---|---|---|---|")
    for name in order:
        seeds = runs[name]
        times = {s: r["seconds_to_target"] for s, r in sorted(seeds.items())}
        reached = [t for t in times.values() if t is not None]
        median = minutes(statistics.median(reached)) if len(reached) == len(times) else "-"
        parent = read_recipe(name).parent
        while parent is not None and parent not in runs:  # an ancestor screened but never timed (muon)
            parent = read_recipe(parent).parent
        ratios = []
        for seed, t in times.items():
            before = runs.get(parent, {}).get(seed, {}).get("seconds_to_target")
            if t is not None and before is not None:
                ratios.append(f"{seed}: {before / t:.2f}x")
        cpu = {r["cpu"] for r in seeds.values()}
        print(f"| {name} | {parent or '-'} | {', '.join(map(str, times))} | "
              f"{', '.join(f'{s}: {minutes(t)}' for s, t in times.items())} | {median} | "
              f"{', '.join(ratios) or '-'} | {', '.join(sorted(cpu))} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
