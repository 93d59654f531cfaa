"""The `glm53 eval` and `glm53 compare` commands (thin: parse, then call evaluate and compare)."""

from __future__ import annotations

import json
from pathlib import Path

from ..data.commands import DEFAULT_PER_FAMILY, split_tasks
from ..data.suites import get_suite
from ..data.tasks import completion_room_problem, read_tasks
from ..decode.sampling import SAMPLED_TEMPERATURE
from ..runtime.config_file import add_config_file_flags, config_from_command
from ..runtime.files import atomic_write_json, atomic_write_text, refuse_unusable_output
from ..runtime.memory import sampling_memory_problem
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
                                       count=cfg.count, families=cfg.families, prompt_style=cfg.prompt_style))


def add_eval_parser(sub) -> None:
    p = sub.add_parser("eval", help="greedy pass@1 or sampled pass@k of a checkpoint, with a receipt")
    add_config_arguments(p, EvalCommandConfig, title="evaluation", notes={
        "decoding": f"temperature default: 0 for one sample, {SAMPLED_TEMPERATURE} for several; max-new-tokens "
                    f"default: the suite's, 48 or 192"})
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
    from .evaluate import evaluate, format_summary, judge, prompts_past_context

    suite = get_suite(cfg.evaluation.decoding.suite)
    refuse_unusable_output(cfg.out)
    if cfg.samples_out:
        refuse_unusable_output(cfg.samples_out)
    require_isolation(cfg.runtime.accept_partial_isolation, "eval")
    tasks = _tasks_from(cfg)
    if cfg.checkpoint:
        loaded = load_model(cfg.checkpoint, resolve_device(cfg.runtime.device),
                            trust_unverified=cfg.runtime.trust_unverified)
        model = loaded.model
        problem = suite.model_problem(model.config)
        if problem:
            raise ValueError(f"{cfg.checkpoint}: {problem}")
        decoding = cfg.evaluation.decoding
        problem = sampling_memory_problem(model.config, decoding.samples, decoding.sampling.max_new_tokens,
                                          tasks=len(tasks))
        if problem:  # before any decoding: a --samples this machine cannot hold
            raise ValueError(problem)
        past = prompts_past_context(model, tasks)  # those fail as they are; the others must fit with their cap
        room = None if suite.fit_context else completion_room_problem(
            [t for t in tasks if t.task_id not in past], decoding.sampling.max_new_tokens,
            model.config.max_sequence_length, "--max-new-tokens", context_flag=None)
        if room:  # before any decoding, not at the batch that holds the longest prompt
            raise ValueError(f"{cfg.checkpoint}: {room}")
        result = evaluate(model, tasks, cfg.evaluation, accepted_partial=cfg.runtime.accept_partial_isolation)
        result["checkpoint"] = str(cfg.checkpoint)
        result["checkpoint_sha256"], result["checkpoint_verified"] = loaded.weights_sha256, loaded.verified
    else:
        result = judge(tasks, _given_completions(cfg, tasks), cfg.evaluation,
                       accepted_partial=cfg.runtime.accept_partial_isolation)
        # made elsewhere: how they were decoded is not known here
        result["settings"].update(temperature=None, seed=None, max_new_tokens=None, greedy=None)
        result["completions"] = cfg.completions or "canonical"
    size = {"per_family": cfg.per_family or DEFAULT_PER_FAMILY} if suite.count_unit == "per family" else \
        {"count": len(tasks)}
    result["source"] = {"tasks_file": cfg.tasks} if cfg.tasks else {"split": cfg.split, **size,
                                                                     "families": cfg.families,
                                                                     "prompt_style": cfg.prompt_style}
    if cfg.samples_out:
        atomic_write_text(cfg.samples_out, "".join(json.dumps({"task_id": r["task_id"], "completion": x["completion"]})
                                                   + "\n" for r in result["tasks"] for x in r["samples"]))
    atomic_write_json(cfg.out, result)
    print(format_summary(result))
    if result["prompts_past_context"]:
        names = result["prompts_past_context"]
        print(f"{len(names)} prompts do not fit the model's context of {model.config.max_sequence_length} tokens and "
              f"fail: {', '.join(names)}")
    print(f"{result['elapsed_seconds']:.1f} s; receipt {cfg.out}")
    return 0


def _given_completions(cfg, tasks) -> dict[str, list[dict]]:
    """task id -> its completions, from --completions FILE (every task of the split, the same number each) or
    --canonical (each task's reference solution), as records the verifier judges."""
    if cfg.canonical:
        missing = [t.task_id for t in tasks if t.canonical_completion is None]
        if missing:
            raise ValueError(f"--canonical: {missing[0]} has no reference solution; give --completions FILE")
        texts = {t.task_id: [t.canonical_completion] for t in tasks}
    else:
        texts = {t.task_id: [] for t in tasks}
        path = Path(cfg.completions)
        if not path.is_file():
            raise FileNotFoundError(f"--completions {path} does not exist; write one with glm53 eval --samples-out")
        try:
            lines = path.read_text(encoding="utf-8").split("\n")
        except UnicodeDecodeError:
            raise ValueError(f"--completions {path} is not UTF-8 text; give JSON Lines") from None
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                raise ValueError(f"{path}: line {n} is not JSON; give one object {{task_id, completion}} a line") \
                    from None
            if not (isinstance(row, dict) and isinstance(row.get("completion"), str) and row.get("task_id") in texts):
                raise ValueError(f"{cfg.completions}: line {n} is not {{\"task_id\", \"completion\"}} of a task "
                                 f"of the split (its tasks run {tasks[0].task_id} ... {tasks[-1].task_id})")
            texts[row["task_id"]].append(row["completion"])
        counts = {len(v) for v in texts.values()}
        if len(counts) != 1 or 0 in counts:
            fewest = min(texts, key=lambda k: len(texts[k]))
            raise ValueError(f"{cfg.completions}: every task needs the same number of completions (at least one); "
                             f"{fewest} has {len(texts[fewest])}, another {max(counts)}")
    return {task_id: [{"completion": c, "token_ids": [], "hit_token_cap": False} for c in group]
            for task_id, group in texts.items()}


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
        if Path(path).is_dir():
            raise ValueError(f"receipt {path} is a folder; give the JSON file `glm53 eval --out` wrote")
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
