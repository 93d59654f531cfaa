"""The `glm53 generate` command (thin: parse, load, sample, print)."""

from __future__ import annotations

from ..runtime.config import add_device_flag
from ..runtime.files import json_text
from ..runtime.settings import add_config_arguments, config_from_args


def add_generate_parser(sub) -> None:
    from .sampling import Sampling

    p = sub.add_parser("generate", help="complete a prompt with a checkpoint")
    p.add_argument("--checkpoint", required=True, help="checkpoint folder (holding model.safetensors)")
    p.add_argument("--prompt", required=True, help="text to complete")
    p.add_argument("--escapes", action="store_true", help=r"interpret \n, \t, \\ and \xNN in --prompt")
    p.add_argument("--samples", type=int, default=1, help="completions (default: 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampling generator (default: 0)")
    p.add_argument("--stop", choices=["function", "end", "eos"], default="function",
                   help="function: stop after the first complete statement (the reference suite's rule); end: where "
                        "the function ends, at its first line that is not indented (the broad suite's multi-line "
                        "bodies); eos: only at EOS or the token cap")
    p.add_argument("--no-cache", action="store_true", help="use the plain uncached reference generator")
    add_device_flag(p)
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

    from ..runtime.device import resolve_device
    from ..train.checkpoint import load_model
    from .engine import generate_groups
    from .generate import STOP_RULES, cut_to_function, generate_uncached
    from .sampling import Sampling

    if args.samples < 1:
        raise ValueError(f"--samples must be >= 1, got {args.samples}")
    sampling = config_from_args(Sampling, args)
    device = resolve_device(args.device)
    model = load_model(args.checkpoint, device)
    generator = torch.Generator(device=device).manual_seed(args.seed)
    prompt = unescape(args.prompt) if args.escapes else args.prompt
    stop = {"function": STOP_RULES["statement"], "end": STOP_RULES["function"]}.get(args.stop)
    generate = generate_uncached if args.no_cache else generate_groups
    samples = generate(model, [prompt], args.samples, sampling, generator=generator, stop=stop)[0]
    if args.stop == "end":
        samples = [cut_to_function(s) for s in samples]
    for i, out in enumerate(samples):
        if args.json:
            print(json_text({"prompt": prompt, **out}))
        else:
            if args.samples > 1:
                print(f"--- sample {i + 1}")
            print(prompt + out["completion"])
    return 0
