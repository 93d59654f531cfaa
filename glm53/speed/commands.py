"""The `glm53 bench`, `glm53 calibrate` and `glm53 speedrun` commands (thin: parse, then call bench, calibrate and
speedrun)."""

from __future__ import annotations

import json
from pathlib import Path

from ..model.config import MODEL_PRESETS
from ..recipes.book import RECORD, pretraining
from ..runtime.config import threads_problem
from ..runtime.config_file import config_from_command
from ..runtime.files import atomic_write_json, refuse_unusable_output
from ..runtime.memory import training_memory_problem
from ..runtime.settings import add_config_arguments
from .speedrun import speedrun
from .speedrun_config import SpeedrunConfig


def add_bench_parser(sub) -> None:
    p = sub.add_parser("bench", help="time the plain and the fast path on the same weights (a few minutes)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--out", help="JSON results file (default: runs/bench/bench-<time>.json)")
    p.add_argument("--quick", action="store_true", help="a tiny model, for a smoke test")
    p.add_argument("--compile", action="store_true", help="also time the fast path under torch.compile")
    p.add_argument("--profile", action="store_true",
                   help="instead: seconds per training step by component, forward and backward, fast and plain")
    p.add_argument("--model", default=None, choices=tuple(MODEL_PRESETS),
                   help="with --profile: the named architecture to profile (released: every released part switched on; "
                        "default: reference)")
    p.add_argument("--recipe", default=None,
                   help="with --profile: a recipe of the book (glm53/recipes/) profiled as pretraining builds it: its "
                        "shapes, tokenizer, optimizer and precision (the speedrun's record: " + RECORD + ")")
    p.set_defaults(func=cmd_bench)


def cmd_bench(args) -> int:
    import time

    from .bench import format_report, run_bench, run_profile

    out = Path(args.out or f"runs/bench/{'profile' if args.profile else 'bench'}-{time.strftime('%Y%m%d-%H%M%S')}.json")
    refuse_unusable_output(out)
    if (args.model or args.recipe) and not args.profile:
        raise ValueError("--model and --recipe choose what --profile profiles; add --profile, or leave them out")
    if args.model and args.recipe:
        raise ValueError(f"--model {args.model} and --recipe {args.recipe} name two models to profile; give one")
    if args.recipe:
        pretraining(args.recipe)  # an unknown name is refused here, in one line, before anything runs
    if args.profile:
        result = run_profile(quick=args.quick, log=(lambda *_: None) if args.json else print,
                             model=args.model or "reference", recipe=args.recipe)
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
    from .calibrate import calibrate

    if args.steps < 1:
        raise ValueError(f"--steps must be >= 1, got {args.steps}")
    calibrate(steps=args.steps)
    return 0


def add_speedrun_parser(sub) -> None:
    p = sub.add_parser("speedrun",
                       help="time to a fixed body loss on the broad stream, on the clock (docs/speedrun.md)",
                       description="Pretrain a recipe on the broad suite's stream until the body loss of the first 64 "
                                   "dev tasks reaches the target; every pretraining setting is a --pretrain.NAME flag "
                                   "(defaults: the dataclass, then the recipe, then the flags given). Exits 1 when the "
                                   "budget or the schedule ends first.")
    add_config_arguments(p, SpeedrunConfig, title="speedrun")
    p.set_defaults(func=cmd_speedrun)


def cmd_speedrun(args) -> int:
    import time

    started = time.perf_counter()  # the clock counts everything from here, importing torch included
    cfg = config_from_command(SpeedrunConfig, args, lambda given: {"pretrain": pretraining(given("recipe")
                                                                                           or RECORD)})
    if cfg is None:
        return 0
    for problem in (threads_problem(cfg.runtime.threads, cfg.runtime.force_threads),
                    training_memory_problem(cfg.pretrain, "pretrain.")):
        if problem:
            raise ValueError(problem)
    return 0 if speedrun(cfg, started)["target_reached"] else 1
