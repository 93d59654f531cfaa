"""`glm53 export CHECKPOINT --out DIR`: a weights-only folder with a model card, loadable with
`GLM53.from_pretrained(DIR)` (and by glm53's commands, checked against the hashes in its metadata.json) and
ready for `push_to_hub`.

The card is built from what the run left beside the checkpoint: the checkpoint's metadata.json (stage, step,
tokens, seed, parameter counts), the run folder's run.json and training receipt (data, steps, the sandbox level of
the rewards), and, for a checkpoint of the main job, its run receipt (pass@1 before and after RL). Nothing on the
card is typed by hand: a figure the run did not record is written as "not recorded". The optimizer state is not
exported: an exported model cannot be resumed, only loaded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..runtime.files import AtomicDirectory, atomic_write_json, atomic_write_text, refuse_unwritable, sha256_file
from .format import load_model
from .names import METADATA_NAME, RECEIPT_NAME, RUN_CONFIG_NAME, WEIGHTS_NAME

CARD_NAME = "README.md"
MAIN_JOB_RECEIPT = "run-receipt.json"


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def gather_card_facts(checkpoint: Path) -> dict:
    """What the run recorded about this checkpoint (empty dicts where a file is absent)."""
    run = checkpoint.parent
    return {"metadata": _read_json(checkpoint / METADATA_NAME), "run": _read_json(run / RUN_CONFIG_NAME),
            "receipt": _read_json(run / RECEIPT_NAME), "main_job": _read_json(run.parent / MAIN_JOB_RECEIPT)}


def _sandbox_line(receipt: dict) -> str:
    sandbox = receipt.get("sandbox")
    if not isinstance(sandbox, dict):
        return "not recorded"
    layers = ", ".join(f"{k}: {v}" for k, v in sandbox.items() if k != "level")
    return f"level {sandbox.get('level', 'not recorded')} ({layers})"


def _results_lines(main_job: dict, checkpoint: Path) -> list[str]:
    """The main job's confirm split, when this checkpoint is one of the two it compared."""
    confirm, chosen = main_job.get("confirm"), main_job.get("selected_rl_checkpoint")
    if not isinstance(confirm, dict) or not chosen:
        return ["not recorded for this checkpoint (export a checkpoint of `glm53 run` to see its evaluation here)"]
    which = ("after RL" if checkpoint.name == Path(chosen).name and checkpoint.parent.name == "rl"
             else "before RL" if str(checkpoint).endswith(str(main_job.get("rl_start_checkpoint", "\0"))) else None)
    return ["| confirm split, greedy pass@1 | before RL | after RL |", "|---|---|---|",
            f"| tasks solved | {confirm['before_all']}/{confirm['tasks']} | "
            f"{confirm['after_all']}/{confirm['tasks']} |",
            "", f"McNemar p = {confirm.get('mcnemar_p', 'not recorded')}; this checkpoint is the model "
            + (which if which else "of neither column") + "."]


def model_card(model, facts: dict, source: Path) -> str:
    """The card's Markdown, with the Hub's metadata block first."""
    meta, run, receipt = facts["metadata"], facts["run"], facts["receipt"]
    counts = model.parameter_counts()
    config = model.config.to_dict() if hasattr(model.config, "to_dict") else dict(vars(model.config))
    stage = meta.get("stage", "not recorded")
    step = meta.get("step", meta.get("group", "not recorded"))
    tokens = meta.get("tokens_seen", "not recorded")
    suite = run.get("suite", "reference")
    data = (f"generated Python functions ({suite} suite)" if "pretrain" in stage or stage == "random_initialization"
            else f"RL on the {suite} suite's tasks, from {meta.get('initial_checkpoint', 'not recorded')}")
    rewarded = stage in ("executable_reward_rl", "pre_rl")
    lines = [
        "---", "library_name: glm53", "tags: [glm53, code, tiny, cpu]", "license: mit", "---", "",
        f"# {source.name}: a glm53 model", "",
        "A tiny GLM-5.3-Flash-style language model trained from scratch with glm53 ("
        + ("byte tokenizer" if config.get("tokenizer", "byte") == "byte" else
           f"the {config['tokenizer']} byte-pair tokenizer, which glm53 ships") + "). "
        "Load it with `from glm53 import GLM53; GLM53.from_pretrained(folder)`.", "",
        "## Architecture", "",
        f"- {counts.get('total', sum(p.numel() for p in model.parameters())):,} parameters "
        + ", ".join(f"{k} {v:,}" for k, v in counts.items() if k != "total"),
        "- config: " + ", ".join(f"{k}={v}" for k, v in sorted(config.items())), "",
        "## Training", "",
        f"- stage: {stage}, step {step}, tokens seen {tokens}, "
        f"seed {meta.get('seed', run.get('seed', 'not recorded'))}",
        f"- data: {data}",
        f"- weights sha256: {meta.get('weights_sha256', 'not recorded')} (of the exported model.safetensors too)",
        f"- sandbox of the rewards: {_sandbox_line(receipt) if rewarded else 'none (no rewards in this stage)'}",
        "",
        "## Evaluation", "", *_results_lines(facts["main_job"], source), "",
        "## Intended use and limits", "",
        "For learning and research on how small models learn to write code: it completes short Python functions "
        "described in a comment, in the shape of glm53's task prompts. It is not a general assistant, knows no "
        "natural language beyond its training prompts, and its code must be run only in a sandbox such as "
        "glm53's verifier.", "",
    ]
    return "\n".join(lines)


def export_model(checkpoint: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Write `out` (refused if it exists; missing folders above it are made) with model.safetensors, config.json
    and the card; returns `out`."""
    checkpoint, out = Path(checkpoint), Path(out)
    if out.exists():
        raise FileExistsError(f"{out} already exists; glm53 never overwrites results. Choose another --out")
    refuse_unwritable(out)  # one line naming the folder that refuses, before the checkpoint is read
    model = load_model(checkpoint).model  # checks the weights against metadata.json
    facts = gather_card_facts(checkpoint)
    with AtomicDirectory(out) as tmp:
        model.save_pretrained(tmp)
        atomic_write_text(tmp / CARD_NAME, model_card(model, facts, checkpoint), overwrite=True)
        # the hashes, so that glm53's own commands load the export checked, as they load a checkpoint
        meta = facts["metadata"]
        atomic_write_json(tmp / METADATA_NAME, {"exported_from": str(checkpoint), "stage": meta.get("stage"),
                                                "step": meta.get("step", meta.get("group")),
                                                "weights_sha256": sha256_file(tmp / WEIGHTS_NAME),
                                                "config_sha256": sha256_file(tmp / "config.json"),
                                                "parameter_counts": model.parameter_counts()}, overwrite=True)
    if facts["metadata"].get("weights_sha256") not in (None, sha256_file(out / WEIGHTS_NAME)):
        raise RuntimeError(f"{out / WEIGHTS_NAME} differs from the checkpoint's weights")  # a save must be exact
    return out
