"""The `glm53` command: one small `add_<command>_parser` beside each command, flags generated from the config
dataclasses (settings.py), so every setting has one name and one default from flag to receipt."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from .runtime.device import DEVICE_CHOICES
from .runtime.distributed import StoppedByAnotherRank, under_torchrun
from .runtime.files import atomic_write_json, json_text, refuse_existing, refuse_nonempty_dir
from .model.config import MODEL_PRESETS, SWITCH_DEFAULTS, ModelConfig
from .runtime.settings import add_config_arguments, config_from_args
from .sweep.commands import add_analyze_parser, add_sweep_parser

SPLITS = ("dev", "rl", "final", "confirm")


def _device_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="auto", choices=DEVICE_CHOICES,
                   help="auto picks cuda, then mps, then cpu (default: auto)")


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers such as 1,2,3, got {text!r}")


# ---------------------------------------------------------------- info

def add_info_parser(sub) -> None:
    p = sub.add_parser("info", help="print config, parameter counts, layer pattern and device")
    _device_flag(p)
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.add_argument("--model", "--preset", dest="model", default="reference", choices=tuple(MODEL_PRESETS),
                   help="named architecture the flags below start from (default: reference, the 25.7M model; "
                        "released: the released GLM-5.3-Flash's parts switched on; miniature: the 248K model of the "
                        "pretraining-data studies)")
    add_config_arguments(p, ModelConfig, title="model (defaults: the named --model)")
    p.set_defaults(func=cmd_info)


def cmd_info(args) -> int:
    import torch

    from .runtime.cpu import cpu_description, cpu_summary
    from .runtime.device import explain_precision, resolve_device
    from .runtime.kernel_settings import explain_kernels
    from .model.model import GLM53

    cfg = config_from_args(ModelConfig, args, base=MODEL_PRESETS[args.model])
    counts = GLM53(cfg).parameter_counts()
    info = {"config": cfg.to_dict(), "parameters": counts, "layer_pattern": cfg.layer_pattern,
            "device": str(resolve_device(args.device)), "torch": torch.__version__, "threads": torch.get_num_threads(),
            "cpu": cpu_description(), "precision_auto": explain_precision(resolve_device(args.device)),
            "kernels_auto": explain_kernels(), "model": args.model}
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print("glm53 model")
    print(f"  parameters     {counts['total']:,} total, {counts['active']:,} active per token")
    switches = {k: getattr(cfg, k) for k, v in SWITCH_DEFAULTS.items() if getattr(cfg, k) != v}
    if switches:  # the same sizes with the reference's forms: what the released parts add
        base = GLM53(replace(cfg, **{k: SWITCH_DEFAULTS[k] for k in switches})).parameter_counts()["total"]
        print(f"  vs reference   {counts['total'] - base:+,} ({(counts['total'] - base) / base:+.1%}) from "
              + ", ".join(f"{k}={v}" for k, v in switches.items()))
    sparse_note = "" if "S" in cfg.layer_pattern else "; no sparse layer at all"
    print(f"  model          {args.model}")
    print(f"  layer pattern  {cfg.layer_pattern}  (L = linear attention, S = sparse attention{sparse_note})")
    print(f"  device         {info['device']} (torch {torch.__version__}, {info['threads']} threads)")
    print(f"  cpu            {cpu_summary(info['cpu'])}")
    print(f"  precision auto {info['precision_auto']}")
    print(f"  kernels auto   {info['kernels_auto']}")
    print("  config")
    for k, v in cfg.to_dict().items():
        print(f"    {k:24s} {v}")
    return 0


# ---------------------------------------------------------------- pretrain

def add_pretrain_parser(sub) -> None:
    from .train.pretrain import PretrainConfig

    p = sub.add_parser("pretrain", help="pretrain on generated Python functions")
    p.add_argument("--tasks", help="JSON Lines task file whose prompts are sampled at each checkpoint "
                                   "(default: dev split, one per family)")
    add_config_arguments(p, PretrainConfig, title="pretraining")
    p.set_defaults(func=cmd_pretrain)


def cmd_pretrain(args) -> int:
    from .train.pretrain import PretrainConfig, pretrain
    from .data.tasks import read_tasks

    cfg = config_from_args(PretrainConfig, args)
    return run_as_rank(pretrain, cfg, dev_tasks=read_tasks(args.tasks) if args.tasks else None)


def run_as_rank(train, cfg, **kwargs) -> int:
    """`train(cfg, ...)` as this process's rank under torchrun (joining its process group first, leaving it after),
    or as the one process; ranks other than 0 log nothing (rank 0 speaks for all)."""
    from .runtime.distributed import from_environment, shut_down

    dp, device = from_environment(cfg.device, cfg.threads)
    try:
        train(cfg, log=print if dp.is_main else (lambda *_: None), dp=dp, device=device, **kwargs)
    except BaseException:
        shut_down(dp, finished=False)
        raise
    shut_down(dp)
    return 0


# ---------------------------------------------------------------- generate

def add_generate_parser(sub) -> None:
    from .decode.generate import Sampling

    p = sub.add_parser("generate", help="complete a prompt with a checkpoint")
    p.add_argument("--checkpoint", required=True, help="checkpoint folder (holding model.safetensors)")
    p.add_argument("--prompt", required=True, help="text to complete")
    p.add_argument("--escapes", action="store_true", help=r"interpret \n, \t, \\ and \xNN in --prompt")
    p.add_argument("--samples", type=int, default=1, help="completions (default: 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampling generator (default: 0)")
    p.add_argument("--stop", choices=["function", "eos"], default="function",
                   help="function: stop after the first complete statement; eos: only at EOS or the token cap")
    p.add_argument("--no-cache", action="store_true", help="use the plain uncached reference generator")
    _device_flag(p)
    p.add_argument("--json", action="store_true", help="one JSON object per completion (token ids, cap hit)")
    add_config_arguments(p, Sampling, title="sampling")
    p.set_defaults(func=cmd_generate)


def unescape(text: str) -> str:
    r"""Backslash escapes (\n, \t, \\, \xNN, \uNNNN) without touching other characters (café stays café)."""
    import re

    table = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "0": "\0"}

    def one(m: re.Match) -> str:
        body = m.group(1)
        if body[0] in "xu":
            return chr(int(body[1:], 16))
        return table[body]

    return re.sub(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|[nrt\\'\"0])", one, text)


def cmd_generate(args) -> int:
    import torch

    from .train.checkpoint import load_model
    from .runtime.device import resolve_device
    from .decode.engine import generate_groups
    from .decode.generate import Sampling, function_body_complete, generate_uncached

    if args.samples < 1:
        raise ValueError(f"--samples must be >= 1, got {args.samples}")
    sampling = config_from_args(Sampling, args)
    device = resolve_device(args.device)
    model = load_model(args.checkpoint, device)
    generator = torch.Generator(device=device).manual_seed(args.seed)
    prompt = unescape(args.prompt) if args.escapes else args.prompt
    stop = function_body_complete if args.stop == "function" else None
    generate = generate_uncached if args.no_cache else generate_groups
    samples = generate(model, [prompt], args.samples, sampling, generator=generator, stop=stop)[0]
    for i, out in enumerate(samples):
        if args.json:
            print(json_text({"prompt": prompt, **out}))
        else:
            if args.samples > 1:
                print(f"--- sample {i + 1}")
            print(prompt + out["completion"])
    return 0


# ---------------------------------------------------------------- bench

def add_bench_parser(sub) -> None:
    p = sub.add_parser("bench", help="time the plain and the fast path on the same weights (a few minutes)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--out", help="JSON results file (default: runs/bench/bench-<time>.json)")
    p.add_argument("--quick", action="store_true", help="a tiny model, for a smoke test")
    p.add_argument("--compile", action="store_true", help="also time the fast path under torch.compile")
    p.add_argument("--profile", action="store_true",
                   help="instead: seconds per training step by component, forward and backward, fast and plain")
    p.add_argument("--model", default="reference", choices=tuple(MODEL_PRESETS),
                   help="with --profile: the named architecture to profile (released: every released part switched on)")
    p.set_defaults(func=cmd_bench)


def cmd_bench(args) -> int:
    import time

    from .speed.bench import format_report, run_bench, run_profile

    out = Path(args.out or f"runs/bench/{'profile' if args.profile else 'bench'}-{time.strftime('%Y%m%d-%H%M%S')}.json")
    refuse_existing(out)
    if args.profile:
        result = run_profile(quick=args.quick, log=(lambda *_: None) if args.json else print, model=args.model)
        atomic_write_json(out, result)
        print(json.dumps(result, indent=2) if args.json else f"\nwritten to {out}")
        return 0
    result = run_bench(quick=args.quick, compile_model=args.compile, log=(lambda *_: None) if args.json else print)
    atomic_write_json(out, result)
    print(json.dumps(result, indent=2) if args.json else format_report(result) + f"\n\nwritten to {out}")
    return 0


def add_calibrate_parser(sub) -> None:
    p = sub.add_parser("calibrate", help="time fp32 and bf16 training and decoding, then the kernel settings, here; "
                                         "--precision auto and --kernels auto then use the faster (about 1.5 minutes)")
    p.add_argument("--steps", type=int, default=4, help="timed training steps per candidate (default: 4)")
    p.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args) -> int:
    from .speed.calibrate import calibrate

    if args.steps < 1:
        raise ValueError(f"--steps must be >= 1, got {args.steps}")
    calibrate(steps=args.steps)
    return 0


# ---------------------------------------------------------------- run

def add_run_parser(sub) -> None:
    from .run import RunConfig

    p = sub.add_parser("run", help="the whole experiment: pretrain, RL, confirm, charts and REPORT.md",
                       description="Every pretraining and RL setting is a flag: --pretrain.NAME and --rl.NAME "
                                   "(defaults: the dataclass, then the preset, then what you give).")
    add_config_arguments(p, RunConfig, title="run")
    p.set_defaults(func=cmd_run)


def cmd_run(args) -> int:
    from .run import PRESETS, RunConfig, run_pipeline

    run_pipeline(config_from_args(RunConfig, args, base=PRESETS[args.preset or "full"]))
    return 0


# ---------------------------------------------------------------- rl

def add_rl_parser(sub) -> None:
    from .train.rl_config import RLConfig

    p = sub.add_parser("rl", help="RLOO post-training with rewards from running the model's code")
    add_config_arguments(p, RLConfig, title="RL")
    p.set_defaults(func=cmd_rl)


def cmd_rl(args) -> int:
    from .train.rl import rl_train
    from .train.rl_config import RLConfig
    from .data.tasks import read_tasks

    cfg = config_from_args(RLConfig, args)
    return run_as_rank(rl_train, cfg, tasks=read_tasks(cfg.tasks_file) if cfg.tasks_file else None)


# ---------------------------------------------------------------- eval, compare, verify

def _add_task_source(p: argparse.ArgumentParser) -> None:
    p.add_argument("--split", choices=SPLITS, help="a frozen split")
    p.add_argument("--per-family", type=int, default=8, help="tasks per family of the split (default: 8)")
    p.add_argument("--families", default="all", help="comma-separated family names, or all (default: all)")
    p.add_argument("--tasks", help="JSON Lines task file instead of a split")


def _tasks_from(args):
    from .data.tasks import frozen_tasks, read_tasks

    if args.per_family < 1:
        raise ValueError(f"--per-family must be >= 1, got {args.per_family}")
    if args.tasks:
        if args.split:
            raise ValueError("give either --tasks or --split, not both")
        return read_tasks(args.tasks)
    if not args.split:
        raise ValueError("give --split (dev, rl, final, confirm) or --tasks FILE")
    return frozen_tasks(args.split, per_family=args.per_family, families=args.families)


def add_eval_parser(sub) -> None:
    from .evaluate.evaluate import EvalConfig

    p = sub.add_parser("eval", help="greedy pass@1 or sampled pass@k of a checkpoint, with a receipt")
    p.add_argument("--checkpoint", required=True, help="checkpoint folder (holding model.safetensors)")
    p.add_argument("--out", required=True, help="receipt file (must not exist)")
    _add_task_source(p)
    _device_flag(p)
    add_config_arguments(p, EvalConfig, title="evaluation (temperature default: 0 for one sample, 0.35 for several)")
    p.set_defaults(func=cmd_eval)


def cmd_eval(args) -> int:
    from .train.checkpoint import load_model
    from .runtime.device import resolve_device
    from .evaluate.evaluate import EvalConfig, evaluate, format_summary

    if args.temperature is None and (args.samples or 1) > 1:
        args.temperature = 0.35
    cfg = config_from_args(EvalConfig, args)
    refuse_existing(args.out)
    tasks = _tasks_from(args)
    device = resolve_device(args.device)
    model = load_model(args.checkpoint, device)
    result = evaluate(model, tasks, cfg)
    result["checkpoint"] = str(args.checkpoint)
    result["checkpoint_sha256"] = model.weights_sha256
    result["source"] = {"tasks_file": args.tasks} if args.tasks else {
        "split": args.split, "per_family": args.per_family, "families": args.families}
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
    from .evaluate.compare import compare, format_comparison

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


def add_verify_parser(sub) -> None:
    p = sub.add_parser("verify", help="run completions against their test cases in the sandbox",
                       description="Input: JSON Lines, one {prompt, completion, entry_point, cases} a line (for example "
                                   "`glm53 generate --json` output joined with a task file's entry_point and cases). "
                                   "Output: each row plus its verdict. Streams: constant memory for any size.")
    p.add_argument("--in", dest="input", required=True, help="JSON Lines with prompt, completion, entry_point, cases")
    p.add_argument("--out", required=True, help="JSON Lines of rows with their verdicts (must not exist)")
    p.add_argument("--timeout", type=float, default=2.0, help="seconds per program (default: 2.0)")
    p.set_defaults(func=cmd_verify)


def cmd_verify(args) -> int:
    from .verify.verify_file import verify_file

    if args.timeout <= 0:
        raise ValueError(f"--timeout must be > 0, got {args.timeout}")
    counts = verify_file(args.input, args.out, timeout_s=args.timeout)
    print(f"verified {sum(counts.values())} programs: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))
    return 0


# ---------------------------------------------------------------- vision

def add_vision_parser(sub) -> None:
    from .vision.train import DigitTraining

    p = sub.add_parser("vision", help="train the miniature vision tower on generated digits")
    p.add_argument("--architecture", choices=["faithful", "baseline", "both"], default="both",
                   help="which tower (default: both, with a paired test)")
    p.add_argument("--seeds", type=_int_list, help="comma-separated seeds (default: 42; with --pilot: 73)")
    p.add_argument("--eval-examples", type=int, default=None, help="held-out digits (default: 200; pilot 100)")
    p.add_argument("--pilot", metavar="CHECKPOINT", help="attach the tower to a pretrained checkpoint instead")
    p.add_argument("--out", required=True, help="folder for vision-receipt.json (must not exist or be empty)")
    _device_flag(p)
    add_config_arguments(p, DigitTraining, title="training of the miniature")
    add_config_arguments(p, DigitTraining, prefix="pilot.", title="training of the full-model pilot "
                         "(defaults: 40 updates of 10, lr 1e-3, tower ramp over half the updates, embedding 10x)")
    p.set_defaults(func=cmd_vision)


def cmd_vision(args) -> int:
    from dataclasses import replace

    from .train.checkpoint import WEIGHTS_NAME
    from .runtime.device import resolve_device
    from .runtime.files import sha256_file
    from .vision.train import PILOT_TRAINING, DigitTraining, full_model_pilot, run_architectures

    out = Path(args.out)
    refuse_nonempty_dir(out)
    device = resolve_device(args.device)
    receipt: dict = {"device": str(device)}
    if args.pilot:
        training = config_from_args(DigitTraining, args, prefix="pilot.", base=vars(PILOT_TRAINING))
        if getattr(args, "pilot.steps") is not None and getattr(args, "pilot.tower_warmup_steps") is None:
            training = replace(training, tower_warmup_steps=training.steps // 2)  # the ramp spans half the updates
        seeds, examples = args.seeds or [73], args.eval_examples or 100
        if not Path(args.pilot).is_dir():
            raise FileNotFoundError(f"--pilot {args.pilot} is not a checkpoint folder")
        runs = {str(seed): full_model_pilot(args.pilot, seed, training, examples, device=device) for seed in seeds}
        after = [r["after"]["correct"] for r in runs.values()]
        mean = sum(after) / len(after)
        receipt["pilot"] = {"checkpoint": args.pilot, "checkpoint_sha256": sha256_file(Path(args.pilot) / WEIGHTS_NAME),
                            "runs": runs, "after_correct": after, "mean_after_correct": mean}
        if len(seeds) > 1:
            print(f"full-model pilot over seeds {seeds}: {after}, mean {mean:.1f}/{examples}")
    else:
        arches = ["faithful", "baseline"] if args.architecture == "both" else [args.architecture]
        receipt.update(run_architectures(arches, args.seeds or [42], config_from_args(DigitTraining, args),
                                         eval_examples=args.eval_examples or 200, device=device))
        if receipt["comparison"]:
            pooled = receipt["comparison"]["pooled"]
            print(f"faithful vs baseline, pooled over seeds: faithful-only {pooled['faithful_only']}, "
                  f"baseline-only {pooled['baseline_only']}, exact McNemar p = {pooled['mcnemar_p']:.4g}")
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "vision-receipt.json", receipt)
    print(f"receipt {out / 'vision-receipt.json'}")
    return 0


# ---------------------------------------------------------------- tasks

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
    from .data.tasks import frozen_tasks, write_tasks

    if args.per_family < 1:
        raise ValueError(f"--per-family must be >= 1, got {args.per_family}")
    tasks = frozen_tasks(args.split, per_family=args.per_family, families=args.families)
    write_tasks(tasks, args.out)
    print(f"wrote {len(tasks)} tasks of split {args.split} to {args.out}")
    return 0


# ---------------------------------------------------------------- the command

COMMANDS = (add_info_parser, add_pretrain_parser, add_generate_parser, add_bench_parser, add_calibrate_parser,
            add_run_parser, add_sweep_parser, add_analyze_parser,
            add_rl_parser, add_eval_parser, add_compare_parser, add_verify_parser, add_vision_parser,
            add_tasks_parser)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="glm53", description="Train and study a tiny GLM-5.3-Flash-style model on a CPU.")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return parser


RESUMABLE_COMMANDS = ("pretrain", "rl", "run")
DATA_PARALLEL_COMMANDS = ("pretrain", "rl")  # the commands that run as ranks under torchrun (distributed.py)


def interrupted_message(args, argv: list[str]) -> str:
    """What Ctrl-C leaves: the newest complete checkpoint, and the command that continues from it."""
    out = Path(args.out) if getattr(args, "out", None) else None
    saved = sorted((c for pattern in ("checkpoint-*", "*/checkpoint-*") for c in (out.glob(pattern) if out else ())
                    if (c / "metadata.json").is_file()), key=lambda c: (c / "metadata.json").stat().st_mtime)
    if args.command == "sweep":
        again = " ".join(shlex.quote(a) for a in ["glm53", *argv])
        return (f"glm53 sweep: interrupted; finished jobs keep their receipts and the running ones were stopped. "
                f"To continue, rerun the same command: {again}")
    if args.command not in RESUMABLE_COMMANDS:
        return f"glm53 {args.command}: interrupted; outputs are written whole, so nothing partial was left."
    what = f"the newest complete checkpoint is {saved[-1]}" if saved else "no checkpoint was complete yet"
    again = " ".join(shlex.quote(a) for a in ["glm53", *argv] if a != "--resume")
    return f"glm53 {args.command}: interrupted; {what}. Continue with: {again} --resume"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    rank = int(os.environ.get("RANK", "0")) if under_torchrun() else 0
    try:
        if under_torchrun() and args.command not in DATA_PARALLEL_COMMANDS:
            raise ValueError(f"{args.command} does not run under torchrun (WORLD_SIZE={os.environ['WORLD_SIZE']}); "
                             f"only {' and '.join(DATA_PARALLEL_COMMANDS)} do: start it as a plain command")
        return args.func(args)
    except KeyboardInterrupt:
        print("\n" + interrupted_message(args, argv), file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`glm53 info | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as err:  # noqa: BLE001 - one line for the user; the traceback with --debug
        if args.debug:
            raise
        known = isinstance(err, (ValueError, FileExistsError, FileNotFoundError))
        if rank != 0 and (known or isinstance(err, StoppedByAnotherRank)):
            return 2  # rank 0 met the same problem, or stopped the others for one, and says it once
        print(f"glm53 {args.command}: error: {err if known else f'{type(err).__name__}: {err}'}"
              + ("" if known else " (rerun with --debug for the traceback)"), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
