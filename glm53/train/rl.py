"""RLOO post-training with an executable reward.

For each task of a step: sample a group of G completions with the cached engine, judge each with the sandboxed
verifier, reward it (binary or partial), and give it the leave-one-out advantage A_i = r_i - mean of the other
G - 1 rewards. The loss is -mean_i(A_i * log p(completion_i)), with log p the mean (sequence-mean) or sum
(token-sum) of the completion tokens' log-probabilities, plus optional terms: a KL penalty to the initial
policy (k3 estimator on the sampled tokens) and replay cross-entropy on pretraining examples, computed on the
solution tokens only. Groups whose rewards are all equal carry no signal: they are counted, logged and left out.

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
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .completion_batch import FORMS as UPDATE_IMPLS, make_completion_batch
from .checkpoint import (RECEIPT_NAME, checkpoint_name, check_run_folder, load_model, read_metadata,
                         restore_latest, rng_state, save_checkpoint, start_run_folder)
from ..data.pretrain_batches import IGNORE_INDEX, encode_documents
from ..runtime.device import DEVICE_CHOICES, PRECISIONS, autocast, peak_memory_bytes, resolve_device, resolve_precision
from ..runtime.distributed import RANK_SEED_OFFSET, SINGLE, DataParallel
from ..evaluate.evaluate import EvalConfig, evaluate, sample_and_verify
from ..decode.generate import Sampling
from ..runtime.files import atomic_write_json, json_text, read_jsonl, remove_stale_temporaries, run_lock, truncate_jsonl
from ..model.model import GLM53
from .policy_gradient import (AGGREGATIONS, BASELINES, REWARD_SCALINGS, aggregate_objective, aggregate_policy_loss,
                              clipped_token_objective, group_advantages, step_advantages)
from ..verify.rewards import REWARD_MODES, reward
from ..data.tasks import FAMILY_NAMES, Task, frozen_tasks, get_family, pretraining_task
from ..runtime.settings import Checks, default_checkpoints, setting
from ..data.tokenizer import ByteTokenizer
from ..runtime.tracking import TRACKERS, reporting, tracker_problem
from ..verify.verifier import isolation_report

TRAIN_SCOPES = ("all", "last-block", "last-block-head")
REFILL_SEED_OFFSET = 1_000_003  # seeds the fresh-task stream and its sampling apart from the schedule's
NORMALIZATIONS = AGGREGATIONS  # the --normalization flag names the loss aggregation (policy_gradient.py)
REPLAY_STREAM_OFFSET = 50_000_000  # replay documents come from far beyond any pretraining run
RESUMABLE_CHANGES = {"resume", "progress", "device", "threads", "report_to", "report_name", "report_group"}
DEFAULT_CHECKPOINTS = (24, 48, 72, 96)
LOG_NAME, ROLLOUTS_NAME, SCHEDULE_NAME = "rl_log.jsonl", "rollouts.jsonl", "schedule.json"


@dataclass
class RLConfig:
    init: str = setting("", "checkpoint to start from", required=True)
    out: str = setting("", "run folder (must not exist, unless --resume)", required=True)
    groups: int = setting(96, "prompt groups in the whole run")
    group_size: int = setting(16, "completions sampled per prompt")
    families: str = setting("increment,double,even", "task families to train on (comma-separated, or all)")
    tasks_per_family: int = setting(32, "rl-split tasks per family")
    temperature: float = setting(0.35, "sampling temperature of the rollouts")
    max_new_tokens: int = setting(48, "token cap per completion")
    lr: float = setting(5e-5, "learning rate (AdamW, no weight decay)")
    train_scope: str = setting("last-block-head", "which parameters train", choices=TRAIN_SCOPES)
    reward: str = setting("binary", "reward from the verdict", choices=REWARD_MODES)
    invalid_penalty: float = setting(-0.1, "reward of a statically invalid program")
    exact_bonus: float = setting(0.0, "partial reward: bonus when every case passes")
    checkpoints: tuple[int, ...] | None = setting(None, "groups done at which to save and score on dev",
                                                  shown="24,48,72,96, those within --groups")
    seed: int = setting(31415, "seed of the task schedule and the sampling")
    groups_per_step: int = setting(16, "prompt groups per optimizer step")
    normalization: str = setting("sequence-mean", "loss aggregation: each completion's mean or summed token "
                                 "log-prob (then the mean over completions), token-mean over the batch (DAPO) or the "
                                 "batch sum over completions x max-new-tokens (Dr. GRPO)", choices=NORMALIZATIONS)
    advantage_baseline: str = setting("leave-one-out", "baseline of a group's advantages: the other samples' mean "
                                      "(RLOO) or the group mean (GRPO)", choices=BASELINES)
    reward_scaling: str = setting("none", "divide advantages by the group's reward std (GRPO) or the step's",
                                  choices=REWARD_SCALINGS)
    mask_truncated: bool = setting(False, "leave completions that hit the token cap out of the update")
    iterations: int = setting(1, "optimisation passes over each step's rollouts (PPO-style ratio clipping after the "
                                 "first)")
    clip_low: float = setting(0.2, "with --iterations > 1: the ratio is clipped below at 1 - clip_low")
    clip_high: float = setting(0.2, "with --iterations > 1: the ratio is clipped above at 1 + clip_high "
                                    "(0.28: DAPO's clip-higher)")
    entropy_coef: float = setting(0.0, "entropy bonus: subtract this times the mean token entropy from the loss")
    dynamic_sampling: bool = setting(False, "replace groups whose rewards are all equal by groups of fresh tasks (DAPO) "
                                            "until the step's groups all carry signal or the draw cap is reached")
    dynamic_sampling_max_draws: int = setting(3, "with --dynamic-sampling: at most this many times a step's "
                                                 "groups are sampled in all")
    update_impl: str = setting("fast", "forward of the policy update: fast runs each group's shared prompt once and "
                                       "copies its cache to the group's rows; plain runs every row in full (equal up "
                                       "to rounding)", choices=UPDATE_IMPLS)
    kl_coef: float = setting(0.0, "KL penalty to the initial policy (0 = off)")
    replay_coef: float = setting(0.0, "replay cross-entropy on pretraining examples (0 = off)")
    replay_batch: int = setting(16, "replay examples per step")
    grad_clip: float = setting(1.0, "gradient-norm clip")
    dev_per_family: int = setting(4, "dev tasks per family scored at each checkpoint")
    dev_samples: int = setting(8, "samples per dev task")
    dev_temperature: float = setting(0.35, "temperature of the dev samples")
    dev_seed: int = setting(8675309, "seed of the dev sampling")
    device: str = setting("auto", "auto (cuda, mps, cpu), cpu, cuda or mps", choices=DEVICE_CHOICES)
    precision: str = setting("auto", "precision of the update", choices=PRECISIONS)
    sample_precision: str = setting("fp32", "precision of the rollouts", choices=PRECISIONS)
    progress: bool = setting(True, "show a progress bar (--no-progress: plain log lines)")
    threads: int = setting(0, "torch threads (0: torch's default; under torchrun, cores / ranks on this machine)")
    report_to: str = setting("none", "also log each step's figures to a tracker (offline unless you configure it)",
                             choices=TRACKERS)
    report_name: str = setting("", cli=False)  # the tracker's run name (default: the run folder), set by sweeps
    report_group: str = setting("", cli=False)  # the tracker's group of runs (a sweep), set by sweeps
    tasks_file: str | None = setting(None, "JSON Lines task file to train on instead of the rl split")
    resume: bool = setting(False, "continue the RL run in --out from its latest checkpoint")

    def __post_init__(self) -> None:
        self.checkpoints = default_checkpoints(self.checkpoints, DEFAULT_CHECKPOINTS, self.groups)
        check = Checks("rl")
        check.at_least("groups", self.groups, 1)
        check.require(self.group_size >= 2, f"--group-size must be >= 2 (leave-one-out needs another sample), "
                                            f"got {self.group_size}")
        check.require(all(1 <= c <= self.groups for c in self.checkpoints),
                      f"--checkpoints {','.join(map(str, self.checkpoints))} must lie in [1, --groups {self.groups}]")
        check.at_least("tasks_per_family", self.tasks_per_family, 1)
        check.require(self.temperature > 0, f"--temperature must be > 0: at 0 every sample of a group is the same "
                                            f"program, so no group has a reward signal (got {self.temperature})")
        check.at_least("max_new_tokens", self.max_new_tokens, 1)
        check.positive("lr", self.lr)
        check.one_of("train_scope", self.train_scope, TRAIN_SCOPES)
        check.one_of("reward", self.reward, REWARD_MODES)
        check.one_of("normalization", self.normalization, NORMALIZATIONS)
        check.one_of("advantage_baseline", self.advantage_baseline, BASELINES)
        check.one_of("reward_scaling", self.reward_scaling, REWARD_SCALINGS)
        check.one_of("update_impl", self.update_impl, UPDATE_IMPLS)
        check.at_least("entropy_coef", self.entropy_coef, 0)
        check.at_least("iterations", self.iterations, 1)
        check.at_least("dynamic_sampling_max_draws", self.dynamic_sampling_max_draws, 1)
        check.require(not self.dynamic_sampling or self.dynamic_sampling_max_draws >= 2,
                      f"--dynamic-sampling needs --dynamic-sampling-max-draws >= 2 (1 draws no fresh group), got "
                      f"{self.dynamic_sampling_max_draws}")
        check.within("clip_low", self.clip_low, 0, 1)
        check.at_least("clip_high", self.clip_high, 0)
        check.require(self.iterations == 1 or (self.clip_low > 0 and self.clip_high > 0),
                      f"--iterations {self.iterations} needs a clipping range on both sides (--clip-low and "
                      f"--clip-high > 0; got {self.clip_low} and {self.clip_high})")
        check.at_least("groups_per_step", self.groups_per_step, 1)
        check.at_least("kl_coef", self.kl_coef, 0)
        check.at_least("replay_coef", self.replay_coef, 0)
        check.at_least("replay_batch", self.replay_batch, 1)
        check.positive("grad_clip", self.grad_clip)
        check.at_least("dev_per_family", self.dev_per_family, 0)
        check.at_least("dev_samples", self.dev_samples, 1)
        check.require(self.dev_samples == 1 or self.dev_temperature > 0,
                      "--dev-temperature must be > 0 when --dev-samples > 1")
        check.one_of("device", self.device, DEVICE_CHOICES)
        check.one_of("precision", self.precision, PRECISIONS)
        check.one_of("sample_precision", self.sample_precision, PRECISIONS)
        check.at_least("threads", self.threads, 0)
        check.one_of("report_to", self.report_to, TRACKERS)
        check.require(tracker_problem(self.report_to) is None, str(tracker_problem(self.report_to)))
        check.done()
        if self.groups not in self.checkpoints:
            self.checkpoints = self.checkpoints + (self.groups,)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["checkpoints"] = list(self.checkpoints)
        return d


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


def set_train_scope(model: GLM53, scope: str) -> list[torch.nn.Parameter]:
    for p in model.parameters():
        p.requires_grad_(scope == "all")
    if scope != "all":
        head = (model.embedding,) + ((model.head,) if model.head is not None else ())  # the head: tied or not
        for module in (model.layers[-1], model.final_norm) + (head if scope == "last-block-head" else ()):
            for p in module.parameters():
                p.requires_grad_(True)
    return [p for p in model.parameters() if p.requires_grad]


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


def replay_batch(step: int, batch: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Pretraining-style examples with labels on the solution tokens (body + EOS) only."""
    texts, prompt_lengths = [], []
    for r in range(batch):
        task = pretraining_task(REPLAY_STREAM_OFFSET + step * batch + r)
        texts.append(task.prompt + get_family(task.family).body)
        prompt_lengths.append(len(ByteTokenizer().encode(task.prompt, bos=True)))
    inputs, labels = encode_documents(texts, max(len(t.encode()) for t in texts) + 1)
    for i, n in enumerate(prompt_lengths):
        labels[i, : n - 1] = IGNORE_INDEX
    return inputs.to(device), labels.to(device)


def rl_train(cfg: RLConfig, tasks: list[Task] | None = None, dev_tasks: list[Task] | None = None, log=print,
             dp: DataParallel = SINGLE, device: torch.device | None = None) -> dict | None:
    """Run (or resume) RL; returns the receipt dict that is also written to the run folder (by rank 0 under data
    parallelism; the other ranks return None). One process at a time may write a run folder; what an
    interrupted atomic write left behind is removed first."""
    if not cfg.out or not cfg.init:
        raise ValueError("rl: init (the start checkpoint, --init) and out (the run folder, --out) must be set")
    if not dp.is_main:
        return _rl_train(cfg, tasks, dev_tasks, log, dp, device)
    with run_lock(cfg.out):
        remove_stale_temporaries(cfg.out)
        return _rl_train(cfg, tasks, dev_tasks, log, dp, device)


def sample_groups(dp: DataParallel, model, tasks: list[Task], group_size: int, sampling: Sampling, seed: int,
                  sample_precision: str, device) -> list:
    """A judged group of samples per task: this rank samples and verifies its share of the tasks (rank 0 with
    `seed` itself, as a single process does for all of them), and every rank gets all groups in task order."""
    mine = tasks[dp.share(len(tasks))]
    generator = torch.Generator(device=device).manual_seed(seed + RANK_SEED_OFFSET * dp.rank)
    judged = sample_and_verify(model, mine, group_size, sampling, generator, sample_precision) if mine else []
    return dp.gather(judged)


def _rl_train(cfg: RLConfig, tasks: list[Task] | None, dev_tasks: list[Task] | None, log, dp: DataParallel,
              device: torch.device | None) -> dict | None:
    out = Path(cfg.out)
    dp.on_main(lambda: check_run_folder(out, cfg.to_dict(), cfg.resume, RESUMABLE_CHANGES))
    device = device or resolve_device(cfg.device)
    if cfg.threads and not dp.active:  # under torchrun, from_environment has set them
        torch.set_num_threads(cfg.threads)
    precision = resolve_precision(cfg.precision, device)
    model = load_model(cfg.init, device)  # checks the weights against their recorded hash
    init_sha = model.weights_sha256
    reference = copy.deepcopy(model).eval().requires_grad_(False) if cfg.kl_coef > 0 else None
    torch.manual_seed(cfg.seed)
    trainable = set_train_scope(model, cfg.train_scope)
    optimizer = torch.optim.AdamW(trainable, lr=cfg.lr, weight_decay=0.0)
    tasks = tasks if tasks is not None else frozen_tasks("rl", cfg.tasks_per_family, cfg.families)
    if dev_tasks is None:
        known = [f for f in FAMILY_NAMES if f in {t.family for t in tasks}]
        dev_tasks = frozen_tasks("dev", cfg.dev_per_family, ",".join(known)) if known and cfg.dev_per_family else []
    schedule = task_schedule(tasks, cfg.groups, cfg.seed)
    schedule_ids = [t.task_id for t in schedule]
    schedule_sha = hashlib.sha256(json.dumps(schedule_ids).encode()).hexdigest()
    if not cfg.resume and dp.is_main:
        start_run_folder(out, cfg.to_dict())
        atomic_write_json(out / SCHEDULE_NAME, schedule_ids)
    tokenizer = ByteTokenizer()
    sampling = Sampling(temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens)
    sample_precision = resolve_precision(cfg.sample_precision, device, purpose="decode")
    log(f"glm53 rl: {sum(p.numel() for p in trainable):,} trainable parameters ({cfg.train_scope}), "
        f"{cfg.groups} groups of {cfg.group_size} over "
        f"{len(tasks)} tasks, device {device} ({precision})"
        + (f", {dp.world_size} ranks ({dp.backend}), {torch.get_num_threads()} threads each" if dp.active else ""))

    checkpoints: list[dict] = []
    done_groups, resumed_from, refill_used = 0, None, 0
    # dynamic sampling draws fresh tasks from a stream of its own, so the schedule stays as it is
    refill_stream = task_schedule(tasks, cfg.groups * (cfg.dynamic_sampling_max_draws - 1),
                                  cfg.seed + REFILL_SEED_OFFSET) if cfg.dynamic_sampling else []
    if cfg.resume:
        latest, state = restore_latest(out, model, optimizer, device)
        done_groups, checkpoints, resumed_from = state["group"], state["checkpoints"], state["resumed_from"]
        for record in checkpoints:  # each record was stored before its own weights' hash was known
            record["weights_sha256"] = read_metadata(out / record["path"])["weights_sha256"]
        if dp.is_main:
            kept = truncate_jsonl(out / LOG_NAME, lambda r: r["groups_done"] <= done_groups)
            truncate_jsonl(out / ROLLOUTS_NAME, lambda r: r["group"] <= done_groups)
        else:
            kept = [r for r in read_jsonl(out / LOG_NAME) if r["groups_done"] <= done_groups]
        refill_used = sum(r.get("refill_groups_drawn", 0) for r in kept)
        log(f"resuming {out} after group {done_groups} ({latest.name})")

    def checkpoint(group: int) -> None:
        dev_cfg = EvalConfig(samples=cfg.dev_samples, seed=cfg.dev_seed,
                             sampling=Sampling(temperature=cfg.dev_temperature, max_new_tokens=cfg.max_new_tokens))
        dev = evaluate(model, dev_tasks, dev_cfg) if dev_tasks else None
        dev_summary = dev["summary"] if dev else None
        meta = {"stage": "pre_rl" if group == 0 else "executable_reward_rl", "group": group, "seed": cfg.seed,
                "initial_checkpoint": str(cfg.init), "initial_sha256": init_sha, "dev": dev_summary}
        record = {"group": group, "path": checkpoint_name(group), "dev": dev_summary,
                  "dev_by_family": dev["by_family"] if dev else None}
        sha = save_checkpoint(out / checkpoint_name(group), model, meta,
                              {"optimizer": optimizer.state_dict(), "rng": rng_state(), "group": group,
                               "checkpoints": checkpoints + [record]})
        record["weights_sha256"] = sha
        checkpoints.append(record)
        if dev_summary:
            log(f"  [group {group}] dev exact {dev_summary['exact_rollouts']}/{dev_summary['rollouts']}, "
                f"pass@1 {dev_summary['pass_at_k']['1']:.3f}, saved {checkpoint_name(group)}")

    if not cfg.resume and dp.is_main:
        checkpoint(0)
    started = time.perf_counter()
    bounds = step_boundaries(cfg.groups, cfg.groups_per_step, cfg.checkpoints)
    with reporting(cfg.report_to if dp.is_main else "none", out, cfg.report_name, cfg.report_group,
                   cfg.to_dict()) as tracker, \
            tqdm(total=cfg.groups, initial=done_groups, disable=not (cfg.progress and dp.is_main), desc="rl",
                 unit="group", dynamic_ncols=True) as bar:
        for step, (first, end) in enumerate(bounds):
            if end <= done_groups:
                continue
            t0 = time.perf_counter()
            step_tasks = schedule[first:end]
            judged = sample_groups(dp, model, step_tasks, cfg.group_size, sampling, cfg.seed + 17 * (first + 1),
                                   sample_precision, device)
            dropped, drawn = [], 0
            if cfg.dynamic_sampling:
                step_tasks, judged, dropped, drawn = refill_groups(cfg, model, step_tasks, judged, refill_stream,
                                                                   refill_used, sampling, sample_precision, device, dp)
                refill_used += drawn
            rollouts, batch = score_groups(cfg, step_tasks, judged, first, tokenizer)
            for slot, task, pairs in dropped:  # recorded, never used
                extra, _ = score_groups(cfg, [task], [pairs], first + slot, tokenizer)
                rollouts += [{**r, "used": False, "dropped_by_dynamic_sampling": True} for r in extra]
            rewards = [r["reward"] for r in rollouts]
            zero_variance = len(step_tasks) - len({r["group"] for r in rollouts if r["used"]})
            exact = sum(r["verdict"]["status"] == "passed" for r in rollouts)
            row = {"step": step + 1, "groups_done": end, "reward_mean": sum(rewards) / len(rewards),
                   "reward_std": float(torch.tensor(rewards).std()) if len(rewards) > 1 else 0.0,
                   "zero_variance_fraction": zero_variance / len(step_tasks), "zero_variance_groups": zero_variance,
                   "exact_rollouts": exact, "valid_rollouts": sum(r["verdict"]["status"] != "invalid" for r in rollouts),
                   "rollouts": len(rewards), "completion_length": sum(len(r["token_ids"]) for r in rollouts) / len(rollouts),
                   "token_cap_hits": sum(r["hit_token_cap"] for r in rollouts), "refill_groups_drawn": drawn}
            row.update(_update(model, reference, optimizer, trainable, cfg, precision, device, *batch, step, dp))
            row["seconds"] = time.perf_counter() - t0
            bar.update(end - first)
            if not dp.is_main:
                continue  # rank 0 alone logs, evaluates and saves; the others meet it at the next step's collectives
            if tracker is not None:
                tracker.log(row, step + 1)
            with open(out / LOG_NAME, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
            with open(out / ROLLOUTS_NAME, "a", encoding="utf-8") as f:
                f.write("".join(json_text(r) + "\n" for r in rollouts))
            bar.set_postfix(reward=f"{row['reward_mean']:.3f}", exact=f"{exact}/{len(rewards)}", skipped=zero_variance)
            if not cfg.progress:
                log(f"step {step + 1:3d} groups {end:4d} reward {row['reward_mean']:+.3f} exact {exact}/{len(rewards)} "
                    f"zero-var {zero_variance}/{len(step_tasks)} loss {row.get('loss', 0.0):+.4f} {row['seconds']:.1f}s")
            if end in cfg.checkpoints:
                checkpoint(end)
    elapsed = time.perf_counter() - started
    if not dp.is_main:
        return None
    steps_log, rollouts = read_jsonl(out / LOG_NAME), read_jsonl(out / ROLLOUTS_NAME)
    receipt = {"schema_version": "1.0", "algorithm": "RLOO", "status": "completed", "settings": cfg.to_dict(),
               "initial_checkpoint": str(cfg.init), "initial_sha256": init_sha, "schedule_sha256": schedule_sha,
               "trainable_parameters": sum(p.numel() for p in trainable), "precision": precision,
               "device": str(device), "data_parallel": dp.to_dict(), "sandbox": isolation_report(), "elapsed_seconds_this_invocation": elapsed,
               "resumed_after_group": done_groups if cfg.resume else None,
               "resumed_from": resumed_from, "peak_memory_bytes": peak_memory_bytes(device),
               "checkpoints": checkpoints, "steps": steps_log, "rollouts": rollouts,
               "updated_groups": sum(r["used"] for r in rollouts) // cfg.group_size,
               "zero_variance_groups": sum(r["zero_variance_groups"] for r in steps_log)}
    atomic_write_json(out / RECEIPT_NAME, receipt)
    log(f"done: {cfg.groups} groups in {elapsed:.1f} s; {receipt['zero_variance_groups']} groups had no signal")
    return receipt


def informative(cfg: RLConfig, pairs: list) -> bool:
    """A group carries signal when its rewards are not all equal."""
    rewards = [reward(v, cfg.reward, cfg.invalid_penalty, cfg.exact_bonus) for _, v in pairs]
    return max(rewards) - min(rewards) > 1e-8


def refill_groups(cfg: RLConfig, model, step_tasks: list[Task], judged: list, stream: list[Task], position: int,
                  sampling: Sampling, sample_precision: str, device, dp: DataParallel = SINGLE):
    """Dynamic sampling: each group without signal is replaced, in order, by the next group of fresh tasks from
    `stream` (from `position` on) that has signal, sampling at most (max_draws - 1) x the step's groups more.
    Returns (tasks, judged, dropped [(slot, task, pairs)], fresh groups drawn)."""
    tasks, judged = list(step_tasks), list(judged)
    missing = [i for i, pairs in enumerate(judged) if not informative(cfg, pairs)]
    limit = (cfg.dynamic_sampling_max_draws - 1) * len(tasks)
    dropped, drawn = [], 0
    while missing and drawn < limit:
        fresh = stream[position + drawn: position + drawn + min(len(missing), limit - drawn)]
        if not fresh:
            break
        seed = cfg.seed + REFILL_SEED_OFFSET * (position + drawn + 1)
        for task, pairs in zip(fresh, sample_groups(dp, model, fresh, cfg.group_size, sampling, seed,
                                                    sample_precision, device)):
            if missing and informative(cfg, pairs):
                slot = missing.pop(0)
                dropped.append((slot, tasks[slot], judged[slot]))
                tasks[slot], judged[slot] = task, pairs
            else:
                dropped.append((missing[0] if missing else len(tasks) - 1, task, pairs))
        drawn += len(fresh)
    return tasks, judged, dropped, drawn


def score_groups(cfg: RLConfig, tasks: list[Task], judged: list, first: int, tokenizer: ByteTokenizer):
    """Rewards and advantages (cfg.advantage_baseline, cfg.reward_scaling) for each group of (sample, verdict)
    pairs. Returns the rollout records and the update's batch (prompt ids, completion ids, advantages) of the
    groups with signal (less any capped completions when cfg.mask_truncated)."""
    rollouts, prompt_ids, completion_ids, advantages = [], [], [], []
    rewards_of = [[reward(v, cfg.reward, cfg.invalid_penalty, cfg.exact_bonus) for _, v in pairs] for pairs in judged]
    advantages_of = step_advantages(rewards_of, cfg.advantage_baseline, cfg.reward_scaling)
    for g, (task, pairs) in enumerate(zip(tasks, judged)):
        rewards = rewards_of[g]
        used = max(rewards) - min(rewards) > 1e-8  # all-equal rewards carry no signal
        task_prompt_ids = tokenizer.encode(task.prompt, bos=True)
        for (s, v), r, a in zip(pairs, rewards, advantages_of[g]):
            masked = cfg.mask_truncated and s["hit_token_cap"]
            rollouts.append({"group": first + g + 1, "task_id": task.task_id, "completion": s["completion"],
                             "token_ids": s["token_ids"], "hit_token_cap": s["hit_token_cap"],
                             "verdict": v.to_json(), "reward": r, "advantage": a if used else 0.0,
                             "used": used and not masked})
            if used and not masked:
                prompt_ids.append(task_prompt_ids)
                completion_ids.append(s["token_ids"])
                advantages.append(a)
    return rollouts, (prompt_ids, completion_ids, advantages)


def _update(model, reference, optimizer, trainable, cfg: RLConfig, precision: str, device, prompt_ids,
            completion_ids, advantages, step: int, dp: DataParallel = SINGLE) -> dict:
    """cfg.iterations optimizer steps on the groups with signal (plus replay/KL terms); after the first, each token's
    term is the clipped PPO objective against the log-probs the rollouts were scored with before any of them.
    Returns the step's figures (those of the last pass, with clip fractions averaged over the passes). Under data
    parallelism this rank computes on its share of the rows, and the figures are the step's."""
    if not advantages and cfg.replay_coef <= 0:
        return {"updated": False, "loss": 0.0, "grad_norm": 0.0, "entropy": None, "kl": None}
    rows = dp.share(len(advantages))
    mine = (prompt_ids[rows], completion_ids[rows], advantages[rows])
    batch = make_completion_batch(cfg.update_impl, mine[0], mine[1], device) if mine[2] else None
    # the step's totals, by which every rank divides its sums
    totals = {"rows": len(advantages),
              "tokens": int(dp.sum(batch.mask.sum() if batch is not None else torch.zeros((), dtype=torch.long)))}
    old_logp, clipped = None, []
    if cfg.iterations > 1 and batch is not None:
        with torch.no_grad(), autocast(device, precision):
            model.train()
            old_logp = _token_logp(batch.logits(model), batch.targets, batch.mask).detach()
    for _ in range(cfg.iterations):
        figures = _update_pass(model, reference, optimizer, trainable, cfg, precision, device, batch, mine[2],
                               bool(advantages), step, old_logp, dp, totals)
        clipped.append((figures.pop("clipped_low", 0.0), figures.pop("clipped_high", 0.0)))
    if cfg.iterations > 1:
        figures["clipped_low"] = sum(c[0] for c in clipped) / len(clipped)
        figures["clipped_high"] = sum(c[1] for c in clipped) / len(clipped)
    return figures


def _token_logp(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return logits.float().log_softmax(dim=-1).gather(-1, targets[..., None]).squeeze(-1) * mask


def _update_pass(model, reference, optimizer, trainable, cfg: RLConfig, precision: str, device, batch, advantages,
                 policy: bool, step: int, old_logp, dp: DataParallel, totals: dict) -> dict:
    """One optimizer step. `batch`/`advantages`: this rank's rows (batch None when it holds none); `policy`: whether
    the step has any row at all. Every term is this rank's share of the step's value, and so is each figure in
    `shares`; their sums over ranks are the step's loss and figures."""
    model.train()
    optimizer.zero_grad(set_to_none=True)
    loss = torch.zeros((), device=device)
    shares: dict[str, torch.Tensor] = {}
    tokens = max(totals["tokens"], 1)
    if batch is not None:
        targets, mask = batch.targets, batch.mask
        with autocast(device, precision):
            logits = batch.logits(model)
        logp_all = logits.float().log_softmax(dim=-1)
        token_logp = logp_all.gather(-1, targets[..., None]).squeeze(-1) * mask
        adv = torch.tensor(advantages, device=device)
        if old_logp is None:
            policy_loss = aggregate_policy_loss(token_logp, mask, adv, cfg.normalization, cfg.max_new_tokens,
                                                totals["rows"], tokens)
        else:
            objective, low, high = clipped_token_objective(token_logp, old_logp, adv, mask, cfg.clip_low,
                                                           cfg.clip_high)
            policy_loss = aggregate_objective(objective, mask, cfg.normalization, cfg.max_new_tokens,
                                              totals["rows"], tokens)
            local = float(mask.sum()) / tokens  # the fractions are of this rank's tokens
            shares["clipped_low"], shares["clipped_high"] = torch.tensor(low * local), torch.tensor(high * local)
        loss = loss + policy_loss
        with torch.set_grad_enabled(cfg.entropy_coef > 0):
            entropy = -(logp_all.exp() * logp_all).sum(-1)
            entropy_share = (entropy * mask).sum() / tokens
        if cfg.entropy_coef > 0:
            loss = loss - cfg.entropy_coef * entropy_share
        shares["entropy"], shares["policy_loss"] = entropy_share.detach(), policy_loss.detach()
        if reference is not None:
            with torch.no_grad(), autocast(device, precision):
                ref_logits = batch.logits(reference)
            ref_logp = ref_logits.float().log_softmax(-1).gather(-1, targets[..., None]).squeeze(-1)
            log_ratio = (ref_logp - token_logp) * mask
            kl_share = ((log_ratio.exp() - 1 - log_ratio) * mask).sum() / tokens
            loss = loss + cfg.kl_coef * kl_share
            shares["kl"] = kl_share.detach()
    if cfg.replay_coef > 0:
        r_inputs, r_labels = replay_batch(step, cfg.replay_batch, device)
        rows = dp.share(cfg.replay_batch)
        r_inputs, r_labels = r_inputs[rows], r_labels[rows]
        replay_tokens = max(int(dp.sum((r_labels != IGNORE_INDEX).sum())), 1)
        if r_inputs.shape[0]:
            with autocast(device, precision):
                r_logits = model(r_inputs)
            replay_share = F.cross_entropy(r_logits.float().reshape(-1, r_logits.shape[-1]), r_labels.reshape(-1),
                                           ignore_index=IGNORE_INDEX, reduction="sum") / replay_tokens
            loss = loss + cfg.replay_coef * replay_share
            shares["replay_loss"] = replay_share.detach()
    if loss.requires_grad:
        loss.backward()
    dp.sum_gradients(trainable)
    grad_norm = torch.nn.utils.clip_grad_norm_(trainable, cfg.grad_clip)
    optimizer.step()
    model.update_router_biases(dp.sum if dp.active else None)
    names = ["loss", "entropy", "policy_loss", "kl", "replay_loss", "clipped_low", "clipped_high"]
    shares["loss"] = loss.detach()
    summed = dp.sum(torch.stack([shares.get(n, torch.zeros(())).float().cpu() for n in names])).tolist()
    step_figures = dict(zip(names, summed))
    figures: dict = {"updated": True, "loss": step_figures["loss"], "grad_norm": float(grad_norm)}
    if policy:
        figures.update({k: step_figures[k] for k in ("entropy", "policy_loss")})
        if cfg.iterations > 1:
            figures.update({k: step_figures[k] for k in ("clipped_low", "clipped_high")})
    figures["entropy"] = figures.get("entropy")
    figures["kl"] = step_figures["kl"] if policy and reference is not None else None
    if cfg.replay_coef > 0:
        figures["replay_loss"] = step_figures["replay_loss"]
    return figures
