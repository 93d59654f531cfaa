"""`glm53 export CHECKPOINT --format transformers --out DIR`: a folder that transformers loads.

    model = AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True)
    tokenizer = AutoTokenizer.from_pretrained(DIR)

It holds config.json (model_type glm53, auto_map to the two code files), configuration_glm53.py and
modeling_glm53.py, model.safetensors, generation_config.json (glm53's special ids, and the ids glm53 never generates
as bad_words_ids, so transformers' greedy search chooses as glm53's does), the tokenizer (transformers_tokenizer.py),
the model card of `glm53 export` and metadata.json with the sha256 of the weights and of the source checkpoint's.

The code files import the installed glm53 rather than carry a copy of the model. glm53's model is a dozen files with
a fast and a plain form of each part and the released model's switches; a copy in one file would be a second model
to keep equal to the first, and a copy that drifted would load the same weights as another model without a word.
Importing it keeps one model, whose completions the tests compare with transformers' `generate`; the price is that a
reader needs `pip install glm53` (the version is in config.json), which transformers asks for by name when it is
absent. Optimizer state is not exported (an exported model cannot be resumed).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from safetensors.torch import save_file

from .. import __version__
from ..checkpoints.export import CARD_NAME, gather_card_facts, model_card
from ..checkpoints.format import load_model
from ..checkpoints.names import METADATA_NAME, WEIGHTS_NAME
from ..data.bpe_tokenizer import tokenizer_for
from ..decode.generate import banned_ids
from ..runtime.files import AtomicDirectory, atomic_write_json, atomic_write_text, refuse_unwritable, sha256_file
from . import require_hf
from .transformers_tokenizer import SPECIAL_IDS, tokenizer_files


def export_transformers(checkpoint: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Write `out` (refused if it exists) as the folder the module docstring describes; returns `out`."""
    require_hf("glm53 export --format transformers")  # one line, before anything is read or written
    from .transformers_model import AUTO_MAP, GLM53Config, GLM53ForCausalLM, write_code_files

    checkpoint, out = Path(checkpoint), Path(out)
    if out.exists():
        raise FileExistsError(f"{out} already exists; glm53 never overwrites results. Choose another --out")
    refuse_unwritable(out)
    loaded = load_model(checkpoint)  # the weights checked against the checkpoint's metadata.json
    model, config = loaded.model, loaded.model.config
    tokenizer = tokenizer_for(config)
    wrapped = GLM53ForCausalLM(GLM53Config.from_glm53(config, __version__))
    wrapped.core.load_state_dict(model.state_dict())
    wrapped.config.auto_map = AUTO_MAP
    wrapped.config.architectures = ["GLM53ForCausalLM"]
    # top_k 0: sampling draws from every id, as glm53's does (transformers' own default keeps the top 50)
    generation = {**SPECIAL_IDS, "bad_words_ids": [[i] for i in banned_ids(model, tokenizer)],
                  "do_sample": False, "max_new_tokens": 48, "top_k": 0}
    facts = gather_card_facts(checkpoint)
    with AtomicDirectory(out) as tmp:
        # written directly, not by save_pretrained: once a folder's code has been loaded with trust_remote_code in
        # this process, transformers' save would copy that code's sources (and their relative imports) instead
        save_file({name: tensor.contiguous() for name, tensor in wrapped.state_dict().items()},
                  str(tmp / WEIGHTS_NAME), metadata={"format": "pt"})
        atomic_write_text(tmp / "config.json", wrapped.config.to_json_string(), overwrite=True)
        atomic_write_json(tmp / "generation_config.json", generation, overwrite=True)
        for name, text in tokenizer_files(config.tokenizer, config.max_sequence_length).items():
            atomic_write_text(tmp / name, text + "\n", overwrite=True)
        write_code_files(tmp, __version__)
        atomic_write_text(tmp / CARD_NAME, transformers_card(model_card(model, facts, checkpoint)), overwrite=True)
        atomic_write_json(tmp / METADATA_NAME, {"exported_from": str(checkpoint), "format": "transformers",
                                                "glm53_version": __version__,
                                                "checkpoint_weights_sha256": loaded.weights_sha256,
                                                "weights_sha256": sha256_file(tmp / WEIGHTS_NAME)}, overwrite=True)
    return out


def transformers_card(card: str) -> str:
    """`glm53 export`'s card, told how transformers loads the folder."""
    card = card.replace("library_name: glm53", "library_name: transformers\npipeline_tag: text-generation")
    how = ("Load it with transformers (the code files import the installed glm53: `pip install glm53`):\n\n"
           "```python\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n"
           "model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)\n"
           "tokenizer = AutoTokenizer.from_pretrained(folder)\n```\n\n## Architecture")
    return card.replace("## Architecture", how, 1)


def read_export_metadata(folder: str | os.PathLike) -> dict:
    return json.loads((Path(folder) / METADATA_NAME).read_text())
