"""Where and how a job runs: `RuntimeConfig`, the one set of runtime settings that pretraining, RL, evaluation,
`glm53 run` and `glm53 sweep` nest (their flags keep their plain names: --device, --threads, --report-to, ...),
and the one list of what a resumed run may change. Light: no torch here, so `glm53 --help` need not load it."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields

from .composition import record
from .settings import Checks, setting
from .tracking import TRACKERS, tracker_problem

DEVICE_CHOICES = ("auto", "cpu", "cuda", "mps")
PRECISIONS = ("auto", "fp32", "bf16")
KERNEL_CHOICES = ("auto", "config")
DECODE_PRECISION = "fp32"  # sampled completions (RL rollouts, evaluations): fp32 unless asked otherwise
ISOLATION_FLAG = "--accept-partial-isolation"


@dataclass
class RuntimeConfig:
    """Where and how a job runs and reports; none of it but the precision changes what the job computes."""

    device: str = setting("auto", "auto (cuda, mps, cpu), cpu, cuda or mps", choices=DEVICE_CHOICES)
    precision: str = setting("auto", "auto: bf16 autocast on hardware with native bf16 (or this machine's "
                                     "calibration), else fp32", choices=PRECISIONS)
    threads: int = setting(0, "torch threads (0: torch's default; under torchrun, cores / ranks on this machine); at "
                              "most this machine's cores unless --force-threads", at_least=0)
    force_threads: bool = setting(False, "allow --threads above this machine's cores (they then wait on each other "
                                         "and slow every other job)", record=False)
    progress: bool = setting(True, "show a progress bar (--no-progress: plain log lines)")
    resume: bool = setting(False, "continue the run in --out from its latest checkpoint")
    report_to: str = setting("none", "also log each step's figures to a tracker (offline unless you configure it)",
                             choices=TRACKERS)
    report_name: str = setting("", cli=False)  # the tracker's run name (default: the run folder), set by sweeps
    report_group: str = setting("", cli=False)  # the tracker's group of runs (a sweep or a run), set by them
    accept_partial_isolation: bool = setting(
        False, "run even when the sandbox lacks an isolation layer (level partial or none); the receipt records it",
        record=False)  # recorded in the receipt's "sandbox" as accepted_partial
    trust_unverified: bool = setting(
        False, "load a checkpoint folder that has no metadata.json (its weights and config unchecked); the receipt "
               "records the checkpoint as unverified", record=False)  # recorded beside the checkpoint's hash

    def __post_init__(self) -> None:
        check = Checks("runtime")
        check.declared(self)
        check.require(tracker_problem(self.report_to) is None, str(tracker_problem(self.report_to)))
        check.done()

    def to_dict(self) -> dict:
        return record(self)


# What a resumed run may change: where its folder is and how it runs and reports, never what it computes (every
# runtime setting but the precision and the threads: both change the arithmetic, the threads by splitting torch's
# sums another way, so the weights). Pretraining may also be extended (pretrain_config.EXTENSIONS: its steps and
# checkpoints).
RESUMABLE_CHANGES = frozenset({"out"} | {f.name for f in fields(RuntimeConfig)} - {"precision", "threads"})


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity), which is what torch threads share."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def threads_problem(threads: int, force: bool, flag: str = "--threads") -> str | None:
    """Why `threads` torch threads would slow the job and the machine (more than its cores), unless `force`d; said
    by the commands before any work (not by RuntimeConfig itself: `glm53 run` builds its stages' runtimes before
    its own --force-threads applies to them)."""
    cores = available_cores()
    if threads <= cores or force:
        return None
    return (f"{flag} {threads} is more than this machine's {cores} cores (threads beyond the cores wait on each "
            f"other and slow every other job); give at most {cores} (0: automatic), or add --force-threads")


def add_device_flag(p) -> None:
    """The --device flag of the commands that take no other runtime setting (an argparse parser)."""
    device = next(f for f in fields(RuntimeConfig) if f.name == "device")
    p.add_argument("--device", default=device.default, choices=DEVICE_CHOICES,
                   help=f"{device.metadata['help']} (default: {device.default})")


def under_torchrun() -> bool:
    """Whether this process is one rank of several (torchrun sets WORLD_SIZE); runtime/distributed.py joins them."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1
