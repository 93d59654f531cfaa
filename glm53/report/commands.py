"""`glm53 report RUN_DIR [--out DIR]` (folder_report.py); matplotlib loads only when the command runs."""

from __future__ import annotations

from .folder_report import write_folder_report


def add_report_parser(sub) -> None:
    p = sub.add_parser("report", help="charts, a summary table and example completions of any run folder, as "
                                      "REPORT.md with PNG charts",
                       description="Reads the JSON Lines logs and receipts that pretrain, rl, run, vision and sweep "
                                   "write. The report is derived: a report folder this command wrote is regenerated; "
                                   "any other existing --out is refused.")
    p.add_argument("run_dir", help="a run folder (pretrain, rl, run, vision or sweep)")
    p.add_argument("--out", default=None, help="folder to write REPORT.md and charts/ in (default RUN_DIR/report)")
    p.set_defaults(func=cmd_report)


def cmd_report(args) -> int:
    out = write_folder_report(args.run_dir, args.out)
    print(f"report {out / 'REPORT.md'} ({len(list((out / 'charts').glob('*.png')))} charts)")
    return 0
