"""`glm53 sweep SPEC --executor ray`: every job a Ray task, on a local Ray instance or a cluster.

    pip install -e ".[ray]"                       # on every machine, in the same environment
    ray start --head                              # on the first machine; the others: ray start --address HEAD:6379
    glm53 sweep pretraining-data --out /shared/sweeps/data --executor ray --address auto

A task runs `run_job`, the same function as the local pool's job processes, so a job writes the same receipt
(atomically, into its folder) whichever executor ran it, and the runner's skip-if-finished resume, failure
records and analysis are the same. Each task asks Ray for `threads` CPUs (and `gpus_per_job` GPUs), so Ray runs
as many at once as the cluster holds.

The sweep folder must be one every node sees at the same path (a shared filesystem such as NFS): the driver
makes the job folders, the tasks write into them, the driver reads the receipts back. A job that finishes on a
node where the folder is not shared is reported as failed, with that reason.

Simplifications: no retries (Ray's max_retries=0: rerunning the sweep command redoes failed jobs, as locally), no
object-store transfer of checkpoints.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Callable, Sequence

from .executor import RECEIPT, Job, exit_detail, run_job

INSTALL_HINT = 'pip install -e ".[ray]" (or pip install "ray>=2.9")'


def reachable(address: str, timeout: float = 5.0) -> None:
    """Refuse, within `timeout` seconds, a HOST:PORT nobody listens on (Ray itself would retry for minutes)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--address {address!r} is not HOST:PORT (for example 10.0.0.5:6379) or auto")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as err:
        raise ValueError(f"--address {address}: no Ray cluster answers there ({err.strerror or err}); start one with "
                         "`ray start --head` on that machine, or fix the address") from None


def _ray_job(job: Job, threads: int) -> tuple[int, str]:
    """A Ray task: run the job in this worker process; returns (exit status, the node's host name)."""
    return run_job(job, threads), socket.gethostname()


class RayExecutor:
    def __init__(self, threads: int = 1, gpus_per_job: float = 0.0, address: str | None = None,
                 num_cpus: int | None = None):
        """Connect to the Ray cluster at `address` ("auto": the one started on this machine with `ray start`), or
        start a local Ray instance with `num_cpus` CPUs when no address is given. Raises ValueError, before the
        sweep writes anything, when Ray is not installed or the cluster cannot be reached."""
        if threads < 1 or gpus_per_job < 0:
            raise ValueError(f"--threads-per-worker must be >= 1 and --gpus-per-job >= 0, got {threads} and "
                             f"{gpus_per_job}")
        try:
            import ray
        except ImportError:
            raise ValueError(f"--executor ray needs Ray, which is not installed: {INSTALL_HINT}") from None
        self.ray, self.threads, self.gpus_per_job = ray, threads, gpus_per_job
        self.started_here = not ray.is_initialized()
        if self.started_here:
            if address and address != "auto":
                reachable(address)
            try:
                if address:
                    ray.init(address=address, log_to_driver=False, include_dashboard=False)
                else:
                    ray.init(num_cpus=num_cpus, log_to_driver=False, include_dashboard=False)
            except Exception as err:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError or its own types
                what = f"reach the Ray cluster at {address}" if address else "start a local Ray instance"
                raise ValueError(f"--executor ray could not {what}"
                                 f" ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); start "
                                 "it with `ray start --head` and pass --address auto (or HEAD_IP:6379)") from None
        cpus = int(ray.cluster_resources().get("CPU", 0))
        if cpus < threads:
            raise ValueError(f"the Ray cluster has {cpus} CPUs, fewer than --threads-per-worker {threads}")
        self.workers = max(1, cpus // threads)  # how many jobs the cluster runs at once (for the log line)

    def close(self) -> None:
        """Disconnect (and stop the local Ray instance this executor started)."""
        if self.started_here and self.ray.is_initialized():
            self.ray.shutdown()

    def run(self, jobs: Sequence[Job], on_event: Callable[[str, Job, str], None]) -> None:
        ray = self.ray
        task = ray.remote(num_cpus=self.threads, num_gpus=self.gpus_per_job, max_retries=0)(_ray_job)
        pending = {}
        try:
            for job in jobs:
                pending[task.remote(job, self.threads)] = job
                on_event("started", job, "")  # submitted: Ray starts it when a node has room
            while pending:
                (ref,), _ = ray.wait(list(pending), num_returns=1)
                job = pending.pop(ref)
                try:
                    status, node = ray.get(ref)
                except Exception as err:  # noqa: BLE001 - a task that died (worker killed, node lost)
                    on_event("failed", job, f"the Ray task failed: {type(err).__name__}: {str(err).splitlines()[0]}")
                    continue
                if status == 0 and (Path(job.dir) / RECEIPT).is_file():
                    on_event("done", job, "")
                elif status == 0:
                    on_event("failed", job, f"the job finished on node {node}, but its receipt is not in {job.dir} "
                                            "here: --out must be a folder every node of the cluster shares")
                else:
                    on_event("failed", job, exit_detail(job, status))
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)
