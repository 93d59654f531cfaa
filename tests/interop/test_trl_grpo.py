"""Two steps of TRL's GRPOTrainer on CPU with glm53's sandbox as the reward: a tiny glm53 checkpoint exported with
`export_transformers`, loaded by transformers, trained on a split that `glm53 tasks export --format datasets` wrote,
as it is. The trainer takes both steps, its logged rewards are finite, and each reward it was given is the reward of
the verdict `glm53 verify` gives the text glm53's own generation would have judged for the same model output
(test_trl_reward.py's scripted generation)."""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("trl", reason="needs the hf extra: bash scripts/install.sh --hf")

from datasets import load_from_disk  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from glm53 import GLM53, ModelConfig  # noqa: E402
from glm53.checkpoints.format import save_checkpoint  # noqa: E402
from glm53.cli import main  # noqa: E402
from glm53.data.suites import get_suite  # noqa: E402
from glm53.interop.transformers_export import export_transformers  # noqa: E402
from glm53.interop.trl_reward import sandbox_reward  # noqa: E402
from glm53.verify.rewards import reward  # noqa: E402

from ..tiny import TINY  # noqa: E402
from .test_trl_reward import glm53_generation, glm53_verify  # noqa: E402

STEPS, GENERATIONS, PROMPTS_PER_STEP = 2, 2, 2


class Recording:
    """A reward function that records what TRL gave it and what the wrapped one returned, under its name."""

    def __init__(self, function):
        self.function, self.__name__, self.calls = function, function.__name__, []

    def __call__(self, prompts, completions, **columns):
        rewards = self.function(prompts=prompts, completions=completions, **columns)
        self.calls.append((prompts, completions, columns["task_id"], rewards))
        return rewards


@pytest.mark.slow
def test_two_grpo_steps_on_cpu_reward_what_glm53_verify_says(tmp_path):
    torch.manual_seed(0)
    # a large init, so that an untrained model's tokens vary; a context for a reference prompt and 16 new tokens
    config = ModelConfig(**{**TINY, "max_sequence_length": 128, "init_std": 0.3})
    save_checkpoint(tmp_path / "checkpoint", GLM53(config), {"stage": "pretrain", "step": 0, "seed": 0})
    folder = export_transformers(tmp_path / "checkpoint", tmp_path / "hf")
    model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
    tokenizer = AutoTokenizer.from_pretrained(folder)

    families = "increment,double,even,reverse"
    assert main(["tasks", "export", "--split", "rl", "--per-family", "1", "--families", families, "--format",
                 "datasets", "--out", str(tmp_path / "rl")]) == 0
    tasks = {t.task_id: t for t in get_suite("reference").tasks("rl", 1, families)}
    binary, partial = Recording(sandbox_reward("binary")), Recording(sandbox_reward("partial"))
    args = GRPOConfig(output_dir=str(tmp_path / "grpo"), use_cpu=True, max_steps=STEPS, learning_rate=1e-4,
                      per_device_train_batch_size=PROMPTS_PER_STEP * GENERATIONS, num_generations=GENERATIONS,
                      max_completion_length=16, temperature=1.0, logging_steps=1, save_strategy="steps",
                      save_steps=STEPS,
                      report_to="none", seed=0, dataloader_num_workers=0, bf16=False,
                      activation_checkpointing=False)  # TRL's default is on; the exported model does not offer it
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[binary, partial], args=args,
                          train_dataset=load_from_disk(str(tmp_path / "rl")))  # the split as it is
    trainer.train()

    assert trainer.state.global_step == STEPS
    saved = tmp_path / "grpo" / f"checkpoint-{STEPS}"  # Trainer's checkpoint loads as the exported folder does
    assert AutoModelForCausalLM.from_pretrained(saved, trust_remote_code=True).core.config == model.core.config
    logged = [entry for entry in trainer.state.log_history if "rewards/glm53_binary/mean" in entry]
    assert len(logged) == STEPS
    for entry in logged:
        assert all(math.isfinite(entry[key]) for key in ("reward", "rewards/glm53_binary/mean",
                                                         "rewards/glm53_partial/mean"))

    # each completion TRL generated, ended as glm53's generation ends a model writing it, judged by glm53 verify
    judged = [(task_id, prompt, completion, given) for prompts, completions, task_ids, rewards in binary.calls
              for prompt, completion, task_id, given in zip(prompts, completions, task_ids, rewards)]
    assert len(judged) == STEPS * PROMPTS_PER_STEP * GENERATIONS
    assert all(prompt == tasks[task_id].prompt for task_id, prompt, _, _ in judged)
    ended = [{**tasks[task_id].to_json(), "completion": glm53_generation(tasks[task_id], completion, "reference")}
             for task_id, _, completion, _ in judged]
    verdicts = glm53_verify(ended, tmp_path)
    assert [given for *_, given in judged] == [reward(v, "binary") for v in verdicts]
    partial_given = [r for *_, rewards in partial.calls for r in rewards]
    assert partial_given == [reward(v, "partial") for v in verdicts]
