"""The `glm53 eval` and `glm53 compare` commands (thin: parse, then call evaluate and compare)."""

from __future__ import annotations

import json
from pathlib import Path

from ..data.commands import DEFAULT_PER_FAMILY, split_tasks
from ..data.suites import get_suite
from ..data.tasks import read_tasks
from ..decode.sampling import SAMPLED_TEMPERATURE
from ..runtime.config_file import add_config_file_flags, config_from_command
from ..runtime.files import atomic_write_json, refuse_unusable_output
from ..runtime.settings import add_config_arguments
from ..verify.sandbox_policy import require_isolation
from .eval_config import EvalCommandConfig


def _tasks_from(cfg):
    """The tasks --tasks FILE or --suite, --split, --per-family / --count and --families choose."""
    from types import SimpleNamespace

    if cfg.tasks:
        return read_tasks(cfg.tasks)
    return split_tasks(SimpleNamespace(suite=cfg.evaluation.decoding.suite, split=cfg.split,
                                       per_family=cfg.per_family,
                                       count=cfg.count, families=cfg.families))


def add_eval_parser(sub) -> None:
    p = sub.add_parser("eval", help="greedy pass@1 or sampled pass@k of a checkpoint, with a receipt")
    add_config_arguments(p, EvalCommandConfig, title=f"evaluation (temperature default: 0 for one sample, "
                                                     f"{SAMPLED_TEMPERATURE} for several; max-new-tokens default: "
                                                     f"the suite's, 48 or 192)")
    add_config_file_flags(p)
    p.set_defaults(func=cmd_eval)


def cmd_eval(args) -> int:
    def defaults(given) -> dict:  # the suite's, and several samples' own temperature unless one is given
        found = get_suite(given("suite")).defaults("eval")
        if given("temperature") is None and (given("samples") or 1) > 1:
            found["temperature"] = SAMPLED_TEMPERATURE
        return found

    cfg = config_from_command(EvalCommandConfig, args, defaults)
    if cfg is None:  # --print-config printed it (without loading torch)
        return 0
    from ..runtime.device import resolve_device
    from ..checkpoints.format import load_model
    from .evaluate import evaluate, format_summary

    suite = get_suite(cfg.evaluation.decoding.suite)
    refuse_unusable_output(cfg.out)
    require_isolation(cfg.runtime.accept_partial_isolation, "eval")
    tasks = _tasks_from(cfg)
    loaded = load_model(cfg.checkpoint, resolve_device(cfg.runtime.device),
                        trust_unverified=cfg.runtime.trust_unverified)
    model = loaded.model
    problem = suite.model_problem(model.config)
    if problem:
        raise ValueError(f"{cfg.checkpoint}: {problem}")
    result = evaluate(model, tasks, cfg.evaluation, accepted_partial=cfg.runtime.accept_partial_isolation)
    result["checkpoint"] = str(cfg.checkpoint)
    result["checkpoint_sha256"], result["checkpoint_verified"] = loaded.weights_sha256, loaded.verified
    size = {"per_family": cfg.per_family or DEFAULT_PER_FAMILY} if suite.count_unit == "per family" else \
        {"count": len(tasks)}
    result["source"] = {"tasks_file": cfg.tasks} if cfg.tasks else {"split": cfg.split, **size,
                                                                     "families": cfg.families}
    atomic_write_json(cfg.out, result)
    print(format_summary(result))
    print(f"{result['elapsed_seconds']:.1f} s; receipt {cfg.out}")
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
        refuse_unusable_output(args.out)
    result = compare(receipts[0], receipts[1:], names=list(args.receipts), seed=args.seed)
    print(format_comparison(result))
    if args.out:
        atomic_write_json(args.out, result)
    return 0
