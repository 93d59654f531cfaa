"""Check an exported folder against its checkpoint: the first N tasks of a split, completed greedily by glm53 and by
transformers' generate on the exported folder (docs/interop.md).

    python scripts/check_transformers_export.py CHECKPOINT EXPORTED [--split confirm] [--count 16] [--suite reference]

Two comparisons a task, both in float32:
- equal: transformers' new token ids equal glm53's greedy `generate(stop="eos")` ids, up to --max-new-tokens;
- prefix: the completion `glm53 generate --split` writes (stopped by the suite's rule) starts transformers' text.
Prints one row a task and a summary; exits 1 if any task differs. Needs the hf extra (bash scripts/install.sh --hf).
"""

from __future__ import annotations

import argparse
import sys

import torch


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint")
    p.add_argument("exported")
    p.add_argument("--split", default="confirm")
    p.add_argument("--suite", default=None)
    p.add_argument("--count", type=int, default=16, help="the split's first N tasks (default: 16)")
    p.add_argument("--max-new-tokens", type=int, default=48)
    args = p.parse_args()

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from glm53.checkpoints.format import load_model
    from glm53.data.suites import get_suite
    from glm53.decode.sampling import Sampling
    from glm53.decode.task_completions import sample_completions

    model = load_model(args.checkpoint).model.eval()
    suite = get_suite(args.suite)
    tasks = suite.tasks(args.split, None if args.split in suite.scored_whole else 8)[: args.count]
    hf_model = AutoModelForCausalLM.from_pretrained(args.exported, trust_remote_code=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(args.exported, trust_remote_code=True)
    greedy = Sampling(max_new_tokens=args.max_new_tokens)
    written = [rows[0]["completion"] for rows in sample_completions(model, tasks, 1, greedy, torch.Generator(),
                                                                     "fp32", suite=suite.name)]
    differ = 0
    print("| task | equal ids | written completion is a prefix | written completion |")
    print("|---|---|---|---|")
    for task, completion in zip(tasks, written):
        ours = model.generate(task.prompt, max_new_tokens=args.max_new_tokens, stop="eos")[0]
        encoded = tokenizer(task.prompt, return_tensors="pt")
        with torch.no_grad():
            out = hf_model.generate(**encoded, max_new_tokens=args.max_new_tokens, do_sample=False)
        new = out[0, encoded["input_ids"].shape[1]:].tolist()
        new = new[: new.index(tokenizer.eos_token_id) + 1] if tokenizer.eos_token_id in new else new
        text = tokenizer.decode(new, skip_special_tokens=True)
        equal, prefix = new == ours.token_ids, text.startswith(completion)
        differ += not (equal and prefix)
        print(f"| {task.task_id} | {'yes' if equal else 'NO'} | {'yes' if prefix else 'NO'} | `{completion!r}` |")
    print(f"\n{len(tasks) - differ}/{len(tasks)} tasks alike ({args.split}, {args.checkpoint} against {args.exported})")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
