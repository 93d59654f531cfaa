"""The `glm53 sweep` and `glm53 analyze` commands (thin: parse, then call runner and analysis)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..runtime.config import RuntimeConfig, available_cores
from ..runtime.settings import add_config_arguments, config_from_args
from ..verify.sandbox_policy import require_isolation
from ..verify.verifier import SandboxPool
from .jobs import job_kind
from .ray_executor import RayExecutor
from .spec import load_spec, parse_seeds, shipped_specs


EXECUTORS = ("local", "ray")


# a spec's settings and the folder decide these (threads: --threads-per-worker; --force-threads stays: it lets
# --workers x --threads-per-worker pass the cores)
SWEEP_RUNTIME_SKIP = ("device", "precision", "threads", "resume")


def add_sweep_parser(sub) -> None:
    p = sub.add_parser("sweep", help="run a study: every arm x seed of a spec as its own job, in parallel, resumable",
                       description="Run every (arm, seed) of SPEC as an independent job; rerun the same command to "
                                   "continue an interrupted sweep (finished jobs are kept). Ends with `glm53 analyze`. "
                                   "`glm53 sweep --plan SPEC` first: the jobs, an estimated wall time and, from a "
                                   "pilot sweep, the seeds needed; it runs and writes nothing.")
    p.add_argument("spec", help=f"a spec file (TOML) or a shipped spec: {', '.join(shipped_specs())}")
    p.add_argument("--out", help="sweep folder (created; rerun with the same spec to continue); required unless --plan")
    plan = p.add_argument_group("plan (print, run nothing, write nothing)")
    plan.add_argument("--plan", action="store_true", help="print the jobs, an estimated wall time on this machine and "
                                                         "the power of the design, then stop; writes nothing")
    plan.add_argument("--time", action="store_true", help="with --plan: time a few updates of the baseline arm's job "
                                                         "(expression-pretrain, pretrain, pretrain-eval) in a "
                                                         "temporary folder for the wall-time estimate")
    plan.add_argument("--pilot", metavar="DIR", help="with --plan: a finished or partly finished sweep of the same "
                                                     "metric; its spread gives the smallest detectable effect, and "
                                                     "its job times a wall-time estimate")
    plan.add_argument("--effect", type=float, help="with --plan and --pilot: the effect to detect, in the metric's "
                                                   "units (0.03: 3 points of a rate); prints the seeds needed")
    plan.add_argument("--metric", help="with --plan and --pilot: the metric (default: the spec's first)")
    p.add_argument("--seeds", help="comma-separated seeds (or start:stop:step) replacing the spec's")
    p.add_argument("--reward", help="the reward modules the spec's jobs may import (mod:fn[,mod:fn...]): a spec's "
                                    "reward = \"mod:fn\" is code, run only when the command line names it too")
    p.add_argument("--workers", type=int, help="jobs at a time (default: cores / --threads-per-worker)")
    p.add_argument("--threads-per-worker", type=int, default=1,
                   help="torch threads of each job (default: 1); --workers x --threads-per-worker at most this "
                        "machine's cores unless --force-threads")
    # named, so that argparse does not take `--threads 8` for --threads-per-worker 8 (a prefix of it) silently
    p.add_argument("--threads", dest="sweep_threads", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--setup-from", metavar="DIR", help="another sweep folder whose finished [setup] job is this "
                                                        "spec's: start from its result instead of rerunning it")
    p.add_argument("--reuse-from", metavar="DIR", action="append", default=[],
                   help="another sweep folder (repeatable): its finished jobs that are exactly jobs of this sweep "
                        "(same job kind, settings, seed and checkpoints, whatever the arm is called) are copied in "
                        "(hard links where possible), not rerun")
    p.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="local: a process pool on this machine (default); ray: each job a Ray task (pip install -e "
                        "\".[ray]\"), on a local Ray instance or the cluster at --address")
    p.add_argument("--address", help="with --executor ray: the Ray cluster to join (auto: the one `ray start` began "
                                     "on this machine; or HEAD_IP:6379); without it a local Ray instance is started")
    p.add_argument("--gpus-per-job", type=float, default=0.0, help="with --executor ray: GPUs Ray gives each job "
                                                                    "(default: 0)")
    p.add_argument("--no-analyze", dest="analyze", action="store_false", help="skip the analysis at the end")
    add_config_arguments(p, RuntimeConfig, block="runtime", skip=SWEEP_RUNTIME_SKIP, helps={
        "report_to": "also log every training run's figures to a tracker, one run per (arm, seed), grouped by the "
                     "spec's name",
        "progress": "show a progress bar of the jobs (--no-progress: a log line per job)",
        "force_threads": "allow --workers x --threads-per-worker above this machine's cores (the jobs then wait "
                         "on each other and slow every other job)"})
    p.set_defaults(func=cmd_sweep)


def make_executor(args):
    """None for the local pool (run_sweep makes it); the Ray executor, connected, for --executor ray."""
    if args.executor == "local":
        given = [flag for flag, value in (("--address", args.address), ("--gpus-per-job", args.gpus_per_job))
                 if value]
        if given:
            raise ValueError(f"{' and '.join(given)} belong to --executor ray; add it, or leave them out")
        return None
    if args.workers is not None:
        raise ValueError("--workers is for the local executor; with --executor ray the cluster runs as many jobs at "
                         "once as its CPUs allow (each takes --threads-per-worker)")
    return RayExecutor(args.threads_per_worker, args.gpus_per_job, args.address)


def check_isolation(spec, runtime) -> None:
    """The isolation policy, before anything is written, for a sweep whose jobs score with the sandbox."""
    kinds = [spec.job] + ([spec.setup["job"]] if spec.setup else [])
    if any(job_kind(kind).verifies for kind in kinds):
        with SandboxPool(workers=1) as pool:  # the jobs' own processes start theirs
            require_isolation(runtime.accept_partial_isolation, "sweep", pool)


def workers_problem(workers: int | None, threads: int, force: bool | None,
                    available: int | None = None) -> str | None:
    """Why the local pool's jobs would not fit this machine, said before any job starts: more torch threads than
    its cores (--workers x --threads-per-worker; they would wait on each other, every job slower and the sweep no
    sooner done) unless --force-threads, or more job processes than its available memory holds (each at least
    torch's own, JOB_PROCESS_BYTES). `workers` None: the default, cores / --threads-per-worker."""
    from ..runtime.memory import JOB_PROCESS_BYTES, too_much_memory

    cores = available_cores()
    if not force and threads > cores:
        return (f"--threads-per-worker {threads} is more than this machine's {cores} cores (threads beyond the "
                f"cores wait on each other and slow every job); give at most {cores}, or add --force-threads")
    if not force and workers is not None and workers * threads > cores:
        return (f"--workers {workers} x --threads-per-worker {threads} is {workers * threads} torch threads, more "
                f"than this machine's {cores} cores (jobs beyond the cores wait on each other: each runs slower and "
                f"the sweep ends no sooner); give --workers {max(1, cores // threads)} or fewer (the default: cores / "
                "--threads-per-worker), or add --force-threads")
    if workers is None:
        return None
    return too_much_memory("--workers", workers, JOB_PROCESS_BYTES, "a process of its own a job, each holding at "
                           "least torch's 256 MiB before its model", available=available)


PLAN_ONLY = (("--time", "time"), ("--pilot", "pilot"), ("--effect", "effect"), ("--metric", "metric"))


def refuse_unnamed_rewards(spec, where: str, given: str | None) -> None:
    """Every reward module a spec's settings name (base, arms, setup) must be named by --reward as well: a spec is a
    file like a --config file, and its `mod:fn` would import whatever mod.py the jobs' import path holds."""
    from ..train.rl_config import check_rewards_named

    settings = [spec.base, *spec.arms.values(), (spec.setup or {}).get("settings", {})]
    for reward in dict.fromkeys(s["reward"] for s in settings if isinstance(s.get("reward"), str)):
        check_rewards_named(reward, given, "--reward", None, source=f"the spec {where}")


def cmd_sweep(args) -> int:
    from .analysis import analyze
    from .runner import default_workers, run_sweep

    spec = load_spec(args.spec, parse_seeds(args.seeds) if args.seeds else None)
    refuse_unnamed_rewards(spec, args.spec, args.reward)
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    if args.threads_per_worker < 1:
        raise ValueError(f"--threads-per-worker must be >= 1, got {args.threads_per_worker}")
    if args.sweep_threads is not None:
        raise ValueError(f"--threads {args.sweep_threads}: a sweep runs --workers jobs at once, each with "
                         "--threads-per-worker torch threads; give those two instead (their product at most this "
                         f"machine's {available_cores()} cores)")
    if args.executor == "local":  # a Ray cluster's machines have their own cores (Ray schedules by them)
        problem = workers_problem(args.workers, args.threads_per_worker, args.force_threads)
        if problem:
            raise ValueError(problem)
    if args.plan:
        from .plan import plan_text
        from .timing import RL_KINDS

        if args.setup_from is not None and not (args.time and spec.job in RL_KINDS):
            raise ValueError(f"--setup-from with --plan only serves --time on an {' or '.join(RL_KINDS)} spec (it "
                             f"times the jobs from that sweep's finished setup); {spec.name} is {spec.job}"
                             + ("" if args.time else " and --time is not given") + ": drop --setup-from")
        if args.time:  # the short timing runs generated programs: the same isolation policy as the sweep
            check_isolation(spec, config_from_args(RuntimeConfig, args))
        print(plan_text(spec, args.workers or default_workers(args.threads_per_worker), args.threads_per_worker,
                        args.pilot, args.effect, args.metric, args.time, args.setup_from))
        return 0
    given = [flag for flag, name in PLAN_ONLY if getattr(args, name) is not None and getattr(args, name) is not False]
    if given:
        raise ValueError(f"{', '.join(given)} belong to --plan; add it (glm53 sweep --plan {args.spec} ...)")
    if args.out is None:
        raise ValueError("--out is required: the sweep folder to write (or --plan to print the plan and write nothing)")
    runtime = config_from_args(RuntimeConfig, args)
    check_isolation(spec, runtime)
    executor = make_executor(args)
    try:
        summary = run_sweep(spec, args.out, args.workers, args.threads_per_worker, progress=runtime.progress,
                            setup_from=args.setup_from, executor=executor, report_to=runtime.report_to,
                            reuse_from=args.reuse_from, accept_partial_isolation=runtime.accept_partial_isolation)
    finally:
        if executor is not None:
            executor.close()
    print(f"sweep {spec.name}: {summary['done']} jobs run, {summary['skipped']} already finished, "
          f"{len(summary['failed'])} failed, {summary['seconds']:.1f} s")
    for f in summary["failed"]:
        print(f"  failed {f['job']}: {f['error']}")
    if args.analyze:
        result = analyze(args.out)
        print(format_headline(result))
        print(f"wrote {Path(args.out) / 'REPORT.md'} and analysis.json")
    if summary["failed"]:
        print(f"{len(summary['failed'])} jobs failed; fix the cause and rerun the same command to redo them")
        return 1
    return 0


def add_analyze_parser(sub) -> None:
    p = sub.add_parser("analyze", help="paired tests of a sweep's arms: exact sign-flip p, bootstrap interval, Holm")
    p.add_argument("dir", help="a sweep folder (glm53 sweep --out)")
    p.add_argument("--no-charts", dest="charts", action="store_false", help="skip the charts")
    p.set_defaults(func=cmd_analyze)


def cmd_analyze(args) -> int:
    from .analysis import analyze

    result = analyze(args.dir, charts=args.charts)
    print(format_headline(result))
    print(f"wrote {Path(args.dir) / 'analysis.json'} and REPORT.md")
    return 0


def format_headline(result: dict) -> str:
    from .analysis import _fmt
    from .wording import detectable_text

    head, last = result["metrics"][0], result["checkpoints"][-1]
    lines = [f"{head} at {last}:"]
    for arm, by_label in result["arms"].items():
        s = by_label[last][head]
        lines.append(f"  {arm:22s} {_fmt(head, s['mean'])}  (n = {s['n']})")
    for c in result["comparisons"]:
        if c["metric"] == head and c["checkpoint"] == last and c["n"]:
            lo, hi = c["bootstrap95"]
            lines.append(f"  {c['arm']} - {c['against']}: {_fmt(head, c['mean_difference'], True)} "
                         f"[{_fmt(head, lo, True)}, {_fmt(head, hi, True)}], wins {c['wins']}/{c['n']}, "
                         f"p = {c['p']:.4g}, Holm p = {c['holm_p']:.4g}; {detectable_text(head, c)}")
    for r in result.get("lifts", []):
        if r["n"] and r["checkpoint"] == last:
            lines.append(f"  {r['arm']} {r['metric']}: {_fmt(r['metric'], r['mean'], True)}, up {r['up']} / down "
                         f"{r['down']} of {r['n']}, p = {r['p']:.4g}, Holm p = {r['holm_p']:.4g}; "
                         f"{detectable_text(r['metric'], r)}")
    if result["missing_jobs"]:
        lines.append(f"  ({len(result['missing_jobs'])} jobs without a receipt)")
    return "\n".join(lines)
