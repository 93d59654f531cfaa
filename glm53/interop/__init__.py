"""Interop with the Hugging Face ecosystem: glm53's models, rewards and tasks where transformers, TRL and datasets
users work. Everything here needs the hf extra (bash scripts/install.sh --hf); the core never imports it.

Reading order:
    transformers_tokenizer.py  glm53's tokenizers as a tokenizer.json that PreTrainedTokenizerFast loads
    transformers_model.py      GLM53Config and GLM53ForCausalLM: glm53's model behind transformers' interfaces
    transformers_export.py     glm53 export --format transformers: the folder AutoModelForCausalLM loads
    trl_reward.py              glm53's sandboxed verifier as a reward function for TRL's trainers
    datasets_io.py             tasks and corpora as datasets (save_to_disk, parquet), read back by --tasks and
                               --corpus
"""

from __future__ import annotations

import importlib.util

HF_EXTRA = "bash scripts/install.sh --hf (or pip install 'glm53[hf]')"


def require_hf(what: str, packages: tuple[str, ...] = ("transformers",)) -> None:
    """One line naming the missing package and the install command, before anything is written."""
    missing = [name for name in packages if importlib.util.find_spec(name) is None]
    if missing:
        raise ValueError(f"{what} needs {', '.join(missing)}, from the hf extra: {HF_EXTRA}")
