"""`glm53 speedrun`: wall-clock time to a fixed target on fixed data, the public speedruns' measure, on a CPU.

Pretrain a recipe (one of the speedrun's rows in the recipe book, glm53/recipes/) on the broad suite's generated
stream, built and stepped as `glm53 pretrain` builds and steps it (train/training_start.py `build_training`,
train/pretrain.py `train_step`), and stop as soon as the pooled body loss of the first 64 dev tasks (nats a byte
of their reference bodies, evaluate/body_loss.py) is at or below the target, 0.18.

The clock starts when the command starts and counts everything a run needs: importing torch, building the model
and the data, compiling, training. It stops while the target is checked (every `check_every_seconds` on the
clock, or every `check_every_steps` for a screen that counts steps, and at the schedule's last step); that time is
reported beside it as `check_seconds`. Per byte of the
reference bodies, so that recipes whose tokenizers cut text differently compare fairly.

At the target it writes `final/` (save_pretrained with the hashes `glm53 eval --checkpoint` checks), scores greedy
pass@1 on the first 32 dev tasks, and writes `speedrun.json`. If the budget or the schedule ends first, it writes
`speedrun.json` with `target_reached: false` and the best body loss, and exits 1.

Nothing here trains on a task of any split: the stream is the suite's pretraining documents (pretrain_batches.py),
and the dev tasks are only read to measure.

Simplifications: one process (no data parallelism); no resume (a speedrun is short and timed whole).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from ..data.suites import get_suite
from ..runtime.files import AtomicDirectory, atomic_write_json, refuse_nonempty_dir, run_lock
from ..recipes.book import recipe_chain
from .speedrun_config import PASS_TASKS, SUITE, TARGET_TASKS, SpeedrunConfig

RESULT_NAME = "speedrun.json"
LOG_NAME = "speedrun_log.jsonl"
FINAL_NAME = "final"


class Clock:
    """Seconds since the command started, less the time spent checking the target."""

    def __init__(self, started: float):
        self.started, self.paused = started, 0.0

    def now(self) -> float:
        return time.perf_counter() - self.started - self.paused

    def pause(self, seconds: float) -> None:
        self.paused += seconds


def speedrun(cfg: SpeedrunConfig, started: float | None = None, log=print) -> dict:
    """Run the speedrun `cfg` describes; returns what speedrun.json holds. `started`: the command's start on
    time.perf_counter()'s clock (now, when not given)."""
    clock = Clock(time.perf_counter() if started is None else started)
    out = Path(cfg.out)
    refuse_nonempty_dir(out)
    with run_lock(out):
        return _speedrun(cfg, clock, out, log)


def _speedrun(cfg: SpeedrunConfig, clock: Clock, out: Path, log) -> dict:
    import torch

    from ..data.pretrain_batches import compiled_widths, pretraining_batch
    from ..evaluate.body_loss import body_loss_batched, reference_bodies
    from ..runtime.cpu import cpu_description
    from ..runtime.device import compiled
    from ..train.muon import newton_schulz_precision
    from ..train.pretrain import train_step
    from ..train.training_start import build_training

    start = build_training(cfg.pretrain)
    p, model, optimizer, device, precision = start.cfg, start.model, start.optimizer, start.device, start.precision
    forward = compiled(model, shapes=compiled_widths(p.sequence_length)) if p.compile else model
    items = reference_bodies(SUITE, "dev", TARGET_TASKS)
    pretraining_batch(0, p.batch_size, p.sequence_length, p.seed, p.suite, loss_on=p.loss_on, tokenizer=start.tokenizer,
                      docstring_share=p.docstring_share, stream_primitives=p.stream_primitives,
                      stream_primitives_share=p.stream_primitives_share)  # the stream's tables,
    # and its registry and guard, before the first timed step
    counts = model.parameter_counts()
    log(f"glm53 speedrun: recipe {cfg.recipe} ({' -> '.join(recipe_chain(cfg.recipe))}), seed {cfg.seed}, "
        f"{counts['total']:,} parameters, {p.steps} steps of {p.batch_size} rows, {p.optimization.optimizer}, "
        f"{precision}{', compiled' if p.compile else ''}, {torch.get_num_threads()} threads; "
        f"target body loss <= {cfg.target} on {len(items)} dev tasks, budget {cfg.budget_minutes:g} min")

    checks, best, reached, step, tokens = [], float("inf"), False, 0, 0
    budget = cfg.budget_minutes * 60
    next_check = cfg.check_every_seconds
    model.train()
    with open(out / LOG_NAME, "w", encoding="utf-8") as log_file:
        while step < p.steps and clock.now() < budget:
            row = train_step(p, step, model, forward, optimizer, device, precision)
            step, tokens = step + 1, tokens + row["tokens"]
            due = step % cfg.check_every_steps == 0 if cfg.check_every_steps else clock.now() >= next_check
            if not due and step < p.steps:
                continue
            check_started = time.perf_counter()
            loss = body_loss_batched(model, items)
            model.train()
            spent = time.perf_counter() - check_started
            clock.pause(spent)
            next_check = clock.now() + cfg.check_every_seconds
            best = min(best, loss)
            check = {"step": step, "seconds": round(clock.now(), 2), "body_loss": loss, "check_seconds": spent,
                     "train_loss": row["loss"], "lr": row["lr"], "tokens": tokens}
            checks.append(check)
            log_file.write(json.dumps(check) + "\n")
            log_file.flush()
            log(f"  {clock.now():7.1f} s  step {step:5d}  body loss {loss:.4f}  train loss {row['loss']:.4f}  "
                f"(check {spent:.1f} s)")
            if loss <= cfg.target:
                reached = True
                break
    seconds = clock.now()
    result = {
        "target_reached": reached, "seconds_to_target": round(seconds, 2) if reached else None,
        "seconds": round(seconds, 2), "body_loss": checks[-1]["body_loss"] if checks else None,
        "best_body_loss": best if checks else None, "target": cfg.target, "target_tasks": len(items),
        "check_seconds": round(sum(c["check_seconds"] for c in checks), 2), "checks": len(checks),
        "steps": step, "tokens": tokens, "train_tokens_per_second": tokens / max(seconds, 1e-9),
        "recipe": cfg.recipe, "recipe_chain": recipe_chain(cfg.recipe), "seed": cfg.seed,
        "settings": cfg.to_dict() | {"pretrain": p.to_dict()}, "parameter_counts": counts,
        "precision": precision, "device": str(device), "cpu": cpu_description()["model"],
        "muon_newton_schulz": newton_schulz_precision(device) if p.optimization.optimizer == "muon" else None,
        "torch_version": torch.__version__, "threads": torch.get_num_threads(),
    }
    if reached:
        result["dev_pass_at_1"], result["dev_passed"] = _save_and_score(
            model, out, get_suite(SUITE).pretrain_dev_tasks(), p.dev_max_new_tokens)
        log(f"target reached in {seconds:.1f} s at step {step} (checks took {result['check_seconds']:.1f} s more); "
            f"dev greedy pass@1 {result['dev_passed']}/{PASS_TASKS}; {out / FINAL_NAME}")
    else:
        why = "the budget ran out" if clock.now() >= budget else "the schedule ended"
        log(f"target not reached: {why} at step {step} after {seconds:.1f} s; best body loss {best:.4f}")
    atomic_write_json(out / RESULT_NAME, result)
    return result


def _save_and_score(model, out: Path, tasks: list, max_new_tokens: int) -> tuple[float, int]:
    """Write final/ (safetensors, config.json and the hashes glm53's commands check), then its greedy pass@1 on
    the first PASS_TASKS dev tasks."""
    from ..train.pretrain import dev_completions

    with AtomicDirectory(out / FINAL_NAME) as tmp:
        model.save_pretrained(tmp)  # with metadata.json, the hashes glm53's commands check
    samples = dev_completions(model, tasks[:PASS_TASKS], max_new_tokens, SUITE)
    passed = sum(s["status"] == "passed" for s in samples)
    return passed / len(samples), passed
