"""The `glm53 tasks` command: task files of the frozen splits (JSON Lines, or as datasets with the hf extra, which
glm53/interop/datasets_io.py writes, a floor above, asked for by role), and the task-choosing flags `glm53 eval`
shares; and `glm53 corpus build`, whose work is corpus_build.py's."""

from __future__ import annotations

import argparse

from ..runtime.files import refuse_unusable_output
from ..runtime.providers import provider
from ..runtime.settings import add_config_arguments, config_from_args
from .broad.docstring import DEFAULT_STYLE, PROMPT_STYLES, styled_tasks
from .broad.task_file import export_tasks
from .corpus_build_config import SOURCES, CorpusBuildConfig
from .suites import ALL_SPLITS, SUITE_NAMES, get_suite
from .tasks import write_tasks

SPLITS = ("dev", "rl", "final", "confirm")  # the reference suite's
WHOLE_SUITE = "all"  # tasks export --split all: every split of the suite, each its own split of the dataset
EXPORT_FORMATS = ("jsonl", "datasets", "parquet")
DEFAULT_PER_FAMILY = 8
DEFAULT_COUNT = 100  # broad suite: tasks of a split (the human split: all 88)
PROMPT_STYLE_HELP = ("broad suite: how a prompt gives the description: comment (comment lines above the def line, "
                     "as the tasks are drawn) or docstring (the def line, then a PEP 257 docstring with one of the "
                     "task's cases as an example; task ids end in -doc)")


def add_suite_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suite", default=None, metavar="|".join(SUITE_NAMES),
                   help="task suite (default: reference, the eight one-line families; broad: generated multi-line "
                        "functions and the hand-written human split)")


def add_split_flags(p: argparse.ArgumentParser, required: bool, whole_suite: str = "") -> None:
    """The task-choosing flags; `whole_suite`: the help of --split all (glm53 tasks export's), else none."""
    p.add_argument("--split", required=required, choices=ALL_SPLITS + ((WHOLE_SUITE,) if whole_suite else ()),
                   help="a frozen split (reference: dev, rl, final, confirm; broad: dev, rl, confirm, compose, phrase, "
                        "human)" + whole_suite)
    p.add_argument("--per-family", type=int, default=None,
                   help=f"reference suite: tasks per family (default: {DEFAULT_PER_FAMILY})")
    p.add_argument("--count", type=int, default=None,
                   help=f"broad suite: the first N tasks of the split (default: {DEFAULT_COUNT}; human: all 88)")
    p.add_argument("--families", default="all", help="comma-separated family names, or all (default: all; broad "
                                                     "suite: root primitives)")
    p.add_argument("--prompt-style", default=DEFAULT_STYLE, choices=PROMPT_STYLES, help=PROMPT_STYLE_HELP)


def prompt_style_problem(suite: str | None, style: str) -> str | None:
    """Why --prompt-style `style` cannot render the tasks of `suite`, or None."""
    if style == DEFAULT_STYLE or get_suite(suite).name == "broad":
        return None
    return (f"--prompt-style {style} renders the broad suite's prompts (generated and human splits); the "
            f"{get_suite(suite).name} suite's prompts are its own: leave --prompt-style {DEFAULT_STYLE}")


def split_tasks(args) -> list:
    """The tasks --suite, --split, --per-family / --count, --families and --prompt-style choose (each checked, one
    line)."""
    style = getattr(args, "prompt_style", None) or DEFAULT_STYLE
    problem = prompt_style_problem(args.suite, style)
    if problem:
        raise ValueError(problem)
    return styled_tasks(_split_tasks(args), style)


def _split_tasks(args) -> list:
    suite = get_suite(args.suite)
    if args.split not in suite.splits:
        raise ValueError(f"the {suite.name} suite has no split {args.split!r}; its splits are "
                         f"{', '.join(suite.splits)}")
    if suite.count_unit == "per family":
        if args.count is not None:
            raise ValueError(f"--count is for the broad suite; the {suite.name} suite counts --per-family")
        count = args.per_family = DEFAULT_PER_FAMILY if args.per_family is None else args.per_family
        flag = "--per-family"
    else:
        if args.per_family is not None:
            raise ValueError(f"--per-family is for the reference suite; the {suite.name} suite takes --count (the "
                             "first N tasks of the split)")
        count = args.count if args.count is not None else (None if args.split in suite.scored_whole else DEFAULT_COUNT)
        flag = "--count"
    if count is not None and count < 1:
        raise ValueError(f"{flag} must be >= 1, got {count}")
    if count is None:  # a split scored whole (broad's human, humaneval), whatever --families says
        return suite.tasks(args.split, None)
    return suite.tasks(args.split, count, args.families)


def add_tasks_parser(sub) -> None:
    p = sub.add_parser("tasks", help="task files")
    tsub = p.add_subparsers(dest="tasks_command", required=True)
    e = tsub.add_parser("export", help="write a frozen split as a JSON Lines task file, or as a dataset",
                        description="--format datasets and parquet write the JSON Lines rows' fields as columns, "
                                    "\"cases\" as its JSON text (glm53/interop/datasets_io.py); --tasks, "
                                    "--tasks-file and pretrain --corpus read them back (DIR, DIR:SPLIT, FILE.parquet). "
                                    "Both need the hf extra: bash scripts/install.sh --hf.")
    add_suite_flag(e)
    add_split_flags(e, required=True, whole_suite="; all: every split of the suite, with --format datasets (a "
                                                  "DatasetDict) or parquet (a folder of SPLIT.parquet), each split "
                                                  "its first --count / --per-family tasks, as one split would be")
    e.add_argument("--primitives", metavar="FILE", action="append",
                   help="broad suite: a primitive file (TOML, glm53/data/broad/examples/extra_primitives.toml) merged "
                        "into the registry, checked first (repeatable)")
    e.add_argument("--format", default="jsonl", choices=EXPORT_FORMATS,
                   help="jsonl: a JSON Lines task file (the default); datasets: a folder written by the datasets "
                        "package's save_to_disk (a Dataset; with --split all a DatasetDict); parquet: a .parquet file "
                        "(with --split all a folder of SPLIT.parquet). datasets and parquet need the hf extra")
    e.add_argument("--out", required=True, help="the task file, dataset folder or parquet file to write (must not "
                                                "exist)")
    e.set_defaults(func=cmd_tasks_export)


def export_form_problem(split: str, form: str, out: str) -> str | None:
    """Why --split `split` cannot be written as --format `form` to --out `out`, or None."""
    whole = split == WHOLE_SUITE
    if whole and form == "jsonl":
        return ("--split all writes every split of the suite, which one JSON Lines file cannot keep apart; give "
                "--format datasets (a DatasetDict) or --format parquet (a folder of SPLIT.parquet), or one --split")
    if form == "jsonl" and out.endswith(".parquet"):
        return (f"--out {out}: --format jsonl writes JSON Lines, which a .parquet name would hide from every reader "
                "(they read a .parquet file as parquet); give --format parquet, or an --out ending in .jsonl")
    if form == "parquet" and whole == out.endswith(".parquet"):
        return (f"--out {out}: --split all --format parquet writes a folder of SPLIT.parquet files; give an --out "
                "without the .parquet ending" if whole else
                f"--out {out}: --format parquet writes one parquet file, which --tasks reads by its name; give an "
                "--out ending in .parquet")
    return None


def cmd_tasks_export(args) -> int:
    suite = get_suite(args.suite)
    refuse_unusable_output(args.out)
    problem = export_form_problem(args.split, args.format, args.out)
    if problem:
        raise ValueError(problem)
    if args.primitives:
        if suite.name != "broad" or args.split in ("human", WHOLE_SUITE):
            raise ValueError("--primitives extends the broad suite's generated splits (dev, rl, confirm, compose, "
                             "phrase): give --suite broad and one of those splits")
        if args.families != "all" or args.per_family is not None:
            raise ValueError("with --primitives give the split's size as --count, and no --families")
    if args.format == "jsonl":
        tasks = _export_tasks(args)
        write_tasks(tasks, args.out)
        print(f"wrote {len(tasks)} tasks of split {args.split} ({suite.name} suite) to {args.out}")
        return 0
    whole = args.split == WHOLE_SUITE
    splits = provider("tasks as a dataset")(lambda: _export_splits(args, suite), args.out, args.format, whole)
    shown = ", ".join(f"{split} {len(tasks)}" for split, tasks in splits.items()) if whole else args.split
    form = f"a {'DatasetDict' if whole else 'Dataset'} (save_to_disk)" if args.format == "datasets" else "parquet"
    print(f"wrote {sum(map(len, splits.values()))} tasks of split{'s' if whole else ''} {shown} ({suite.name} suite) "
          f"to {args.out} as {form}")
    return 0


def _export_splits(args, suite) -> dict[str, list]:
    """{split: its tasks}: the split --split names, or with --split all every split of the suite."""
    if args.split != WHOLE_SUITE:
        return {args.split: _export_tasks(args)}
    return {split: _export_tasks(argparse.Namespace(**{**vars(args), "split": split})) for split in suite.splits}


def _export_tasks(args) -> list:
    """The tasks of --split, --primitives included, checked."""
    if args.primitives:
        tasks = styled_tasks(export_tasks(args.split, args.count or DEFAULT_COUNT, extra=args.primitives),
                             args.prompt_style)
    else:
        tasks = split_tasks(args)
    if not tasks:
        raise ValueError(f"no task of families {args.families} in the split {args.split}")
    return tasks


def add_corpus_parser(sub) -> None:
    p = sub.add_parser("corpus", help="pretraining corpora of real code")
    csub = p.add_subparsers(dest="corpus_command", required=True)
    b = csub.add_parser("build", help="harvest documented, self-contained Python functions into a JSON Lines corpus",
                        description="Top-level functions with a docstring, each with the import lines it uses, from "
                                    "the standard library (and with --site-packages the installed distributions): "
                                    "tests, generated files and duplicates left out, and every function sharing 13 "
                                    "words with a HumanEval or broad evaluation task dropped. Writes DIR/corpus.jsonl "
                                    "(for pretrain --corpus) and DIR/receipt.json.")
    b.add_argument("--from", dest="source", required=True, choices=SOURCES,
                   help="where the code comes from (python-sources: this Python's standard library, then with "
                        "--site-packages the environment's installed distributions)")
    add_config_arguments(b, CorpusBuildConfig, title="corpus build", block="data")
    b.set_defaults(func=cmd_corpus_build)


def cmd_corpus_build(args) -> int:
    import time

    from .corpus_build import build_corpus
    from .python_sources import harvest_sources

    cfg = config_from_args(CorpusBuildConfig, args)
    refuse_unusable_output(cfg.out)  # before any file is read
    start = time.perf_counter()
    sources, unlisted = harvest_sources(cfg.site_packages)
    receipt = build_corpus(cfg, sources, unlisted, args.source)
    kept, files = receipt["kept"], receipt["files"]
    print(f"corpus {cfg.out}/corpus.jsonl: {kept['documents']:,} functions ({kept['bytes']:,} bytes, "
          f"{kept['byte_tokens']:,} byte tokens) from {receipt['functions']['found']:,} found in {files['read']:,} of "
          f"{files['seen']:,} files; {receipt['exact_duplicates_removed']:,} exact and "
          f"{receipt['near_duplicates_removed']:,} near duplicates, "
          f"{sum(receipt['decontamination']['removed'].values()):,} contaminated removed "
          f"({time.perf_counter() - start:.0f} s; counts in receipt.json)")
    return 0
