"""Two (or N) steps of TRL's GRPOTrainer on an exported glm53 model with glm53's sandboxed reward, then every reward
TRL was given checked against `glm53 verify` on the same completions (docs/trl.md).

    python scripts/trl_grpo_check.py EXPORTED TASKS_DATASET --out DIR [--steps 2] [--generations 4] [--prompts 2]

EXPORTED: a folder of `glm53 export --format transformers`; TASKS_DATASET: a folder of `glm53 tasks export --format
datasets`. Writes DIR/grpo (TRL's output), DIR/completions.jsonl (each completion as the reward ended it, with its
task's fields: `glm53 verify --in` reads it) and DIR/verified.jsonl; prints TRL's log rows and the agreement; exits 1
on any disagreement. Needs the hf extra (bash scripts/install.sh --hf).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


class Recording:
    """A reward function that keeps what TRL gave it and what the wrapped reward returned."""

    def __init__(self, function):
        self.function, self.__name__, self.calls = function, function.__name__, []

    def __call__(self, prompts, completions, **columns):
        rewards = self.function(prompts=prompts, completions=completions, **columns)
        self.calls.append((prompts, completions, columns, rewards))
        return rewards


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("exported")
    p.add_argument("tasks")
    p.add_argument("--out", required=True, help="folder to write (must not exist)")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--generations", type=int, default=4, help="completions a prompt (TRL's num_generations)")
    p.add_argument("--prompts", type=int, default=2, help="prompts a step")
    p.add_argument("--max-completion-length", type=int, default=48)
    args = p.parse_args()
    out = Path(args.out)
    if out.exists():
        sys.exit(f"{out} already exists; choose another --out")

    from datasets import load_from_disk
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from glm53.cli import main as glm53_main
    from glm53.data.tasks import task_from_json
    from glm53.interop.trl_reward import sandbox_reward
    from glm53.verify.rewards import reward
    from glm53.verify.verifier import Verdict

    model = AutoModelForCausalLM.from_pretrained(args.exported, trust_remote_code=True)
    tokenizer = AutoTokenizer.from_pretrained(args.exported, trust_remote_code=True)
    binary = Recording(sandbox_reward("binary"))
    config = GRPOConfig(output_dir=str(out / "grpo"), use_cpu=True, max_steps=args.steps, learning_rate=5e-5,
                        per_device_train_batch_size=args.prompts * args.generations,
                        num_generations=args.generations, max_completion_length=args.max_completion_length,
                        temperature=0.35, logging_steps=1, save_strategy="no", report_to="none", seed=0,
                        bf16=False, activation_checkpointing=False)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[binary], args=config,
                          train_dataset=load_from_disk(args.tasks))
    trainer.train()
    for entry in trainer.state.log_history:
        print(json.dumps({k: v for k, v in entry.items() if k in ("step", "loss", "reward", "reward_std",
                                                                   "rewards/glm53_binary/mean", "completion_length",
                                                                   "mean_terminated_length", "grad_norm")}))

    rows, given = [], []
    for prompts, completions, columns, rewards in binary.calls:
        for i, (prompt, completion, value) in enumerate(zip(prompts, completions, rewards)):
            # the dataset's columns: TRL passes them as lists beside its own arguments (trainer state, loggers)
            row = {name: column[i] for name, column in columns.items()
                   if isinstance(column, list) and len(column) == len(prompts) and name != "completion_ids"}
            row["cases"] = json.loads(row["cases"]) if isinstance(row["cases"], str) else row["cases"]
            task = task_from_json({**row, "prompt": prompt})
            rows.append({**task.to_json(), "completion": binary.function.stopped(task, completion)})
            given.append(value)
    (out / "completions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert glm53_main(["verify", "--in", str(out / "completions.jsonl"), "--out", str(out / "verified.jsonl")]) == 0
    verdicts = [Verdict(**json.loads(line)["verdict"]) for line in (out / "verified.jsonl").read_text().splitlines()]
    agree = sum(g == reward(v, "binary") for g, v in zip(given, verdicts))
    print(f"\n{trainer.state.global_step} GRPO steps; {agree}/{len(given)} rewards equal glm53 verify's verdicts "
          f"(binary); {sum(g == 1 for g in given)} of {len(given)} completions rewarded 1")
    return 0 if agree == len(given) and trainer.state.global_step == args.steps else 1


if __name__ == "__main__":
    sys.exit(main())
