"""RLOO post-training with an executable reward.

For each task of a step: sample a group of G completions with the cached engine, judge each with the sandboxed
verifier, reward it (the weighted sum of reward functions, verify/rewards.py; binary by default), and give it the
leave-one-out advantage A_i = r_i - mean of the other G - 1 rewards. The loss is -mean_i(A_i * log p(completion_i)),
with log p the mean (sequence-mean) or sum (token-sum) of the completion tokens' log-probabilities, plus optional
terms: a KL penalty to the initial policy (k3 estimator on the sampled tokens) and replay cross-entropy on
pretraining examples, computed on the solution tokens only. Groups whose rewards are all equal carry no signal: they
are counted, logged and left out.

Reference settings (the defaults): 96 groups of 16 over increment, double and even (32 rl-split tasks each),
temperature 0.35, 48 new tokens, lr 5e-5, last-block-head, binary reward with -0.1 for invalid programs,
checkpoints at 24, 48, 72 and 96 groups, seed 31415. Unlike the reference (one group per update), one update
sees up to 16 groups at once (`groups_per_step`), which also samples faster. The update's forward runs each
group's prompt once and only the completions per row (`update_impl = "fast"`, completion_batch.py), equal up to
rounding to running every row in full (`"plain"`).

Data parallel (under torchrun, distributed.py): each rank samples and verifies a contiguous share of the step's
groups (its generator seeded apart from the others', so rollouts depend on the world size), the groups are
gathered on every rank in schedule order, and every rank scores the whole step alike. The update's rows are
shared out again and each rank's loss is its share of the step's loss (the aggregations divide by the step's
totals); gradients are summed with one all-reduce per pass, as DDP would, but without DDP's module wrapper,
because a rank may hold none of a step's rows (groups without signal are left out). Rank 0 alone writes.

This module is the loop (set up or resume, then per step: sample, verify, score, update, log, checkpoint); the
settings are rl_config.py's `RLConfig` and the update is rl_update.py's `update_policy`.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from tqdm.auto import tqdm

from ..data.suites import get_suite
from ..data.tasks import Task
from ..data.bpe_tokenizer import Tokenizer, tokenizer_for
from ..decode.sampling import Sampling
from ..evaluate.evaluate import evaluate, sample_and_verify
from ..verify.rewards import WeightedReward, ordering_problem, reward_terms, spec_of
from ..verify.sandbox_policy import sandbox_record
from ..model.model import GLM53
from ..runtime.config import RESUMABLE_CHANGES
from ..runtime.cpu import cpu_description
from ..runtime.device import peak_memory_bytes, resolve_device, resolve_precision
from ..runtime.distributed import RANK_SEED_OFFSET, SINGLE, DataParallel
from ..runtime.files import atomic_write_json, json_text, read_jsonl, remove_stale_temporaries, run_lock, truncate_jsonl
from ..runtime.tracking import reporting
from ..checkpoints.format import check_loadable, load_model, read_metadata, save_checkpoint
from ..checkpoints.names import RECEIPT_NAME, checkpoint_name
from .run_folder import check_run_folder, restore_latest, rng_state, start_run_folder
from .policy_gradient import group_advantages
from ..checkpoints.retention import RETENTION_CHANGES, apply_retention
from .rl_config import RLConfig
from .rl_scoring import informative, score_groups
from .rl_update import set_train_scope, update_policy

REFILL_SEED_OFFSET = 1_000_003  # seeds the fresh-task stream and its sampling apart from the schedule's
LOG_NAME, ROLLOUTS_NAME, SCHEDULE_NAME = "rl_log.jsonl", "rollouts.jsonl", "schedule.json"


def leave_one_out_advantages(rewards: list[float]) -> list[float]:
    """A_i = r_i - (sum_j r_j - r_i) / (G - 1)."""
    return group_advantages(rewards, "leave-one-out")


def task_schedule(tasks: list[Task], groups: int, seed: int) -> list[Task]:
    """Epochs of the task list, each shuffled with Random(seed + epoch * 1009), cut to `groups` (as the reference)."""
    schedule, epoch = [], 0
    while len(schedule) < groups:
        order = list(tasks)
        random.Random(seed + epoch * 1009).shuffle(order)
        schedule.extend(order)
        epoch += 1
    return schedule[:groups]


def step_boundaries(groups: int, per_step: int, checkpoints: tuple[int, ...]) -> list[tuple[int, int]]:
    """[(first, end), ...] group ranges of the updates: at most `per_step` groups, never across a checkpoint."""
    bounds, start = [], 0
    stops = sorted(set(checkpoints) | {groups})
    for stop in stops:
        while start < stop:
            end = min(start + per_step, stop)
            bounds.append((start, end))
            start = end
    return bounds


def rl_train(cfg: RLConfig, tasks: list[Task] | None = None, dev_tasks: list[Task] | None = None, log=print,
             dp: DataParallel = SINGLE, device: torch.device | None = None,
             keep: Callable[[list[dict]], set[str]] | None = None, reward_funcs: list | None = None) -> dict | None:
    """Run (or resume) RL; returns the receipt dict that is also written to the run folder (by rank 0 under data
    parallelism; the other ranks return None). One process at a time may write a run folder; what an
    interrupted atomic write left behind is removed first. `keep`: the checkpoints (folder names, from the
    checkpoint records so far) whose weights --keep-last must spare (the main job's choice on dev).
    `reward_funcs`: the reward's terms instead of cfg.reward (verify/rewards.py: functions f(task, completion, verdict)
    -> float, (function, weight) pairs, or names as --reward takes); the run's settings record their names."""
    if not cfg.out or not cfg.init:
        raise ValueError("rl: init (the start checkpoint, --init) and out (the run folder, --out) must be set")
    if reward_funcs is not None and cfg.objective == "rejection-sampling":
        raise ValueError("rl: --objective rejection-sampling keeps the programs that pass and uses no reward, so "
                         "reward_funcs would have no effect: leave them out, or use --objective policy-gradient")
    if reward_funcs is not None and cfg.reward != "binary":
        raise ValueError(f"rl: give the reward either as --reward ({cfg.reward}) or as reward_funcs, not both")
    terms = reward_terms(cfg, reward_funcs)  # imported and checked before anything is written
    if reward_funcs is not None:
        cfg = copy.copy(cfg)
        cfg.reward = spec_of(terms)
    problem = ordering_problem(terms, probe_task(cfg, tasks))
    if problem and not cfg.allow_unordered_reward:
        raise ValueError(problem)
    if problem:
        log(f"glm53 rl: --allow-unordered-reward: training on a reward that breaks the ordering rule: "
            f"{problem.partition(' rule: ')[2].partition('; ')[0]}")
    check_loadable(Path(cfg.init), cfg.runtime.trust_unverified)  # before the run folder is made
    tasks, dev_tasks = cfg.checked_tasks(tasks, dev_tasks)  # before run_lock makes the folder
    if not dp.is_main:
        return _rl_train(cfg, tasks, dev_tasks, log, dp, device, keep, terms)
    with run_lock(cfg.out):
        remove_stale_temporaries(cfg.out)
        return _rl_train(cfg, tasks, dev_tasks, log, dp, device, keep, terms)


def probe_task(cfg: RLConfig, tasks: list[Task] | None) -> Task | None:
    """The task the reward's ordering is probed on: the run's first (of the task file, the rl split or the stream)."""
    tasks = tasks or cfg.training_tasks(1)
    return tasks[0] if tasks else None


def sample_groups(dp: DataParallel, model, tasks: list[Task], group_size: int, sampling: Sampling, seed: int,
                  sample_precision: str, device, suite: str = "reference") -> list:
    """A judged group of samples per task: this rank samples and verifies its share of the tasks (rank 0 with
    `seed` itself, as a single process does for all of them), and every rank gets all groups in task order."""
    mine = tasks[dp.share(len(tasks))]
    generator = torch.Generator(device=device).manual_seed(seed + RANK_SEED_OFFSET * dp.rank)
    judged = sample_and_verify(model, mine, group_size, sampling, generator, sample_precision,
                               suite=suite) if mine else []
    return dp.gather(judged)


@dataclass
class _Run:
    """What one invocation of `glm53 rl` holds: the policy, its optimizer and reference, the tasks and their
    schedule, and the progress so far (restored by --resume)."""
    cfg: RLConfig
    out: Path
    log: Callable[[str], None]
    dp: DataParallel
    device: torch.device
    precision: str
    sample_precision: str
    model: GLM53
    init_sha: str
    reference: GLM53 | None
    trainable: list
    optimizer: torch.optim.Optimizer
    tasks: list[Task]
    dev_tasks: list[Task]
    schedule: list[Task]
    schedule_sha: str
    tokenizer: Tokenizer
    sampling: Sampling
    refill_stream: list[Task] = field(default_factory=list)
    checkpoints: list[dict] = field(default_factory=list)
    done_groups: int = 0
    resumed_from: str | None = None
    refill_used: int = 0
    keep: Callable[[list[dict]], set[str]] | None = None  # checkpoints whose weights --keep-last spares
    rewards: list[WeightedReward] = field(default_factory=list)  # the reward's terms (verify/rewards.py)


def _rl_train(cfg: RLConfig, tasks: list[Task] | None, dev_tasks: list[Task] | None, log, dp: DataParallel,
              device: torch.device | None, keep=None, terms: list[WeightedReward] | None = None) -> dict | None:
    run = _start(cfg, tasks, dev_tasks, log, dp, device, terms or reward_terms(cfg))
    run.keep = keep
    if cfg.runtime.resume:
        _resume(run)
    if not cfg.runtime.resume and dp.is_main:
        _save_checkpoint(run, 0)
    if dp.is_main and not (run.out / SCHEDULE_NAME).is_file():  # once checkpoint 0 exists: a start cut short
        atomic_write_json(run.out / SCHEDULE_NAME, [t.task_id for t in run.schedule])  # before it is simply retried
    started = time.perf_counter()
    bounds = step_boundaries(cfg.groups, cfg.groups_per_step, cfg.checkpoints)
    rt = cfg.runtime
    with reporting(rt.report_to if dp.is_main else "none", run.out, rt.report_name, rt.report_group,
                   cfg.to_dict()) as tracker, \
            tqdm(total=cfg.groups, initial=run.done_groups, disable=not (rt.progress and dp.is_main), desc="rl",
                 unit="group", dynamic_ncols=True) as bar:
        for step, (first, end) in enumerate(bounds):
            if end <= run.done_groups:
                continue
            row, rollouts, groups = _step(run, step, first, end)
            bar.update(end - first)
            if not dp.is_main:
                continue  # rank 0 alone logs, evaluates and saves; the others meet it at the next step's collectives
            if tracker is not None:
                tracker.log(row, step + 1)
            with open(run.out / LOG_NAME, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
            with open(run.out / ROLLOUTS_NAME, "a", encoding="utf-8") as f:
                f.write("".join(json_text(r) + "\n" for r in rollouts))
            exact, zero_variance = row["exact_rollouts"], row["zero_variance_groups"]
            bar.set_postfix(reward=f"{row['reward_mean']:.3f}", exact=f"{exact}/{len(rollouts)}", skipped=zero_variance)
            if not rt.progress:
                log(f"step {step + 1:3d} groups {end:4d} reward {row['reward_mean']:+.3f} "
                    f"exact {exact}/{len(rollouts)} "
                    f"zero-var {zero_variance}/{groups} loss {row.get('loss', 0.0):+.4f} {row['seconds']:.1f}s")
            if end in cfg.checkpoints:
                _save_checkpoint(run, end)
    elapsed = time.perf_counter() - started
    if not dp.is_main:
        return None
    return _finish(run, elapsed)


def _start(cfg: RLConfig, tasks: list[Task] | None, dev_tasks: list[Task] | None, log, dp: DataParallel,
           device: torch.device | None, terms: list[WeightedReward]) -> _Run:
    """Check the run folder, load the policy, build its optimizer, schedule the tasks, check the reward's
    ordering on the probe set (verify/rewards.py) and start the folder."""
    out = Path(cfg.out)
    dp.on_main(lambda: check_run_folder(out, cfg.to_dict(), cfg.runtime.resume, RESUMABLE_CHANGES | RETENTION_CHANGES))
    device = device or resolve_device(cfg.runtime.device)
    if cfg.runtime.threads and not dp.active:  # under torchrun, from_environment has set them
        torch.set_num_threads(cfg.runtime.threads)
    precision = resolve_precision(cfg.runtime.precision, device)
    loaded = load_model(cfg.init, device, trust_unverified=cfg.runtime.trust_unverified)  # checks their recorded hash
    model = loaded.model
    tasks, dev_tasks = cfg.checked_tasks(tasks, dev_tasks)  # rl_train checked them already; a direct caller too
    init_sha = loaded.weights_sha256
    reference = copy.deepcopy(model).eval().requires_grad_(False) if cfg.kl_coef > 0 else None
    torch.manual_seed(cfg.seed)
    trainable = set_train_scope(model, cfg.train_scope)
    opt = cfg.optimization  # AdamW's own betas (0.9, 0.999), no decay
    optimizer = torch.optim.AdamW(trainable, lr=opt.lr, betas=opt.betas, weight_decay=opt.weight_decay)
    schedule = task_schedule(tasks, cfg.groups, cfg.seed)
    schedule_ids = [t.task_id for t in schedule]
    schedule_sha = hashlib.sha256(json.dumps(schedule_ids).encode()).hexdigest()
    if not cfg.runtime.resume and dp.is_main:
        start_run_folder(out, cfg.to_dict())
    tokenizer = tokenizer_for(model.config)
    sampling = cfg.sampling
    sample_precision = resolve_precision(cfg.sample_precision, device, purpose="decode")
    log(f"glm53 rl: {sum(p.numel() for p in trainable):,} trainable parameters ({cfg.train_scope}), "
        f"{cfg.groups} groups of {cfg.group_size} over "
        f"{len(tasks)} tasks, device {device} ({precision})"
        + (f", {dp.world_size} ranks ({dp.backend}), {torch.get_num_threads()} threads each" if dp.active else ""))
    # dynamic sampling draws fresh tasks from a stream of its own, so the schedule stays as it is
    refill_stream = task_schedule(tasks, cfg.groups * (cfg.dynamic_sampling_max_draws - 1),
                                  cfg.seed + REFILL_SEED_OFFSET) if cfg.dynamic_sampling else []
    return _Run(cfg, out, log, dp, device, precision, sample_precision, model, init_sha, reference, trainable,
                optimizer, tasks, dev_tasks, schedule, schedule_sha, tokenizer, sampling, refill_stream, rewards=terms)


def _resume(run: _Run) -> None:
    """Restore the latest checkpoint's weights, optimizer and RNG states, and cut the logs back to it."""
    out, dp = run.out, run.dp
    latest, state = restore_latest(out, run.model, run.optimizer, run.device)
    check_rewards_unchanged(state.get("rewards", []), run.rewards, out)
    run.done_groups, run.checkpoints, run.resumed_from = state["group"], state["checkpoints"], state["resumed_from"]
    done_groups = run.done_groups
    for record in run.checkpoints:  # each record was stored before its own weights' hash was known
        record["weights_sha256"] = read_metadata(out / record["path"])["weights_sha256"]
    if dp.is_main:
        kept = truncate_jsonl(out / LOG_NAME, lambda r: r["groups_done"] <= done_groups)
        truncate_jsonl(out / ROLLOUTS_NAME, lambda r: r["group"] <= done_groups)
    else:
        kept = [r for r in read_jsonl(out / LOG_NAME) if r["groups_done"] <= done_groups]
    run.refill_used = sum(r.get("refill_groups_drawn", 0) for r in kept)
    run.log(f"resuming {out} after group {done_groups} ({latest.name})")


def check_rewards_unchanged(recorded: list[dict], terms: list[WeightedReward], out: Path) -> None:
    """Refuse to resume with a reward function whose source changed since the run began (its checkpoints record
    each term's sha256): the steps before and after would be trained on two rewards under one receipt. A
    checkpoint saved before the rewards were recorded has nothing to compare."""
    began = {r["name"]: r["source_sha256"] for r in recorded}
    for term in terms:
        if began.get(term.name, term.source_sha256) != term.source_sha256:
            raise ValueError(f"--resume: the reward {term.name} changed since the run in {out} began (the sha256 of "
                             "its source differs from the one its checkpoints recorded); put its source back as it "
                             "was, or start a new --out")


def _save_checkpoint(run: _Run, group: int) -> None:
    """Score the dev tasks and save the policy with its optimizer and RNG states (rank 0 only; without them under
    --no-save-optimizer); then prune what --keep-last lets go."""
    cfg = run.cfg
    dev = evaluate(run.model, run.dev_tasks, cfg.dev_eval) if run.dev_tasks else None
    dev_summary = dev["summary"] if dev else None
    meta = {"stage": "pre_rl" if group == 0 else "executable_reward_rl", "group": group, "seed": cfg.seed,
            "initial_checkpoint": str(cfg.init), "initial_sha256": run.init_sha, "dev": dev_summary}
    record = {"group": group, "path": checkpoint_name(group), "dev": dev_summary,
              "dev_by_family": dev["by_family"] if dev else None}
    state = {"optimizer": run.optimizer.state_dict(), "rng": rng_state(), "group": group,
             "checkpoints": run.checkpoints + [record], "rewards": [term.record() for term in run.rewards]} \
        if cfg.retention.save_optimizer else None
    record["weights_sha256"] = save_checkpoint(run.out / checkpoint_name(group), run.model, meta, state)
    run.checkpoints.append(record)
    apply_retention(run.out, cfg.retention, run.checkpoints, run.keep)
    if dev_summary:
        run.log(f"  [group {group}] dev exact {dev_summary['exact_rollouts']}/{dev_summary['rollouts']}, "
                f"pass@1 {dev_summary['pass_at_k']['1']:.3f}, saved {checkpoint_name(group)}")


def _step(run: _Run, step: int, first: int, end: int) -> tuple[dict, list[dict], int]:
    """Groups [first, end) of the schedule: sample and verify them (refilling those without signal under dynamic
    sampling), score them and update the policy. Returns the step's log row, its rollout records and its number
    of groups."""
    cfg, dp, model, device = run.cfg, run.dp, run.model, run.device
    t0 = time.perf_counter()
    step_tasks = run.schedule[first:end]
    judged = sample_groups(dp, model, step_tasks, cfg.group_size, run.sampling, cfg.seed + 17 * (first + 1),
                           run.sample_precision, device, cfg.suite)
    dropped, drawn = [], 0
    if cfg.dynamic_sampling:
        step_tasks, judged, dropped, drawn = refill_groups(cfg, model, step_tasks, judged, run.refill_stream,
                                                           run.refill_used, run.sampling, run.sample_precision,
                                                           device, dp, run.rewards)
        run.refill_used += drawn
    rollouts, batch = score_groups(cfg, step_tasks, judged, first, run.tokenizer, run.rewards)
    for slot, task, pairs in dropped:  # recorded, never used
        extra, _ = score_groups(cfg, [task], [pairs], first + slot, run.tokenizer, run.rewards)
        rollouts += [{**r, "used": False, "dropped_by_dynamic_sampling": True} for r in extra]
    rewards = [r["reward"] for r in rollouts]
    zero_variance = len(step_tasks) - len({r["group"] for r in rollouts if r["used"]})
    exact = sum(r["verdict"]["status"] == "passed" for r in rollouts)
    row = {"step": step + 1, "groups_done": end, "reward_mean": sum(rewards) / len(rewards),
           "reward_std": float(torch.tensor(rewards).std()) if len(rewards) > 1 else 0.0,
           "zero_variance_fraction": zero_variance / len(step_tasks), "zero_variance_groups": zero_variance,
           "exact_rollouts": exact, "valid_rollouts": sum(r["verdict"]["status"] != "invalid" for r in rollouts),
           "timeouts": sum(r["verdict"]["status"] == "timeout" for r in rollouts),
           "rollouts": len(rewards), "completion_length": sum(len(r["token_ids"]) for r in rollouts) / len(rollouts),
           "token_cap_hits": sum(r["hit_token_cap"] for r in rollouts), "refill_groups_drawn": drawn}
    row.update(update_policy(model, run.reference, run.optimizer, run.trainable, cfg, run.precision, device, *batch,
                             step, dp))
    row["seconds"] = time.perf_counter() - t0
    return row, rollouts, len(step_tasks)


def _finish(run: _Run, elapsed: float) -> dict:
    """Write the run's receipt (rank 0): settings, hashes, every step's figures and rollout, and the checkpoints."""
    cfg, out = run.cfg, run.out
    steps_log, rollouts = read_jsonl(out / LOG_NAME), read_jsonl(out / ROLLOUTS_NAME)
    algorithm = "RLOO" if cfg.objective == "policy-gradient" else "rejection sampling (expert iteration)"
    receipt = {"schema_version": "1.0", "algorithm": algorithm, "status": "completed", "settings": cfg.to_dict(),
               **get_suite(cfg.suite).receipt(),
               "initial_checkpoint": str(cfg.init), "initial_sha256": run.init_sha, "schedule_sha256": run.schedule_sha,
               "rewards": [term.record() for term in run.rewards],
               "initial_checkpoint_verified": (Path(cfg.init) / "metadata.json").is_file(),  # else --trust-unverified
               "trainable_parameters": sum(p.numel() for p in run.trainable), "precision": run.precision,
               "device": str(run.device), "cpu": cpu_description(), "data_parallel": run.dp.to_dict(),
               "sandbox": sandbox_record(cfg.runtime.accept_partial_isolation),
               "elapsed_seconds_this_invocation": elapsed,
               "resumed_after_group": run.done_groups if cfg.runtime.resume else None,
               "resumed_from": run.resumed_from, "peak_memory_bytes": peak_memory_bytes(run.device),
               "checkpoints": run.checkpoints, "steps": steps_log, "rollouts": rollouts,
               "retention": apply_retention(out, cfg.retention, run.checkpoints, run.keep),  # finishes a cut prune
               "updated_groups": len({r["group"] for r in rollouts if r["used"]}),
               "zero_variance_groups": sum(r["zero_variance_groups"] for r in steps_log)}
    atomic_write_json(out / RECEIPT_NAME, receipt)
    run.log(f"done: {cfg.groups} groups in {elapsed:.1f} s; {receipt['zero_variance_groups']} groups had no signal")
    return receipt


def refill_groups(cfg: RLConfig, model, step_tasks: list[Task], judged: list, stream: list[Task], position: int,
                  sampling: Sampling, sample_precision: str, device, dp: DataParallel = SINGLE,
                  terms: list[WeightedReward] | None = None):
    """Dynamic sampling: each group without signal is replaced, in order, by the next group of fresh tasks from
    `stream` (from `position` on) that has signal, sampling at most (max_draws - 1) x the step's groups more.
    Returns (tasks, judged, dropped [(slot, task, pairs)], fresh groups drawn)."""
    tasks, judged = list(step_tasks), list(judged)
    terms = terms or reward_terms(cfg)
    missing = [i for i, pairs in enumerate(judged) if not informative(cfg, tasks[i], pairs, terms)]
    limit = (cfg.dynamic_sampling_max_draws - 1) * len(tasks)
    dropped, drawn = [], 0
    while missing and drawn < limit:
        fresh = stream[position + drawn: position + drawn + min(len(missing), limit - drawn)]
        if not fresh:
            break
        seed = cfg.seed + REFILL_SEED_OFFSET * (position + drawn + 1)
        for task, pairs in zip(fresh, sample_groups(dp, model, fresh, cfg.group_size, sampling, seed,
                                                    sample_precision, device, cfg.suite)):
            if missing and informative(cfg, task, pairs, terms):
                slot = missing.pop(0)
                dropped.append((slot, tasks[slot], judged[slot]))
                tasks[slot], judged[slot] = task, pairs
            else:
                dropped.append((missing[0] if missing else len(tasks) - 1, task, pairs))
        drawn += len(fresh)
    return tasks, judged, dropped, drawn
