"""`glm53 calibrate`: the precision of training and of decoding, and the kernel settings of training, chosen by
timing the candidates on the machine at hand.

No one choice is right for every CPU (bf16 autocast was 11x the plain path on one 2-core CPU and 4.5x on another;
bf16 decoding was slower than fp32 there), so `--precision auto` and `--sample-precision auto` use a measurement
when one exists for this machine: the CPU model (name, family/model/stepping numbers and relevant flags), its core
count and the torch version form the key of a small cache (`$GLM53_CACHE_DIR/calibration.json`, default
`~/.cache/glm53`; runtime/kernel_settings.py reads it). Without one they follow the CPU-flag rule (bf16 where the
CPU has native bf16). Receipts record the resolved precision, so a run is reproduced by giving it explicitly.
Kernel settings
(`ModelConfig.KERNEL_FIELDS`: the linear-attention core dtype and chunk, expert-row padding, the sparse attention
core dtype) are then timed one at a time in the chosen training precision, the others held at their defaults;
`--kernels auto` (pretraining) uses the choice, and the receipt's model config records it.
Training is timed at the reference pretraining batch (32 x 128), since a choice measured at another shape need not
carry over (the bf16 linear-attention core lost at 8 x 128 and won at 32 x 128 on a Zen 5), with the candidates
of one comparison stepping in turn, round by round, each compared to the first (the default) by the median of its
per-round ratios, so a drift in the machine's speed cancels; decoding's precisions take turns the same way.
Simplification: a few steps per candidate on the reference model; ties go to fp32 (bf16 must be 10% faster)
and to the default kernel setting (another must be 3% faster). About a minute and a half on a 2-core CPU.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import torch

from ..data.pretrain_batches import pretraining_batch
from ..decode.engine import generate_groups
from ..decode.sampling import Sampling
from ..model.config import KERNEL_FIELDS, ModelConfig
from ..model.model import GLM53
from ..runtime.cpu import cpu_has_native_bf16
from ..runtime.files import atomic_write_text, refuse_unwritable
from ..runtime.kernel_settings import cache_file, machine_key, read_cache
from ..train.pretrain import make_optimizer, training_update
from ..train.pretrain_config import PretrainConfig

TIE_MARGIN = 0.9  # bf16 is chosen for training or decoding only at most 90% of fp32's time
KERNEL_TIE_MARGIN = 0.97  # a non-default kernel setting only at most 97% of the default's (timed interleaved)
CALIBRATION_BATCH = (32, 128)  # the reference pretraining batch
# timed in this order, each with the choices before it applied (the chunk size after the core dtype it runs in)
KERNEL_CANDIDATES = {"linear_attention_core": ("fp32", "bf16"), "linear_attention_chunk": (16, 32, 64, 128),
                     "expert_row_padding": (0, 64), "sparse_attention_core": ("fp32", "bf16")}
BF16_ONLY = ("expert_row_padding", "sparse_attention_core", "linear_attention_core")  # no effect without bf16 autocast


def _paired(times: list[list[float]]) -> list[float]:
    """Per-candidate seconds from rounds timed in turn: the first candidate's median, and every other candidate's
    median ratio to the first within a round times that. A drift of the machine's speed between rounds (often 10%
    and more on a shared host) cancels in the ratios, where it would tip a comparison of separate medians."""
    first = statistics.median(times[0])
    return [first] + [first * statistics.median(t / f for t, f in zip(other, times[0])) for other in times[1:]]


def _turn_order(candidates: int, round_index: int) -> list[int]:
    """The order the candidates take their turns in a round: every other round reversed, because a run after
    another candidate's pays for what that one left in the caches and the allocator, and no candidate should always
    be the one that pays."""
    order = list(range(candidates))
    return order if round_index % 2 == 0 else order[::-1]


def _time_training(candidates: list[tuple[dict, str]], steps: int) -> list[float]:
    """Seconds per training step (pretraining's own, train/pretrain.py's `training_update`; until issue 45 a copy
    without clipping, the schedule and the log's figures) of each (model kwargs, precision) candidate at
    CALIBRATION_BATCH: a model each,
    two warm-up steps each (bf16 kernels are built for each new shape), then `steps` rounds in which every
    candidate takes one timed step in turn; compared to the first candidate round by round (`_paired`)."""
    runs = []
    for model_kwargs, precision in candidates:
        torch.manual_seed(0)
        model = GLM53(ModelConfig(**model_kwargs))
        cfg = PretrainConfig(out="-", model=model.config)
        runs.append((cfg, model, make_optimizer(model, cfg), precision))
    batch, length = CALIBRATION_BATCH
    times = [[] for _ in runs]
    for step in range(steps + 2):
        inputs, labels = pretraining_batch(step, batch, length)
        for i in _turn_order(len(runs), step):
            (cfg, model, optimizer, precision), seconds = runs[i], times[i]
            t0 = time.perf_counter()
            training_update(cfg, step, model, model, optimizer, inputs, labels, torch.device("cpu"), precision)
            seconds.append(time.perf_counter() - t0)
    return _paired([t[2:] for t in times])


def _time_decoding(model_kwargs: dict, precisions: list[str], rounds: int = 3) -> list[float]:
    """Seconds to sample 4 groups of 8 x 24 tokens in each precision: one warm-up call each (it builds kernels),
    then `rounds` rounds in which the precisions take turns (`_paired`)."""
    torch.manual_seed(0)
    model = GLM53(ModelConfig(**model_kwargs))
    sampling = Sampling(temperature=0.8, max_new_tokens=24, ignore_eos=True)
    prompts = ["def f(x):\n    return"] * 4
    times = [[] for _ in precisions]
    for r in range(rounds + 1):
        for i in _turn_order(len(precisions), r):
            precision, seconds = precisions[i], times[i]
            t0 = time.perf_counter()
            generate_groups(model, prompts, 8, sampling, generator=torch.Generator().manual_seed(0),
                            precision=precision)
            seconds.append(time.perf_counter() - t0)
    return _paired([t[1:] for t in times])


def tune_kernels(model_kwargs: dict, precision: str, steps: int, log=print) -> dict:
    """Time each kernel setting's candidates in `precision`, one setting at a time."""
    default = {k: getattr(ModelConfig(**model_kwargs), k) for k in KERNEL_FIELDS}
    choice, seconds = dict(default), {}
    for field, values in KERNEL_CANDIDATES.items():
        if field in BF16_ONLY and precision != "bf16":
            continue
        values = [default[field]] + [v for v in values if v != default[field]]  # each compared to the default
        times = dict(zip(values, _time_training([({**model_kwargs, **choice, field: v}, precision) for v in values],
                                                steps)))
        times = {v: times[v] for v in KERNEL_CANDIDATES[field] if v in times}
        best = min(times, key=times.get)
        choice[field] = best if times[best] <= KERNEL_TIE_MARGIN * times[default[field]] else default[field]
        seconds[field] = {str(v): t for v, t in times.items()}
        log(f"  {field}: {', '.join(f'{v} {t:.3f} s/step' for v, t in times.items())} -> {choice[field]}")
    return {"precision": precision, "choice": choice, "seconds_per_step": seconds}


def refuse_unwritable_cache(path: Path) -> None:
    """One line, before any timing, when the cache file cannot be written where it lives."""
    if path.is_dir():
        raise ValueError(f"calibrate: its cache {path} is a folder, not a file; move it away, or set GLM53_CACHE_DIR "
                         "to another folder")
    try:
        refuse_unwritable(path)
    except ValueError as err:
        reason = str(err).partition(": ")[2].partition("; choose")[0]
        raise ValueError(f"calibrate: cannot write its cache {path}: {reason}; set GLM53_CACHE_DIR to a writable "
                         "folder, or make that one writable (nothing was timed)") from None


def calibrate(model_kwargs: dict | None = None, steps: int = 6, log=print) -> dict:
    """Time fp32 and (where the CPU has native bf16) bf16 for training and decoding; cache and return the choice."""
    model_kwargs = model_kwargs or {}
    refuse_unwritable_cache(cache_file())  # before a minute and more of timing
    candidates = ["fp32", "bf16"] if cpu_has_native_bf16() else ["fp32"]
    train = dict(zip(candidates, _time_training([(model_kwargs, p) for p in candidates], steps)))
    decode = dict(zip(candidates, _time_decoding(model_kwargs, candidates)))

    def pick(times: dict) -> str:
        return "bf16" if "bf16" in times and times["bf16"] <= TIE_MARGIN * times["fp32"] else "fp32"

    log(f"training: {', '.join(f'{p} {s:.3f} s/step' for p, s in train.items())} -> {pick(train)}")
    log(f"decoding: {', '.join(f'{p} {s:.3f} s' for p, s in decode.items())} -> {pick(decode)}")
    log("kernel settings:")
    kernels = tune_kernels(model_kwargs, pick(train), steps, log)
    entry = {"train_precision": pick(train), "decode_precision": pick(decode),
             "train_seconds_per_step": train, "decode_seconds": decode, "kernels": kernels,
             "model": model_kwargs or "reference", "measured": time.strftime("%Y-%m-%dT%H:%M:%S")}
    path = cache_file()
    table = read_cache(path)  # a damaged cache is rebuilt (with the warning that says so)
    table[machine_key()] = entry
    atomic_write_text(path, json.dumps(table, indent=2, sort_keys=True) + "\n", overwrite=True)
    log(f"cached for {machine_key()} in {path}")
    return entry
