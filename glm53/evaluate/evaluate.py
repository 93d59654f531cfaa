"""Evaluation on frozen splits or task files: greedy pass@1, sampled pass@k, with a full receipt.

The completions are decode/task_completions.py's (stopped and cut as the task suite says). Each program is
verified at its task's language level. pass@k is reported two ways: the unbiased estimator of Chen et al. (2021),
1 - C(n - c, k) / C(n, k) averaged over tasks, and the plain any-of-n rate (did any sample pass).

`evaluation_completions` (decode/task_completions.py) is the one place evaluation's completions are made:
`glm53 generate --tasks` writes the same ones (glm53/decode/bulk.py) for `glm53 verify` to judge.
"""

from __future__ import annotations

import time
from collections import defaultdict

import torch

from ..data.bpe_tokenizer import prompt_tokens
from ..data.suites import DEFAULT_SUITE, get_suite
from ..data.tasks import Task
from ..decode.sampling import Sampling
from ..decode.task_completions import evaluation_completions, sample_completions
from ..model.model import GLM53
from ..runtime.device import peak_memory_bytes
from ..verify.rewards import binary_reward
from ..verify.verifier import DEFAULT_CPU_S, DEFAULT_TIMEOUT_S, SandboxPool, Verdict, verify_many
from .eval_config import EvalConfig
from .pass_at_k import pass_at_k
from ..verify.sandbox_policy import sandbox_record


def verify_completions(tasks: list[Task], completions: list[list[dict]], timeout_s: float = DEFAULT_TIMEOUT_S,
                       pool: SandboxPool | None = None, cpu_s: float = DEFAULT_CPU_S
                       ) -> list[list[tuple[dict, Verdict]]]:
    """Each completion judged against its task's hidden cases at the task's language level (`task.program`), each
    program given `cpu_s` of its own CPU time (its suite's)."""
    items = [t.program(s["completion"]) for t, group in zip(tasks, completions) for s in group]
    verdicts = iter(verify_many(items, timeout_s=timeout_s, pool=pool, cpu_s=cpu_s))
    return [[(s, next(verdicts)) for s in group] for group in completions]


def sample_and_verify(model: GLM53, tasks: list[Task], group_size: int, sampling: Sampling,
                      generator: torch.Generator, precision: str = "fp32", max_rows: int | None = None,
                      timeout_s: float = DEFAULT_TIMEOUT_S, pool: SandboxPool | None = None,
                      suite: str = DEFAULT_SUITE) -> list[list[tuple[dict, Verdict]]]:
    """For each task, `group_size` completions (`sample_completions`), each judged against the task's hidden
    cases at the task's language level: [[(sample, verdict), ...] per task]."""
    completions = sample_completions(model, tasks, group_size, sampling, generator, precision, max_rows, suite)
    return verify_completions(tasks, completions, timeout_s, pool)


def _summary(rows: list[dict], samples: int, ks: list[int]) -> dict:
    n_tasks = len(rows)
    rollouts = [s for r in rows for s in r["samples"]]
    summary = {
        "tasks": n_tasks, "samples_per_task": samples,
        "tasks_solved_any": sum(r["passed"] > 0 for r in rows),
        "exact_rollouts": sum(s["verdict"]["status"] == "passed" for s in rollouts), "rollouts": len(rollouts),
        "hidden_tests_passed": sum(s["verdict"]["passed_cases"] for s in rollouts),
        "hidden_tests": sum(s["verdict"]["total_cases"] for s in rollouts),
        "valid_programs": sum(s["verdict"]["status"] != "invalid" for s in rollouts),
        "timeouts": sum(s["verdict"]["status"] == "timeout" for s in rollouts),  # spent their CPU budget
        "token_cap_hits": sum(s["hit_token_cap"] for s in rollouts),
    }
    summary["any_of_k"] = summary["tasks_solved_any"] / n_tasks if n_tasks else 0.0
    summary["pass_at_k"] = {str(k): (sum(pass_at_k(samples, r["passed"], k) for r in rows) / n_tasks
                                     if n_tasks else 0.0) for k in ks}
    return summary


def evaluate(model: GLM53, tasks: list[Task], cfg: EvalConfig = EvalConfig(),
             pool: SandboxPool | None = None, accepted_partial: bool = False) -> dict:
    """Generate, verify and summarize. Returns {"summary", "by_family", "tasks": [...], "settings", "sandbox",
    ...}; `accepted_partial`: whether the caller accepted a sandbox below full isolation (sandbox_policy.py).
    A task whose prompt leaves no room in the model's context fails, each of its samples, and is listed by name
    (`prompts_past_context`): it is never truncated."""
    started = time.perf_counter()
    decoding = cfg.decoding
    too_long = prompts_past_context(model, tasks)
    kept = [t for t in tasks if t.task_id not in too_long]
    completions, precision = evaluation_completions(model, kept, decoding)
    given = dict(zip((t.task_id for t in kept), completions))
    context = model.config.max_sequence_length
    refusals = {task_id: Verdict("invalid", 0, 1, f"the prompt is {n} tokens and the model's context of {context} "
                                                  "leaves no room for a completion", "context")
                for task_id, n in too_long.items()}
    result = judge(tasks, given, cfg, pool, accepted_partial, past_context=refusals)
    result["settings"]["precision"] = precision
    return {**result, "elapsed_seconds": time.perf_counter() - started,
            "peak_memory_bytes": peak_memory_bytes(model.device)}


def judge(tasks: list[Task], completions: dict[str, list[dict]], cfg: EvalConfig = EvalConfig(),
          pool: SandboxPool | None = None, accepted_partial: bool = False,
          past_context: dict[str, Verdict] | None = None) -> dict:
    """Verify and summarize given completions: task id -> [{"completion", "token_ids", "hit_token_cap"}, ...] (the
    same number for every task), or for the tasks in `past_context` (prompts the context cannot hold) a verdict
    given without running anything.
    `glm53 eval --completions FILE` scores completions made elsewhere this way."""
    started = time.perf_counter()
    decoding, suite, refusals = cfg.decoding, get_suite(cfg.decoding.suite), past_context or {}
    samples = len(next(iter(completions.values()))) if completions else decoding.samples
    run = [t for t in tasks if t.task_id not in refusals]
    judged = dict(zip((t.task_id for t in run), verify_completions(
        run, [completions[t.task_id] for t in run], cfg.timeout_s, pool, suite.cpu_s)))
    blank = {"completion": "", "token_ids": [], "hit_token_cap": False}
    rows = []
    for task in tasks:
        group = judged.get(task.task_id) or [(blank, refusals[task.task_id])] * samples
        sample_rows = [{"completion": s["completion"], "token_ids": s["token_ids"], "hit_token_cap": s["hit_token_cap"],
                        "verdict": {**verdict.to_json(), "total_cases": len(task.cases)},
                        "reward": binary_reward(verdict)} for s, verdict in group]
        extra = {"depth": task.depth} if hasattr(task, "depth") else {}  # broad tasks: for per-depth tables
        rows.append({"task_id": task.task_id, "family": task.family, **extra, "prompt": task.prompt,
                     "entry_point": task.entry_point, "samples": sample_rows,
                     "passed": sum(r["verdict"]["status"] == "passed" for r in sample_rows)})
    return {
        **_summaries(rows, samples),
        "tasks": rows,
        "settings": {"samples": samples, "temperature": decoding.sampling.temperature, "seed": decoding.seed,
                     "max_new_tokens": decoding.sampling.max_new_tokens, "timeout_s": cfg.timeout_s,
                     "cpu_s": suite.cpu_s, "precision": None,
                     "greedy": samples == 1 and decoding.sampling.temperature <= 0},
        "prompts_past_context": [t.task_id for t in tasks if t.task_id in refusals],
        **suite.receipt(),  # the suite and its verifier level
        "sandbox": sandbox_record(accepted_partial, pool),
        "elapsed_seconds": time.perf_counter() - started,
    }


def prompts_past_context(model: GLM53, tasks: list[Task]) -> dict[str, int]:
    """task id -> prompt tokens (with BOS), for the tasks whose prompt leaves no room in the model's context."""
    context = model.config.max_sequence_length
    return {task_id: n for task_id, n in prompt_tokens(model.config, tasks).items() if n >= context}


def _summaries(rows: list[dict], samples: int) -> dict:
    # HumanEval reports pass@1, @10 and @100 (Chen et al. 2021); the powers of two serve the smaller studies
    ks = sorted({1, samples} | {k for k in (2, 4, 8, 10, 16, 32, 100) if k <= samples})
    by_family = defaultdict(list)
    for r in rows:
        by_family[r["family"]].append(r)
    return {"summary": _summary(rows, samples, ks),
            "by_family": {fam: _summary(fam_rows, samples, ks) for fam, fam_rows in by_family.items()}}


def subset(result: dict, task_ids) -> dict:
    """An evaluation's result restricted to some of its tasks (in its order), with its summaries recomputed:
    several splits scored in one call of `evaluate` (for larger decoding batches), reported one by one."""
    keep = set(task_ids)
    rows = [r for r in result["tasks"] if r["task_id"] in keep]
    return {**result, **_summaries(rows, result["settings"]["samples"]), "tasks": rows}


def format_summary(result: dict) -> str:
    s = result["summary"]
    head = (f"{'family':14s} {'solved':>8s} {'pass@1':>7s} {'exact':>9s} {'tests':>11s} {'valid':>9s} {'cap':>5s}")
    lines = [head]

    def line(name, x):
        return (f"{name:14s} {x['tasks_solved_any']:>3d}/{x['tasks']:<4d} {x['pass_at_k']['1']:7.3f} "
                f"{x['exact_rollouts']:>4d}/{x['rollouts']:<4d} {x['hidden_tests_passed']:>5d}/{x['hidden_tests']:<5d} "
                f"{x['valid_programs']:>4d}/{x['rollouts']:<4d} {x['token_cap_hits']:>5d}")

    for fam, x in result["by_family"].items():
        lines.append(line(fam, x))
    lines.append(line("all", s))
    if s["samples_per_task"] > 1:
        lines.append("pass@k (unbiased): " + ", ".join(f"k={k}: {v:.3f}" for k, v in s["pass_at_k"].items())
                     + f"; any-of-{s['samples_per_task']}: {s['any_of_k']:.3f}")
    return "\n".join(lines)
