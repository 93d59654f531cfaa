"""The `glm53 vision` command (thin: parse, then call train.py's runs and write the receipt)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..checkpoints.names import WEIGHTS_NAME
from ..model.config import physical_memory_bytes
from ..runtime.config import add_device_flag
from ..runtime.files import atomic_write_json, refuse_nonempty_dir, refuse_unwritable, sha256_file
from ..runtime.settings import add_config_arguments, config_from_args
from .training_config import DigitTraining, PILOT_TRAINING, memory_problem


def _int_list(text: str) -> list[int]:
    """'1,2,3' -> [1, 2, 3]; an empty list (',' or '') is refused, not taken as the default."""
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers such as 1,2,3, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError(f"expected at least one integer, such as 42 or 1,2,3, got {text!r}")
    if len(set(values)) < len(values):  # runs are keyed by seed: a seed twice would keep one of them silently
        raise argparse.ArgumentTypeError(f"expected each integer once, got {text!r}")
    return values


def add_vision_parser(sub) -> None:
    p = sub.add_parser("vision", help="train the miniature vision tower on generated digits")
    p.add_argument("--architecture", choices=["faithful", "baseline", "both"], default="both",
                   help="which tower (default: both, with a paired test)")
    p.add_argument("--seeds", type=_int_list, help="comma-separated seeds (default: 42; with --pilot: 73)")
    p.add_argument("--eval-examples", type=int, default=None, help="held-out digits (default: 200; pilot 100)")
    p.add_argument("--pilot", metavar="CHECKPOINT", help="attach the tower to a pretrained checkpoint instead")
    p.add_argument("--trust-unverified", action="store_true",
                   help="load a checkpoint folder that has no metadata.json (its weights and config unchecked)")
    p.add_argument("--out", required=True, help="folder for vision-receipt.json (must not exist or be empty)")
    add_device_flag(p)
    add_config_arguments(p, DigitTraining, block="optimization", notes={"optimization": "training of the miniature"})
    add_config_arguments(p, DigitTraining, prefix="pilot.", defaults=PILOT_TRAINING, block="optimization", notes={
        "optimization": "training of the full-model pilot (40 updates of 10, lr 1e-3, tower ramp over half the "
                        "updates, embedding 10x)"})
    p.set_defaults(func=cmd_vision)


def _pilot_scale(checkpoint: str) -> float:
    """The pilot's cost an image over the miniature's (training_config.memory_problem), from its config.json; 1 when
    that cannot be read (loading it later says why)."""
    import json

    from .train import MINI_LM

    try:
        config = json.loads((Path(checkpoint) / "config.json").read_text())
        return max(1.0, config["dim"] * config["layers"] / (MINI_LM["dim"] * MINI_LM["layers"]))
    except (OSError, ValueError, KeyError, TypeError):
        return 1.0


def _refuse_too_much_memory(flag: str, batch_size: int, eval_examples: int, scale: float) -> None:
    problem = memory_problem(flag, batch_size, eval_examples, scale, physical_memory_bytes())
    if problem:
        raise ValueError(problem)


def cmd_vision(args) -> int:
    from dataclasses import replace

    from ..runtime.device import resolve_device
    from .train import full_model_pilot, run_architectures

    if args.eval_examples is not None and args.eval_examples < 1:  # 0 must not silently mean the default
        raise ValueError(f"--eval-examples must be >= 1, got {args.eval_examples}")
    out = Path(args.out)
    refuse_nonempty_dir(out)
    refuse_unwritable(out)
    device = resolve_device(args.device)
    receipt: dict = {"device": str(device)}
    if args.pilot:
        training = config_from_args(DigitTraining, args, prefix="pilot.", base=PILOT_TRAINING.to_dict())
        if getattr(args, "pilot.steps") is not None and getattr(args, "pilot.tower_warmup_steps") is None:
            training = replace(training, tower_warmup_steps=training.steps // 2)  # the ramp spans half the updates
        seeds, examples = args.seeds or [73], args.eval_examples or 100
        if not Path(args.pilot).is_dir():
            raise FileNotFoundError(f"--pilot {args.pilot} is not a checkpoint folder")
        _refuse_too_much_memory("--pilot.batch-size", training.batch_size, examples, _pilot_scale(args.pilot))
        runs = {str(seed): full_model_pilot(args.pilot, seed, training, examples, device=device,
                                            trust_unverified=args.trust_unverified) for seed in seeds}
        after = [r["after"]["correct"] for r in runs.values()]
        mean = sum(after) / len(after)
        receipt["pilot"] = {"checkpoint": args.pilot, "checkpoint_sha256": sha256_file(Path(args.pilot) / WEIGHTS_NAME),
                            "checkpoint_verified": (Path(args.pilot) / "metadata.json").is_file(),
                            "runs": runs, "after_correct": after, "mean_after_correct": mean}
        if len(seeds) > 1:
            print(f"full-model pilot over seeds {seeds}: {after}, mean {mean:.1f}/{examples}")
    else:
        arches = ["faithful", "baseline"] if args.architecture == "both" else [args.architecture]
        _refuse_too_much_memory("--batch-size", config_from_args(DigitTraining, args).batch_size,
                                args.eval_examples or 200, 1.0)
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
