"""The `glm53 generate` command (thin: parse, check, load, sample, then print or write). One of three ways:

    --prompt TEXT           complete one prompt and print it (or --json)
    --tasks FILE, --split   complete many tasks in one process and write the rows `glm53 verify` reads (bulk.py),
                            with the stop rule, token cap, cut, precision and seed `glm53 eval` uses for --suite
    --interactive           read prompts from stdin and stream each completion as it is made (interactive.py)

Every check, on the flags, the task file and the output path, runs before the model loads, and nothing is written
until the completions are made.
"""

from __future__ import annotations

from ..data.commands import add_split_flags, add_suite_flag, split_tasks
from ..data.suites import get_suite
from ..data.tasks import completion_room_problem, read_tasks
from ..runtime.config import DECODE_PRECISION, PRECISIONS, add_device_flag
from ..runtime.files import json_text, refuse_unusable_output
from ..runtime.memory import sampling_memory_problem
from ..runtime.settings import MAX_SEED, add_config_arguments, config_from_args
from .bulk import write_completions
from .sampling import EVAL_SEED, SAMPLED_TEMPERATURE, STOP_NAMES, Sampling, TaskDecoding

BULK = ("--tasks", "--split")
# flags that apply to some ways only: given to another, they are refused rather than silently ignored
ONLY = {"out": ("--out", BULK), "suite": ("--suite", BULK), "precision": ("--precision", BULK),
        "per_family": ("--per-family", ("--split",)), "count": ("--count", ("--split",)),
        "stop": ("--stop", ("--prompt", "--interactive")), "escapes": ("--escapes", ("--prompt", "--interactive")),
        "json": ("--json", ("--prompt",)), "no_cache": ("--no-cache", ("--prompt",))}


def add_generate_parser(sub) -> None:
    p = sub.add_parser("generate", help="complete a prompt, many tasks (for glm53 verify) or prompts typed in",
                       description="Give --prompt TEXT, --tasks FILE, --split NAME or --interactive. --tasks and "
                                   "--split write one JSON Lines row per completion, the task's fields plus "
                                   "`completion` (and `sample`), for `glm53 verify --in OUT`.")
    p.add_argument("--checkpoint", required=True, help="checkpoint folder (holding model.safetensors)")
    p.add_argument("--prompt", default=None, help="text to complete")
    p.add_argument("--tasks", default=None, metavar="FILE", help="task file (JSON Lines, or a dataset: DIR, "
                                                                  "DIR:SPLIT, FILE.parquet): complete every task (as "
                                                                  "`glm53 eval --tasks` does) into --out")
    add_split_flags(p, required=False)
    add_suite_flag(p)
    p.add_argument("--interactive", action="store_true",
                   help="read prompts from stdin (an empty line ends one; Ctrl-D quits) and stream the completions; "
                        "a prompt that fails is said and the next one read, and the exit status is then 1")
    p.add_argument("--out", default=None, help="with --tasks or --split: the JSON Lines file to write (must not exist)")
    p.add_argument("--escapes", action="store_true", help=r"interpret \n, \t, \\ and \xNN in the prompt")
    p.add_argument("--samples", type=int, default=1,
                   help=f"completions per prompt or task (default: 1; several are sampled at temperature "
                        f"{SAMPLED_TEMPERATURE} unless --temperature is given)")
    p.add_argument("--seed", type=int, default=None,
                   help=f"seed of the sampling generator (default: 0; with --tasks or --split {EVAL_SEED}, eval's)")
    p.add_argument("--stop", choices=list(STOP_NAMES), default=None,
                   help="--prompt and --interactive (default: function): function: stop after the first complete "
                        "statement (the reference suite's rule); end: where the function ends, at its first line "
                        "that is not indented (the broad suite's multi-line bodies); eos: only at EOS or the token "
                        "cap. --tasks and --split stop as their --suite does")
    p.add_argument("--precision", choices=PRECISIONS, default=None,
                   help="with --tasks or --split: decoding precision (default: fp32, eval's)")
    p.add_argument("--no-cache", action="store_true", help="use the plain uncached reference generator")
    p.add_argument("--trust-unverified", action="store_true",
                   help="load a checkpoint folder that has no metadata.json (its weights and config unchecked)")
    add_device_flag(p)
    p.add_argument("--json", action="store_true", help="one JSON object per completion (token ids, cap hit)")
    add_config_arguments(p, Sampling, block="decoding", notes={
        "decoding": "max-new-tokens default with --tasks or --split: the suite's, 48 or 192"})
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


def generate_mode(args) -> str:
    """The way asked for ("--prompt", "--tasks", "--split" or "--interactive"), its flags checked, one line each."""
    if args.samples < 1:
        raise ValueError(f"--samples must be >= 1, got {args.samples}")
    if args.seed is not None and not 0 <= args.seed <= MAX_SEED:  # torch's generator takes no more
        raise ValueError(f"--seed must lie in [0, {MAX_SEED}], got {args.seed}")
    given = [flag for flag, value in (("--prompt", args.prompt), ("--tasks", args.tasks), ("--split", args.split),
                                      ("--interactive", args.interactive or None)) if value is not None]
    if given == ["--tasks", "--split"]:
        raise ValueError("give either --tasks or --split, not both")
    if not given:
        raise ValueError("give --prompt TEXT, --tasks FILE or --split NAME (the tasks to complete), or --interactive")
    if len(given) > 1:
        raise ValueError(f"give one of --prompt, --tasks, --split and --interactive, not {' and '.join(given)}")
    mode = given[0]
    for name, (flag, ways) in ONLY.items():
        value = getattr(args, name)
        if value is not None and value is not False and mode not in ways:
            raise ValueError(f"{flag} is for {' and '.join(ways)}, not {mode}: drop it")
    if mode == "--interactive" and args.samples > 1:
        raise ValueError("--interactive streams one completion per prompt: drop --samples")
    return mode


def refuse(problem: str | None) -> None:
    """A problem found before any decoding, as the command's one-line error."""
    if problem:
        raise ValueError(problem)


def cmd_generate(args) -> int:
    mode = generate_mode(args)
    if mode in BULK:
        return generate_tasks(args)
    if mode == "--interactive":
        return generate_interactive(args)
    return generate_prompt(args)


def generate_prompt(args) -> int:
    """One prompt through `GLM53.generate` (text_generation.py), the function Python callers use."""
    from ..runtime.device import resolve_device
    from ..checkpoints.format import load_model
    from .interactive import printable

    if args.temperature is None and args.samples > 1:  # as --tasks and `glm53 eval`: several samples are sampled
        args.temperature = SAMPLED_TEMPERATURE
    sampling = config_from_args(Sampling, args)
    if args.samples > 1 and sampling.temperature <= 0:
        raise ValueError("several --samples of a prompt need a --temperature > 0 (greedy samples would be identical)")
    model = load_model(args.checkpoint, resolve_device(args.device), trust_unverified=args.trust_unverified).model
    prompt = unescape(args.prompt) if args.escapes else args.prompt
    from ..data.bpe_tokenizer import tokenizer_for

    refuse(sampling_memory_problem(model.config, args.samples, sampling.max_new_tokens, prompts=1,
                                   prompt_tokens=len(tokenizer_for(model.config).encode(prompt, bos=True))))
    generations = model.generate(prompt, sampling, stop=args.stop or "function", samples=args.samples,
                                 seed=args.seed or 0, cache=not args.no_cache)
    for i, out in enumerate(generations):
        if args.json:
            print(json_text(out.to_json()))
        else:
            if args.samples > 1:
                print(f"--- sample {i + 1}")
            print(printable(out.text))
    return 0


def generate_tasks(args) -> int:
    """Every task of --tasks or --split, completed as `glm53 eval` completes them, written to --out."""
    import time

    if not args.out:
        raise ValueError("--tasks and --split write JSON Lines for `glm53 verify`: give --out FILE (it must not exist)")
    if args.out == "-":
        raise ValueError("--out - (stdout) is not offered: `glm53 verify --in` reads a file, so give --out FILE, "
                         "then run glm53 verify --in FILE")
    refuse_unusable_output(args.out)  # exists, or cannot be written: before any completion is made
    suite = get_suite(args.suite)
    if args.temperature is None and args.samples > 1:  # as `glm53 eval`: several samples are sampled by default
        args.temperature = SAMPLED_TEMPERATURE
    sampling = config_from_args(Sampling, args, base=suite.defaults("eval"))
    if args.samples > 1 and sampling.temperature <= 0:
        raise ValueError("several --samples per task need a --temperature > 0 (greedy samples would be identical)")
    cfg = TaskDecoding(samples=args.samples, sampling=sampling, seed=EVAL_SEED if args.seed is None else args.seed,
                       precision=args.precision or DECODE_PRECISION, suite=suite.name)
    tasks = read_tasks(args.tasks) if args.tasks else split_tasks(args)
    if not tasks:
        raise ValueError(f"no task of families {args.families} in split {args.split}")
    return _complete_and_write(args, suite, cfg, tasks, time.perf_counter())


def _complete_and_write(args, suite, cfg, tasks, started: float) -> int:
    import time

    from ..checkpoints.format import load_model
    from ..runtime.device import resolve_device
    from .task_completions import evaluation_completions

    model = load_model(args.checkpoint, resolve_device(args.device), trust_unverified=args.trust_unverified).model
    problem = suite.model_problem(model.config)
    if problem:
        raise ValueError(f"{args.checkpoint}: {problem}")
    refuse(sampling_memory_problem(model.config, cfg.samples, cfg.sampling.max_new_tokens, tasks=len(tasks)))
    room = completion_room_problem(tasks, cfg.sampling.max_new_tokens, model.config.max_sequence_length,
                                   "--max-new-tokens", suite.fit_context, None)
    refuse(room and f"{args.checkpoint}: {room}")  # before any decoding, not at the batch of the longest prompt
    completions, precision = evaluation_completions(model, tasks, cfg)
    rows = write_completions(args.out, tasks, completions, cfg.samples)
    print(f"wrote {rows} completions of {len(tasks)} tasks ({cfg.samples} per task; {suite.name} suite; temperature "
          f"{cfg.sampling.temperature}, seed {cfg.seed}, {precision}; {time.perf_counter() - started:.1f} s) to "
          f"{args.out}; judge them with: glm53 verify --in {args.out} --out verdicts.jsonl")
    return 0


def generate_interactive(args) -> int:
    import sys

    import torch

    from ..runtime.device import resolve_device
    from ..checkpoints.format import load_model
    from .interactive import run_repl

    sampling = config_from_args(Sampling, args)
    device = resolve_device(args.device)
    model = load_model(args.checkpoint, device, trust_unverified=args.trust_unverified).model
    generator = torch.Generator(device=device).manual_seed(args.seed or 0)
    _, failed = run_repl(model, sampling, generator, STOP_NAMES[args.stop or "function"], sys.stdin, sys.stdout,
                         sys.stderr, edit=unescape if args.escapes else str)
    return 1 if failed else 0  # the session goes on past a failed prompt; its exit status still says one failed
