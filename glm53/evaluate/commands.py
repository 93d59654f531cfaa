"""The `glm53 eval` and `glm53 compare` commands (thin: parse, then call evaluate and compare)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..data.commands import add_split_flags
from ..runtime.device import add_device_flag
from ..runtime.files import atomic_write_json, refuse_existing
from ..runtime.settings import add_config_arguments, config_from_args


def _add_task_source(p: argparse.ArgumentParser) -> None:
    add_split_flags(p, required=False)
    p.add_argument("--tasks", help="JSON Lines task file instead of a split (scored with --suite's stop rule and cap)")


def _tasks_from(args):
    from ..data.commands import split_tasks
    from ..data.tasks import read_tasks

    if args.per_family is not None and args.per_family < 1:
        raise ValueError(f"--per-family must be >= 1, got {args.per_family}")
    if args.tasks:
        if args.split:
            raise ValueError("give either --tasks or --split, not both")
        return read_tasks(args.tasks)
    if not args.split:
        raise ValueError("give --split (reference: dev, rl, final, confirm; broad: dev, rl, confirm, compose, phrase, "
                         "human) or --tasks FILE")
    return split_tasks(args)


def add_eval_parser(sub) -> None:
    from .evaluate import EvalConfig

    p = sub.add_parser("eval", help="greedy pass@1 or sampled pass@k of a checkpoint, with a receipt")
    p.add_argument("--checkpoint", required=True, help="checkpoint folder (holding model.safetensors)")
    p.add_argument("--out", required=True, help="receipt file (must not exist)")
    _add_task_source(p)
    add_device_flag(p)
    add_config_arguments(p, EvalConfig, title="evaluation (temperature default: 0 for one sample, 0.35 for several; "
                                              "max-new-tokens default: the suite's, 48 or 192)")
    p.set_defaults(func=cmd_eval)


def cmd_eval(args) -> int:
    from ..data.suites import get_suite
    from ..runtime.device import resolve_device
    from ..train.checkpoint import load_model
    from .evaluate import EvalConfig, evaluate, format_summary

    if args.temperature is None and (args.samples or 1) > 1:
        args.temperature = 0.35
    suite = get_suite(args.suite)
    cfg = config_from_args(EvalConfig, args, base=suite.defaults("eval"))
    refuse_existing(args.out)
    tasks = _tasks_from(args)
    device = resolve_device(args.device)
    model = load_model(args.checkpoint, device)
    problem = suite.context_problem(model.config.max_sequence_length)
    if problem:
        raise ValueError(f"{args.checkpoint}: {problem}")
    result = evaluate(model, tasks, cfg)
    result["checkpoint"] = str(args.checkpoint)
    result["checkpoint_sha256"] = model.weights_sha256
    size = {"per_family": args.per_family} if suite.count_unit == "per family" else {"count": len(tasks)}
    result["source"] = {"tasks_file": args.tasks} if args.tasks else {"split": args.split, **size,
                                                                      "families": args.families}
    atomic_write_json(args.out, result)
    print(format_summary(result))
    print(f"{result['elapsed_seconds']:.1f} s; receipt {args.out}")
    return 0


def add_compare_parser(sub) -> None:
    p = sub.add_parser("compare", help="paired comparison of eval receipts: McNemar, bootstrap, Holm")
    p.add_argument("receipts", nargs="+", help="baseline receipt first, then one or more arms")
    p.add_argument("--seed", type=int, default=20260827, help="bootstrap seed (default: 20260827)")
    p.add_argument("--out", help="also write the comparison as JSON")
    p.set_defaults(func=cmd_compare)


def cmd_compare(args) -> int:
    from .compare import compare, format_comparison

    receipts = []
    for path in args.receipts:
        if not Path(path).is_file():
            raise FileNotFoundError(f"receipt {path} does not exist; write one with `glm53 eval`")
        try:
            receipts.append(json.loads(Path(path).read_text()))
        except ValueError as err:
            raise ValueError(f"{path} is not JSON ({err}); give eval receipts written by `glm53 eval --out`") from None
    if len(receipts) < 2:
        raise ValueError("compare needs a baseline receipt and at least one more")
    if args.out:
        refuse_existing(args.out)
    result = compare(receipts[0], receipts[1:], names=list(args.receipts), seed=args.seed)
    print(format_comparison(result))
    if args.out:
        atomic_write_json(args.out, result)
    return 0
