"""How much memory a setting needs, against what this machine has available: said before any work, so a batch,
a group or a sample count the machine cannot hold is refused in one line naming the flag, the estimate, the memory
available and a value that fits, instead of swapping the machine to a halt minutes later. Light: no torch.

The estimates are floors, not forecasts: each counts only what the setting surely allocates (the activations a
training step keeps for backward, the decoding cache of every row sampled at once), with constants below what was
measured, so a refused setting cannot run here and an accepted one may still be too big. They scale with the model
and are compared with the memory available now (MemAvailable, within a cgroup's limit), never with a fixed cap, so
a big machine takes what fits it.
"""

from __future__ import annotations

import os
from pathlib import Path

GIB = 2 ** 30
FLOAT_BYTES = 4
# Activations a training step keeps for backward, in float32 values per token per unit of model width per block.
# Measured on the reference model (dim 192, 12 blocks; hyper-connections, MoE): a row of 128 tokens adds about
# 440 KiB a token in fp32 and 275 KiB under bf16 autocast (48 and 30 values); 24 stays below both.
ACTIVATION_VALUES = 24
# Decoding's peak over its cache: measured at 1.9x (the reference model, 2,000 rows) and 2.2x (the tests' tiny
# model, 20,000 rows), as the cache is copied when finished rows leave the batch and each linear layer's state is
# rebuilt every token; 1.5x stays below both.
CACHE_PEAK = 1.5
# The measured peaks over these floors (pretraining in fp32 1.8x, decoding up to 1.5x): a value offered as one that
# fits is the most the floor allows divided by this.
PEAK_OVER_FLOOR = 2
# A sweep job is a process of its own: torch alone holds about 270 MiB of it (measured), before any model.
JOB_PROCESS_BYTES = 256 * 2 ** 20


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_room() -> int | None:
    """What a cgroup memory limit leaves this process's group (v2, then v1), or None without a limit."""
    for limit_file, usage_file in (("memory.max", "memory.current"),
                                   ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes")):
        try:
            limit = (Path("/sys/fs/cgroup") / limit_file).read_text().strip()
            usage = int((Path("/sys/fs/cgroup") / usage_file).read_text().strip())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < 2 ** 60:  # "max", or v1's page-rounded 2**63 for no limit
            return max(0, int(limit) - usage)
    return None


def available_memory_bytes() -> int | None:
    """The memory this process may still take without swapping: the kernel's MemAvailable (free memory plus the
    caches it can drop), within a cgroup's limit; the machine's physical memory where the system says no more;
    None where it says nothing."""
    available = _meminfo_available()
    if available is None:
        try:
            available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            available = None
    room = _cgroup_room()
    if room is not None:
        available = room if available is None else min(available, room)
    return available


def training_bytes_per_token(model) -> int:
    """The activations one token of a training batch keeps for backward through every block, and its logits and
    their gradient (a floor; `model`: a ModelConfig)."""
    return FLOAT_BYTES * (ACTIVATION_VALUES * model.dim * model.layers + 2 * model.vocab_size)


def decode_bytes_per_row(model, length: int) -> int:
    """The decoding cache of one row of `length` tokens (model/cache.py: keys and values of every sparse layer,
    the indexer's keys, the recurrent state of every linear layer) times CACHE_PEAK, and its logits, in float32
    (a floor; `model`: a ModelConfig)."""
    sparse = model.layers // model.sparse_every
    linear = model.layers - sparse
    head_dim = model.dim // model.heads
    index_keys = model.indexer_dim if model.sparse_selection == "indexer" else 0
    cache = sparse * length * (2 * model.dim + index_keys) + linear * (model.dim * head_dim + model.dim)
    return int(FLOAT_BYTES * (CACHE_PEAK * cache + model.vocab_size))


def _size(n: float) -> str:
    for unit, scale in (("GiB", GIB), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n:,.0f} bytes"


def too_much_memory(flag: str, value: int, per_unit: int, what: str, *, fixed: int = 0, units_per_value: int = 1,
                    available: int | None = None, also: str = "", least: int = 1) -> str | None:
    """Why `flag value` cannot fit: it needs `fixed` + value x units_per_value x per_unit bytes (`what`: what
    the bytes are, in a few words), more than the memory available (measured when not given); None when it fits
    or the system does not say. The line ends with a value that fits (`least`: the smallest the flag takes): half
    the most the floor allows, as the measured peaks run up to twice the floors; then `also`, another way out."""
    available = available_memory_bytes() if available is None else available
    need = fixed + value * units_per_value * per_unit
    if available is None or need <= available:
        return None
    fits = max(0, int((available - fixed) // max(1, units_per_value * per_unit)) // PEAK_OVER_FLOOR)
    fix = (f"give {flag} {fits:,} or less" if fits >= least else
           f"not even {flag} {least:,} fits")
    return (f"{flag} {value:,} needs about {_size(need)} of memory ({what}), more than the {_size(available)} this "
            f"machine has available; {fix}{also}")


def ranks_here() -> tuple[int, int]:
    """(this machine's ranks, all ranks) under torchrun; (1, 1) for a plain process."""
    world = max(1, int(os.environ.get("WORLD_SIZE", "1") or 1))
    local = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", str(world)) or world))
    return min(local, world), world


def training_memory_problem(cfg, prefix: str = "", available: int | None = None) -> str | None:
    """Why one micro-batch of pretraining config `cfg` (rows of --batch-size x --sequence-length tokens, this
    machine's ranks' share of them) cannot fit in memory; `prefix`: the flags' stem (`pretrain.` in glm53 run)."""
    local, world = ranks_here()
    per_row = training_bytes_per_token(cfg.model) * cfg.sequence_length * local // world
    stem = f"--{prefix}"
    also = (f" (--{prefix}grad-accumulation K takes a step of K x --{prefix}batch-size rows in the memory of one"
            f"{'' if prefix else ', or a shorter --sequence-length'})")
    return too_much_memory(f"{stem}batch-size", cfg.batch_size, per_row,
                           f"the activations of rows of {cfg.sequence_length:,} tokens, at least "
                           f"{_size(per_row)} a row for this model", available=available, also=also)


def decoding_memory_problem(model, rows_per_value: int, length: int, flag: str, value: int,
                            available: int | None = None, also: str = "", least: int = 1) -> str | None:
    """Why sampling `value` x `rows_per_value` rows at once (`flag value`: the setting that multiplies them), each
    up to `length` tokens, cannot fit in memory: their decoding caches alone (a floor)."""
    per_row = decode_bytes_per_row(model, length)
    rows = value * rows_per_value
    return too_much_memory(flag, value, per_row,
                           f"the decoding cache of {rows:,} rows sampled at once, at least {_size(per_row)} a row "
                           f"of {length:,} tokens for this model", units_per_value=rows_per_value,
                           available=available, also=also, least=least)


# the most rows one engine call of an evaluation decodes (decode/task_completions.py's MAX_ROWS_PER_BATCH), here
# so that this module loads without torch
EVAL_ROWS_PER_CALL = 256


def tasks_per_call(samples: int, tasks: int | None = None) -> int:
    """Tasks an evaluation decodes in one engine call at `samples` a task (all their samples at once)."""
    per_call = max(1, EVAL_ROWS_PER_CALL // samples)
    return per_call if tasks is None else max(1, min(tasks, per_call))


def sampling_memory_problem(model, samples: int, max_new_tokens: int, flag: str = "--samples",
                            tasks: int | None = None, prompts: int | None = None, prompt_tokens: int = 1,
                            available: int | None = None) -> str | None:
    """Why `flag samples` completions a prompt cannot be decoded here: an evaluation (and `glm53 generate
    --tasks`) decodes whole tasks' samples, up to 256 rows an engine call but never fewer than one task's; a list
    of `prompts` (`GLM53.generate`, `glm53 generate --prompt`) decodes every sample of every prompt at once. Each
    row holds at least `prompt_tokens` (the longest prompt's, BOS included, where known) and `max_new_tokens`
    (`model`: a ModelConfig)."""
    rows_per_sample = prompts if prompts is not None else tasks_per_call(samples, tasks)
    length = min(model.max_sequence_length, prompt_tokens + max_new_tokens)
    return decoding_memory_problem(model, rows_per_sample, length, flag, samples, available)


def rollout_memory_problem(cfg, model, prefix: str = "", available: int | None = None) -> str | None:
    """Why RL config `cfg`'s rollouts (and dev samples) cannot be sampled here: each step samples --groups-per-step
    x --group-size rows at once (this machine's ranks' share), each of at least BOS and --max-new-tokens tokens;
    `model`: the policy's ModelConfig; `prefix`: the flags' stem (`rl.` in glm53 run)."""
    local, world = ranks_here()
    length = min(model.max_sequence_length, 1 + cfg.sampling.max_new_tokens)
    groups = max(1, min(cfg.groups, cfg.groups_per_step) * local // world)
    problem = decoding_memory_problem(
        model, groups, length, f"--{prefix}group-size", cfg.group_size, available, least=2,
        also=f" (each step samples --{prefix}groups-per-step {cfg.groups_per_step:,} x --{prefix}group-size rows at "
             f"once: fewer --{prefix}groups-per-step also fit)")
    if problem or not cfg.dev_per_family:
        return problem
    samples = cfg.dev.decoding.samples
    return decoding_memory_problem(model, tasks_per_call(samples), length, f"--{prefix}dev-samples", samples,
                                   available)
