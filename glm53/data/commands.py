"""The `glm53 tasks` command: task files of the frozen splits."""

from __future__ import annotations

SPLITS = ("dev", "rl", "final", "confirm")


def add_tasks_parser(sub) -> None:
    p = sub.add_parser("tasks", help="task files")
    tsub = p.add_subparsers(dest="tasks_command", required=True)
    e = tsub.add_parser("export", help="write a frozen split as a JSON Lines task file")
    e.add_argument("--split", required=True, choices=SPLITS, help="which frozen split")
    e.add_argument("--per-family", type=int, default=8, help="tasks per family (default: 8)")
    e.add_argument("--families", default="all", help="comma-separated family names, or all (default: all)")
    e.add_argument("--out", required=True, help="JSON Lines task file to write (must not exist)")
    e.set_defaults(func=cmd_tasks_export)


def cmd_tasks_export(args) -> int:
    from .tasks import frozen_tasks, write_tasks

    if args.per_family < 1:
        raise ValueError(f"--per-family must be >= 1, got {args.per_family}")
    tasks = frozen_tasks(args.split, per_family=args.per_family, families=args.families)
    write_tasks(tasks, args.out)
    print(f"wrote {len(tasks)} tasks of split {args.split} to {args.out}")
    return 0
