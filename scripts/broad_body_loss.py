"""How well a checkpoint answers the broad suite's descriptions, as a smooth figure: the mean cross-entropy (nats a
byte) of the reference bodies of the first N dev tasks given their prompts, and, with --other-description, the
same with each prompt's comment lines taken from the next task (its `def` line kept). A model that reads the
description loses more when it is swapped; one that only learned what bodies look like loses about the same.

    python scripts/broad_body_loss.py runs/broad/pretrain/checkpoint-1200 [more checkpoints] [--tasks 64]
        [--other-description]

Used for docs/broad-run.md's recipe table, where pass@1 is still 0 and cannot tell pilots apart.
The per-split figure the pretraining studies use is glm53/evaluate/body_loss.py, which this script shares.
"""

from __future__ import annotations

import argparse

import torch

from glm53.data.broad.splits import frozen_broad_tasks
from glm53.evaluate.body_loss import body_nats
from glm53.checkpoints.format import load_model


def swapped_description(prompt: str, other: str) -> str:
    """`prompt` with its comment lines replaced by `other`'s (everything up to the last `def` line)."""
    return other.rsplit("\ndef ", 1)[0] + "\ndef " + prompt.rsplit("\ndef ", 1)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="+")
    parser.add_argument("--tasks", type=int, default=64, help="first N dev tasks (default: 64)")
    parser.add_argument("--other-description", action="store_true",
                        help="also score with each task's description swapped for the next task's")
    args = parser.parse_args()
    tasks = frozen_broad_tasks("dev", args.tasks)
    for path in args.checkpoints:
        model = load_model(path, "cpu").model.eval()
        own = other = 0.0
        targets = 0
        with torch.no_grad():
            for i, task in enumerate(tasks):
                nats, n = body_nats(model, task.prompt, task.body)
                own, targets = own + nats, targets + n
                if args.other_description:
                    prompt = swapped_description(task.prompt, tasks[(i + 1) % len(tasks)].prompt)
                    other += body_nats(model, prompt, task.body)[0]
        line = f"{path}: body loss {own / targets:.4f} nats a byte over {targets} bytes of {len(tasks)} dev tasks"
        print(line + (f"; with another task's description {other / targets:.4f}" if args.other_description else ""))


if __name__ == "__main__":
    main()
