"""The `glm53` command: one small `add_<command>_parser` beside each command, flags generated from the config
dataclasses (runtime/settings.py), so every setting has one name and one default from flag to receipt. Each
stage's commands live in its own `commands.py` (data, train, decode, evaluate, speed, sweep, vision, serve); `info`,
`run` and `verify` are here.

Light: building the parser loads the configs and the light modules alone (no torch, no matplotlib), so `glm53
--help`, a command's --help and a refused flag answer at once; each command imports what loads torch or the
plotting and statistics libraries when it runs (`glm53 verify` never loads torch). A module imports the package's
own modules at its top wherever that keeps this so (tests/test_light_cli.py)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from .checkpoints.commands import add_export_parser
from .data.commands import add_corpus_parser, add_tasks_parser
from .decode.commands import add_generate_parser
from .evaluate.commands import add_compare_parser, add_eval_parser
from .model.config import MODEL_PRESETS, SWITCH_DEFAULTS, ModelConfig
from .recipes.book import run_recipe_names, run_settings
from .run_config import RunConfig
from .runtime.config import add_device_flag, under_torchrun
from .runtime.config_file import add_config_file_flags, config_from_command
from .runtime.files import disk_full_message, refuse_unusable_output
from .runtime.settings import add_config_arguments, config_from_args
from .report.commands import add_report_parser
from .serve.commands import add_serve_parser
from .speed.commands import add_bench_parser, add_calibrate_parser, add_speedrun_parser
from .sweep.commands import add_analyze_parser, add_sweep_parser
from .train.commands import add_pretrain_parser, add_rl_parser
from .verify.languages import LANGUAGES
from .verify.sandbox_policy import require_isolation
from .verify.verifier import DEFAULT_CPU_S, MAX_TIMEOUT_S
from .verify.verify_file import verify_file
from .vision.commands import add_vision_parser


# ---------------------------------------------------------------- info

def add_info_parser(sub) -> None:
    p = sub.add_parser("info", help="print config, parameter counts, layer pattern and device")
    add_device_flag(p)
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.add_argument("--model", "--preset", dest="model", default="reference", choices=tuple(MODEL_PRESETS),
                   help="named architecture the flags below start from (default: reference, the 25.7M model; "
                        "released: the released GLM-5.3-Flash's parts switched on; miniature: the 248K model of the "
                        "pretraining-data studies)")
    add_config_arguments(p, ModelConfig, block="model", notes={"model": "defaults: the named --model"})
    p.set_defaults(func=cmd_info)


def cmd_info(args) -> int:
    import torch

    from .model.model import GLM53
    from .runtime.cpu import cpu_description, cpu_summary
    from .runtime.device import explain_precision, resolve_device
    from .runtime.kernel_settings import explain_kernels

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


# ---------------------------------------------------------------- run

def add_run_parser(sub) -> None:
    p = sub.add_parser("run", help="the whole experiment: pretrain, RL, confirm, charts and REPORT.md",
                       description="Every pretraining and RL setting is a flag: --pretrain.NAME and --rl.NAME "
                                   "(defaults: the dataclass, then the preset, then --config FILE, then the flags "
                                   "given).")
    add_config_arguments(p, RunConfig, title="run")
    add_config_file_flags(p)
    p.set_defaults(func=cmd_run)


def cmd_run(args) -> int:
    def preset(given) -> dict:
        name = given("preset") or ("broad" if given("suite") == "broad" else "full")  # --suite broad: its preset
        known = name in run_recipe_names()  # an unknown name: RunConfig's check names the choices
        return {**(run_settings(name) if known else {}), "preset": name}

    cfg = config_from_command(RunConfig, args, preset)
    if cfg is None:  # --print-config printed it (without loading torch)
        return 0
    from .train.rl_config import check_rewards_named

    check_rewards_named(cfg.rl.reward, getattr(args, "rl.reward"), "--rl.reward", args.config_file)
    from .runtime.memory import rollout_memory_problem, training_memory_problem

    # both stages' memory now, not after pretraining (RL's policy is the pretrained model)
    problem = (training_memory_problem(cfg.pretrain, "pretrain.")
               or rollout_memory_problem(cfg.rl, cfg.pretrain.model, "rl."))
    if problem:
        raise ValueError(problem)
    from .run import run_pipeline

    require_isolation(cfg.runtime.accept_partial_isolation, "run")
    run_pipeline(cfg)
    return 0


# ---------------------------------------------------------------- verify

def add_verify_parser(sub) -> None:
    p = sub.add_parser("verify", help="run completions against their test cases in the sandbox",
                       description="Input: JSON Lines, one {prompt, completion, entry_point, cases} a line (for "
                                   "example the rows `glm53 generate --tasks FILE --out completions.jsonl` writes). "
                                   "Output: each row plus its verdict. Streams: constant memory for any size.")
    p.add_argument("--in", dest="input", required=True,
                   help="JSON Lines with prompt, completion, entry_point, cases; - reads standard input")
    p.add_argument("--out", required=True, help="JSON Lines of rows with their verdicts (must not exist)")
    p.add_argument("--timeout", type=float, default=2.0,
                   help="wall-clock seconds per program, a backstop for a loaded machine (default: 2.0)")
    p.add_argument("--cpu-seconds", type=float, default=None,
                   help="CPU seconds of a program's own, plus 0.5 ms a case, after which it is a timeout (default: "
                        "0.1, the verifier's DEFAULT_CPU_S; never above --timeout)")
    p.add_argument("--skip-bad-rows", action="store_true",
                   help="judge the good rows and write a `refused` verdict with its reason for each bad row "
                        "(default: name every bad row and write nothing)")
    p.add_argument("--language", choices=LANGUAGES, default=None,
                   help="language level of every row (default: each row's own \"language\", else reference; "
                        "python-stdlib: python with the standard-library imports HumanEval's problems use)")
    p.set_defaults(func=cmd_verify)


def cmd_verify(args) -> int:
    if not 0 < args.timeout <= MAX_TIMEOUT_S:
        raise ValueError(f"--timeout must be a finite number of seconds > 0 and at most {MAX_TIMEOUT_S:.0f} (a day "
                         f"per program), got {args.timeout}")
    cpu_s = DEFAULT_CPU_S if args.cpu_seconds is None else args.cpu_seconds
    if not 0 < cpu_s <= MAX_TIMEOUT_S:
        raise ValueError(f"--cpu-seconds must be a finite number of seconds > 0 and at most {MAX_TIMEOUT_S:.0f}, got "
                         f"{args.cpu_seconds}")
    refuse_unusable_output(args.out)  # before any program runs
    counts = verify_file(args.input, args.out, timeout_s=args.timeout, language=args.language, cpu_s=cpu_s,
                         skip_bad_rows=args.skip_bad_rows)
    shown = {"timeout": 0, **({"refused": 0} if args.skip_bad_rows else {}), **counts}  # timeouts always counted
    print(f"verified {sum(counts.values())} programs: " + ", ".join(f"{k} {n}" for k, n in sorted(shown.items())))
    return 0


# ---------------------------------------------------------------- the command

COMMANDS = (add_info_parser, add_pretrain_parser, add_generate_parser, add_bench_parser, add_calibrate_parser,
            add_run_parser, add_sweep_parser, add_analyze_parser,
            add_rl_parser, add_eval_parser, add_compare_parser, add_verify_parser, add_vision_parser,
            add_tasks_parser, add_corpus_parser, add_export_parser, add_speedrun_parser, add_serve_parser,
            add_report_parser)


def package_version() -> str:
    """The installed distribution's version (pyproject's), without importing the package's heavy modules."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("glm53")
    except PackageNotFoundError:
        return "unknown (not installed; run scripts/install.sh)"


class OneLineParser(argparse.ArgumentParser):
    """A parser whose errors are one line naming the problem and where to read the flags, not argparse's usage
    block (up to 70 lines for `glm53 run`) with the error last. Subcommands' parsers are made of the same class."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="glm53", description="Train and study a tiny GLM-5.3-Flash-style model on a CPU.")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    parser.add_argument("--version", action="version", version=f"glm53 {package_version()}")
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
    if not saved and args.command != "run":  # nothing to resume from: the same command starts it again
        return f"glm53 {args.command}: interrupted; {what}. Start it again with: {again}"
    return f"glm53 {args.command}: interrupted; {what}. Continue with: {again} --resume"


def _stopped_by_another_rank(err: Exception) -> bool:
    distributed = sys.modules.get("glm53.runtime.distributed")  # only a command that loaded it can have raised it
    return distributed is not None and isinstance(err, distributed.StoppedByAnotherRank)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # --help, --version, or a one-line usage error (OneLineParser)
        return stop.code if isinstance(stop.code, int) else 2
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
        full = disk_full_message(err, getattr(args, "out", None))  # torch and safetensors say it in their words
        known = full is not None or isinstance(err, (ValueError, FileExistsError, FileNotFoundError))
        if rank != 0 and (known or _stopped_by_another_rank(err)):
            return 2  # rank 0 met the same problem, or stopped the others for one, and says it once
        line = full or (str(err) if known else f"{type(err).__name__}: {err}")
        print(f"glm53 {args.command}: error: {' '.join(line.split())}"  # one line, whatever the error held
              + ("" if known else " (rerun with --debug for the traceback)"), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
