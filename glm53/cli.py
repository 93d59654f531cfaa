"""The `glm53` command: thin argparse front ends over the library."""

from __future__ import annotations

import argparse
import json
import sys

import torch

from .io import refuse_existing, refuse_nonempty_dir
from .model.config import ModelConfig


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers such as 100,200,400, got {text!r}")


def _model_config_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model (defaults: the reference 25.7M model)")
    for name, default in ModelConfig().to_dict().items():
        flag = "--" + name.replace("_", "-")
        if isinstance(default, bool):
            g.add_argument(flag, type=lambda s: s.lower() in ("1", "true", "yes"), default=None, metavar="BOOL")
        else:
            g.add_argument(flag, type=type(default), default=None)


def _model_config_from(args) -> ModelConfig:
    fields = ModelConfig().to_dict()
    overrides = {k: getattr(args, k) for k in fields if getattr(args, k, None) is not None}
    return ModelConfig(**{**fields, **overrides})


def cmd_info(args) -> int:
    from .device import resolve_device
    from .model.model import GLM53

    cfg = _model_config_from(args)
    model = GLM53(cfg)
    counts = model.parameter_counts()
    info = {"config": cfg.to_dict(), "parameters": counts, "layer_pattern": cfg.layer_pattern,
            "device": str(resolve_device(args.device)), "torch": torch.__version__, "threads": torch.get_num_threads()}
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print("glm53 model")
    print(f"  parameters     {counts['total']:,} total, {counts['active']:,} active per token")
    print(f"  layer pattern  {cfg.layer_pattern}  (L = linear attention, S = sparse attention)")
    print(f"  device         {info['device']} (torch {torch.__version__}, {info['threads']} threads)")
    print("  config")
    for k, v in cfg.to_dict().items():
        print(f"    {k:24s} {v}")
    return 0


def cmd_pretrain(args) -> int:
    from .pretrain import PretrainConfig, pretrain
    from .tasks import read_tasks

    cfg = PretrainConfig(out=args.out, steps=args.steps, checkpoints=tuple(args.checkpoints),
                         batch_size=args.batch_size, sequence_length=args.sequence_length, lr=args.lr,
                         weight_decay=args.weight_decay, grad_clip=args.grad_clip, balance_coef=args.balance_coef,
                         lr_schedule=args.lr_schedule, warmup_steps=args.warmup_steps, seed=args.seed,
                         device=args.device, precision=args.precision, compile=args.compile, resume=args.resume, progress=not args.no_progress,
                         model=_model_config_from(args))
    pretrain(cfg, dev_tasks=read_tasks(args.tasks) if args.tasks else None)
    return 0


def cmd_generate(args) -> int:
    from .checkpoint import load_model
    from .device import resolve_device
    from .engine import generate_groups
    from .generate import function_body_complete, generate_uncached

    device = resolve_device(args.device)
    model = load_model(args.checkpoint, device)
    generator = torch.Generator(device=device).manual_seed(args.seed)
    prompt = args.prompt.encode("utf-8").decode("unicode_escape") if args.escapes else args.prompt
    stop = function_body_complete if args.stop == "function" else None
    generate = generate_uncached if args.no_cache else generate_groups
    samples = generate(model, [prompt], group_size=args.samples, max_new_tokens=args.max_new_tokens,
                       temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, generator=generator,
                       stop=stop)[0]
    for i, out in enumerate(samples):
        if args.json:
            print(json.dumps({"prompt": prompt, **out}))
        else:
            if args.samples > 1:
                print(f"--- sample {i + 1}")
            print(prompt + out["completion"])
    return 0


def cmd_bench(args) -> int:
    import time as _time
    from pathlib import Path

    from .bench import format_report, run_bench
    from .io import atomic_write_json

    out = Path(args.out or f"runs/bench/bench-{_time.strftime('%Y%m%d-%H%M%S')}.json")
    refuse_existing(out)
    result = run_bench(quick=args.quick, compile_model=args.compile,
                       log=(lambda *_: None) if args.json else print)
    atomic_write_json(out, result)
    print(json.dumps(result, indent=2) if args.json else format_report(result) + f"\n\nwritten to {out}")
    return 0


def _tasks_from(args):
    from .tasks import frozen_tasks, read_tasks

    if args.tasks:
        if args.split:
            raise ValueError("give either --tasks or --split, not both")
        return read_tasks(args.tasks)
    if not args.split:
        raise ValueError("give --split (dev, rl, final, confirm) or --tasks FILE")
    return frozen_tasks(args.split, per_family=args.per_family, families=args.families)


def cmd_eval(args) -> int:
    from pathlib import Path

    from .checkpoint import WEIGHTS_NAME, load_model
    from .device import resolve_device
    from .evaluate import evaluate, format_summary
    from .io import atomic_write_json, sha256_file

    out = Path(args.out)
    refuse_existing(out)
    tasks = _tasks_from(args)
    device = resolve_device(args.device)
    model = load_model(args.checkpoint, device)
    temperature = args.temperature if args.temperature is not None else (0.35 if args.samples > 1 else 0.0)
    result = evaluate(model, tasks, samples=args.samples, temperature=temperature, seed=args.seed,
                      max_new_tokens=args.max_new_tokens, precision=args.precision)
    result["checkpoint"] = str(args.checkpoint)
    result["checkpoint_sha256"] = sha256_file(Path(args.checkpoint) / WEIGHTS_NAME)
    result["source"] = {"tasks_file": args.tasks} if args.tasks else {
        "split": args.split, "per_family": args.per_family, "families": args.families}
    atomic_write_json(out, result)
    print(format_summary(result))
    print(f"{result['elapsed_seconds']:.1f} s; receipt {out}")
    return 0


def cmd_compare(args) -> int:
    from pathlib import Path

    from .compare import compare, format_comparison
    from .io import atomic_write_json

    receipts = []
    for path in args.receipts:
        if not Path(path).is_file():
            raise FileNotFoundError(f"receipt {path} does not exist; write one with `glm53 eval`")
        receipts.append(json.loads(Path(path).read_text()))
    if len(receipts) < 2:
        raise ValueError("compare needs a baseline receipt and at least one more")
    result = compare(receipts[0], receipts[1:], names=list(args.receipts), seed=args.seed)
    print(format_comparison(result))
    if args.out:
        atomic_write_json(args.out, result)
    return 0


def cmd_verify(args) -> int:
    from .verify.verify_file import verify_file

    counts = verify_file(args.input, args.out, timeout_s=args.timeout)
    print(f"verified {sum(counts.values())} programs: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))
    return 0


def cmd_rl(args) -> int:
    from .rl import RLConfig, rl_train
    from .tasks import read_tasks

    cfg = RLConfig(init=args.init, out=args.out, groups=args.groups, group_size=args.group_size,
                   families=args.families, tasks_per_family=args.tasks_per_family, temperature=args.temperature,
                   max_new_tokens=args.max_new_tokens, lr=args.lr, train_scope=args.train_scope, reward=args.reward,
                   invalid_penalty=args.invalid_penalty, exact_bonus=args.exact_bonus,
                   checkpoints=tuple(args.checkpoints), seed=args.seed, groups_per_step=args.groups_per_step,
                   normalization=args.normalization, kl_coef=args.kl_coef, replay_coef=args.replay_coef,
                   replay_batch=args.replay_batch, device=args.device, precision=args.precision,
                   sample_precision=args.sample_precision, progress=not args.no_progress, tasks_file=args.tasks,
                   resume=args.resume)
    rl_train(cfg, tasks=read_tasks(args.tasks) if args.tasks else None)
    return 0


def cmd_run(args) -> int:
    from .run import run_pipeline

    rl = {k: v for k, v in (("temperature", args.rl_temperature), ("tasks_per_family", args.rl_tasks_per_family))
          if v is not None}
    run_pipeline(args.out, preset=args.preset, seed=args.seed, rl_seed=args.rl_seed, device=args.device,
                 rl_families=args.rl_families, overrides={"rl": rl} if rl else None, progress=not args.no_progress)
    return 0


def cmd_vision(args) -> int:
    from pathlib import Path

    from .device import resolve_device
    from .io import atomic_write_json
    from .vision.train import full_model_pilot, run_architectures

    out = Path(args.out)
    refuse_nonempty_dir(out)
    device = resolve_device(args.device)
    receipt: dict = {"device": str(device)}
    if args.pilot:
        from .checkpoint import WEIGHTS_NAME
        from .io import sha256_file

        seeds = args.seeds or [73]
        runs = {str(seed): full_model_pilot(args.pilot, steps=args.pilot_steps, batch_size=args.pilot_batch_size,
                                            eval_examples=args.pilot_eval_examples, seed=seed, lr=args.pilot_lr,
                                            tower_warmup_steps=args.pilot_tower_warmup, device=device)
                for seed in seeds}
        after = [r["after"]["correct"] for r in runs.values()]
        mean = sum(after) / len(after)
        receipt["pilot"] = {"checkpoint": args.pilot, "checkpoint_sha256": sha256_file(Path(args.pilot) / WEIGHTS_NAME),
                            "runs": runs, "after_correct": after, "mean_after_correct": mean}
        if len(seeds) > 1:
            print(f"full-model pilot over seeds {seeds}: {after}, mean {mean:.1f}/{args.pilot_eval_examples}")
    else:
        arches = ["faithful", "baseline"] if args.architecture == "both" else [args.architecture]
        seeds = args.seeds or [args.seed]
        receipt.update(run_architectures(arches, seeds, steps=args.steps, batch_size=args.batch_size,
                                         eval_examples=args.eval_examples, lr=args.lr, device=device))
        if receipt["comparison"]:
            pooled = receipt["comparison"]["pooled"]
            print(f"faithful vs baseline, pooled over seeds: faithful-only {pooled['faithful_only']}, "
                  f"baseline-only {pooled['baseline_only']}, exact McNemar p = {pooled['mcnemar_p']:.4g}")
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "vision-receipt.json", receipt)
    print(f"receipt {out / 'vision-receipt.json'}")
    return 0


def cmd_tasks_export(args) -> int:
    from .tasks import frozen_tasks, write_tasks

    tasks = frozen_tasks(args.split, per_family=args.per_family, families=args.families)
    write_tasks(tasks, args.out)
    print(f"wrote {len(tasks)} tasks of split {args.split} to {args.out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="glm53", description="Train and study a tiny GLM-5.3-Flash-style model on a CPU.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("info", help="print config, parameter counts, layer pattern and device")
    p.add_argument("--device", default="auto")
    p.add_argument("--json", action="store_true")
    _model_config_args(p)
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("pretrain", help="pretrain on generated Python functions")
    p.add_argument("--out", required=True, help="run folder (must not exist, unless --resume)")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--checkpoints", type=_int_list, default=[100, 200, 400])
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--sequence-length", type=int, default=128)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--balance-coef", type=float, default=0.01)
    p.add_argument("--lr-schedule", choices=["constant", "cosine"], default="constant")
    p.add_argument("--warmup-steps", type=int, default=0)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--device", default="auto")
    p.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="auto",
                   help="auto: bf16 autocast on hardware with native bf16 (measured faster), else fp32")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (a one-time compile of about a minute)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its latest checkpoint")
    p.add_argument("--tasks", help="JSON Lines task file whose prompts are sampled at each checkpoint (default: dev split, one per family)")
    p.add_argument("--no-progress", action="store_true", help="plain log lines instead of a progress bar")
    _model_config_args(p)
    p.set_defaults(func=cmd_pretrain)

    p = sub.add_parser("generate", help="complete a prompt with a checkpoint")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--prompt", required=True)
    p.add_argument("--escapes", action="store_true", help=r"interpret \n and similar escapes in --prompt")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--samples", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stop", choices=["function", "eos"], default="function",
                   help="function: stop after the first complete statement; eos: only at EOS or the token cap")
    p.add_argument("--no-cache", action="store_true", help="use the plain uncached reference generator")
    p.add_argument("--device", default="auto")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("bench", help="time the plain and the fast path on the same weights (a few minutes)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--out", help="JSON results file (default runs/bench/bench-<time>.json)")
    p.add_argument("--quick", action="store_true", help="a tiny model, for a smoke test")
    p.add_argument("--compile", action="store_true", help="also time the fast path under torch.compile")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("run", help="the whole experiment: pretrain, RL, confirm, charts and REPORT.md")
    p.add_argument("--out", required=True, help="run folder (must not exist)")
    p.add_argument("--preset", choices=["full", "quick"], default="full")
    p.add_argument("--seed", type=int, default=42, help="pretraining seed")
    p.add_argument("--rl-seed", type=int, default=31415)
    p.add_argument("--rl-families", default="all", help="families RL trains on (reference: increment,double,even)")
    p.add_argument("--rl-temperature", type=float, default=None, help="RL sampling temperature (preset: 0.8; reference 0.35)")
    p.add_argument("--rl-tasks-per-family", type=int, default=None, help="rl-split tasks per family (preset: 12; reference 32)")
    p.add_argument("--device", default="auto")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("rl", help="RLOO post-training with rewards from running the model's code")
    p.add_argument("--init", required=True, help="checkpoint to start from")
    p.add_argument("--out", required=True)
    p.add_argument("--groups", type=int, default=96)
    p.add_argument("--group-size", type=int, default=16)
    p.add_argument("--families", default="increment,double,even")
    p.add_argument("--tasks-per-family", type=int, default=32)
    p.add_argument("--tasks", help="JSON Lines task file to train on instead of the rl split")
    p.add_argument("--temperature", type=float, default=0.35)
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--train-scope", choices=["all", "last-block", "last-block-head"], default="last-block-head")
    p.add_argument("--reward", choices=["binary", "partial"], default="binary")
    p.add_argument("--invalid-penalty", type=float, default=-0.1)
    p.add_argument("--exact-bonus", type=float, default=0.0)
    p.add_argument("--checkpoints", type=_int_list, default=[24, 48, 72, 96])
    p.add_argument("--seed", type=int, default=31415)
    p.add_argument("--groups-per-step", type=int, default=16, help="prompt groups per optimizer step")
    p.add_argument("--normalization", choices=["sequence-mean", "token-sum"], default="sequence-mean")
    p.add_argument("--kl-coef", type=float, default=0.0, help="KL penalty to the initial policy (0 = off)")
    p.add_argument("--replay-coef", type=float, default=0.0, help="replay cross-entropy on pretraining examples (0 = off)")
    p.add_argument("--replay-batch", type=int, default=16)
    p.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="auto", help="for the update")
    p.add_argument("--sample-precision", choices=["auto", "fp32", "bf16"], default="fp32", help="for sampling")
    p.add_argument("--resume", action="store_true", help="continue the RL run in --out from its latest checkpoint")
    p.add_argument("--device", default="auto")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_rl)

    p = sub.add_parser("eval", help="greedy pass@1 or sampled pass@k of a checkpoint, with a receipt")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--split", choices=["dev", "rl", "final", "confirm"])
    p.add_argument("--per-family", type=int, default=8)
    p.add_argument("--families", default="all")
    p.add_argument("--tasks", help="JSON Lines task file instead of a split")
    p.add_argument("--samples", type=int, default=1, help="samples per task (1 = greedy pass@1)")
    p.add_argument("--temperature", type=float, default=None, help="default 0 for one sample, 0.35 for several")
    p.add_argument("--seed", type=int, default=8675309)
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--precision", choices=["fp32", "bf16", "auto"], default="fp32")
    p.add_argument("--device", default="auto")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("compare", help="paired comparison of eval receipts: McNemar, bootstrap, Holm")
    p.add_argument("receipts", nargs="+", help="baseline receipt first, then one or more arms")
    p.add_argument("--seed", type=int, default=20260827)
    p.add_argument("--out", help="also write the comparison as JSON")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("verify", help="run completions against their test cases in the sandbox")
    p.add_argument("--in", dest="input", required=True, help="JSON Lines with prompt, completion, entry_point, cases")
    p.add_argument("--out", required=True)
    p.add_argument("--timeout", type=float, default=2.0, help="seconds per program")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("vision", help="train the miniature vision tower on generated digits")
    p.add_argument("--architecture", choices=["faithful", "baseline", "both"], default="both")
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--batch-size", type=int, default=40)
    p.add_argument("--eval-examples", type=int, default=200)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--seeds", type=_int_list, help="comma-separated seeds (overrides --seed; with --pilot default 73), e.g. 1,2,3")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--pilot", metavar="CHECKPOINT", help="attach the tower to a pretrained 25.7M checkpoint instead")
    p.add_argument("--pilot-steps", type=int, default=40)
    p.add_argument("--pilot-batch-size", type=int, default=10)
    p.add_argument("--pilot-eval-examples", type=int, default=100)
    p.add_argument("--pilot-lr", type=float, default=1e-3)
    p.add_argument("--pilot-tower-warmup", type=int, default=None,
                   help="updates over which the tower's learning rate ramps up (default: half of --pilot-steps)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or mps")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_vision)

    p = sub.add_parser("tasks", help="task files")
    tsub = p.add_subparsers(dest="tasks_command", required=True)
    e = tsub.add_parser("export", help="write a frozen split as a JSON Lines task file")
    e.add_argument("--split", required=True, choices=["dev", "rl", "final", "confirm"])
    e.add_argument("--per-family", type=int, default=8)
    e.add_argument("--families", default="all", help="comma-separated family names, or all")
    e.add_argument("--out", required=True)
    e.set_defaults(func=cmd_tasks_export)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileExistsError, FileNotFoundError) as err:
        print(f"glm53 {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
