"""Data parallelism for `glm53 pretrain` and `glm53 rl` under torchrun.

    torchrun --nproc-per-node 2 -m glm53 pretrain --out runs/p        (or: torchrun ... $(which glm53) pretrain ...)

torchrun starts one process per rank and sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and the rendezvous
address; `from_environment` joins the process group: gloo when the ranks compute on the CPU, NCCL on CUDA (one
GPU per local rank). Outside torchrun (no WORLD_SIZE, or 1) everything runs as a single process, `SINGLE`.

What each rank does:
- every rank computes the same arithmetic on its share of the rows (a contiguous block, so the global batch, its
  documents and their order are those of the single-process run) and the gradients are summed across ranks;
- rank 0 alone writes: the run folder, logs, checkpoints (atomically, as always), receipts, and it alone
  evaluates; the others wait for it at their next collective;
- a check that only rank 0 can make (the run folder) is shared with `on_main`, so every rank stops with the same
  error instead of waiting for a rank that has gone.

Threads: torchrun sets OMP_NUM_THREADS=1 in every rank when it starts more than one per machine and the variable
is unset; a rank here uses cores / local ranks threads instead, unless `--threads` says otherwise.

Simplifications: no ZeRO or tensor parallelism (each rank holds the whole model and optimizer state, 26M
parameters), no gradient accumulation, no elastic restarts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from .config import available_cores, under_torchrun  # noqa: F401 - available_cores: imported from here too
from .device import resolve_device

TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
# seeds a rank's rollout sampling apart from the others'; rank 0 keeps the single-process seed
RANK_SEED_OFFSET = 7_919


class StoppedByAnotherRank(RuntimeError):
    """Raised on every other rank when rank 0 refused to start (it prints the reason once)."""


@dataclass(frozen=True)
class DataParallel:
    rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    backend: str | None = None  # None: a single process, no process group

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1

    def share(self, n: int) -> slice:
        """This rank's contiguous block of n items (sizes differ by at most one, the first ranks take more)."""
        base, extra = divmod(n, self.world_size)
        start = self.rank * base + min(self.rank, extra)
        return slice(start, start + base + (self.rank < extra))

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """The element-wise sum over ranks (a new tensor; the argument is left as it was)."""
        if not self.active:
            return tensor
        import torch.distributed as dist

        total = tensor.detach().clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        return total

    def gather(self, items: list) -> list:
        """Every rank's list, concatenated in rank order, on every rank (pickled objects: rollouts, verdicts)."""
        if not self.active:
            return list(items)
        import torch.distributed as dist

        held: list = [None] * self.world_size
        dist.all_gather_object(held, list(items))
        return [item for part in held for item in part]

    def sum_gradients(self, parameters) -> None:
        """Sum the gradients of `parameters` over ranks in one all-reduce (a missing gradient counts as zero), as
        DDP does for a module, for updates where a rank may hold no rows at all (an RL step's rows)."""
        if not self.active:
            return
        params = [p for p in parameters]
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
        flat = self.sum(flat)
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = flat[offset:offset + n].view_as(p).clone()
            offset += n

    def on_main(self, check) -> None:
        """Run `check()` on rank 0 and tell every rank how it went: rank 0 re-raises its own error, the others raise
        StoppedByAnotherRank; nobody is left waiting at a collective."""
        if not self.active:
            check()
            return
        import torch.distributed as dist

        error = None
        if self.is_main:
            try:
                check()
            except Exception as err:  # noqa: BLE001 - told to every rank, then raised again here
                error = err
        message = [None if error is None else f"{type(error).__name__}: {error}"]
        dist.broadcast_object_list(message, src=0)
        if error is not None:
            raise error
        if message[0] is not None:
            raise StoppedByAnotherRank(message[0])

    def barrier(self) -> None:
        if self.active:
            import torch.distributed as dist

            dist.barrier()

    def to_dict(self) -> dict:
        return {"world_size": self.world_size, "backend": self.backend, "threads_per_rank": torch.get_num_threads()}


SINGLE = DataParallel()


def rank_threads(local_world_size: int, threads: int = 0) -> int:
    """Torch threads of one rank: `threads` when given, else this machine's cores shared out among its ranks."""
    return threads if threads > 0 else max(1, available_cores() // max(local_world_size, 1))


def from_environment(device: str = "auto", threads: int = 0) -> tuple[DataParallel, torch.device]:
    """Join torchrun's process group when this process is one of several ranks; returns (DataParallel, the device
    this rank computes on). A single process gets (SINGLE, the resolved device) and its threads unchanged unless
    `threads` is given."""
    if threads < 0:
        raise ValueError(f"--threads must be >= 0 (0: automatic), got {threads}")
    resolved = resolve_device(device)
    if not under_torchrun():
        if threads:
            torch.set_num_threads(threads)
        return SINGLE, resolved
    missing = [v for v in TORCHRUN_VARIABLES if v not in os.environ]
    if missing:
        raise ValueError(f"WORLD_SIZE is {os.environ['WORLD_SIZE']} but {', '.join(missing)} are not set: start the "
                         "ranks with torchrun --nproc-per-node N -m glm53 ..., which sets them all")
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    if resolved.type == "cuda":
        if torch.cuda.device_count() < local_world:
            raise ValueError(f"{local_world} ranks on this machine but {torch.cuda.device_count()} CUDA devices; "
                             "use --nproc-per-node <= the GPU count, or --device cpu")
        resolved = torch.device("cuda", local_rank)
        torch.cuda.set_device(resolved)
        backend = "nccl"
    elif resolved.type == "cpu":
        backend = "gloo"
    else:
        raise ValueError(f"data parallelism runs on cpu (gloo) or cuda (NCCL), not {resolved.type}; use --device cpu")
    torch.set_num_threads(rank_threads(local_world, threads))
    if not dist.is_initialized():
        dist.init_process_group(backend)
    return DataParallel(rank, world, local_world, backend), resolved


def shut_down(dp: DataParallel, finished: bool = True) -> None:
    """Leave the process group. After a finished run every rank first meets at a barrier, so that none tears down
    its connections while a peer still drains the last collective (gloo can abort the process then); after an
    error the ranks may be anywhere, so the group is left without waiting."""
    if dp.active:
        import gc

        import torch.distributed as dist

        if dist.is_initialized():
            if finished:
                dist.barrier()
            gc.collect()  # drop DDP reducers still holding the group before it goes
            dist.destroy_process_group()
