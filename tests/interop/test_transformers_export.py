"""glm53 export --format transformers: the folder transformers loads gives glm53's ids, logits and greedy completions,
with the cache and without, one prompt at a time and left-padded in a batch, through generate and the pipeline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers", reason="needs the hf extra: bash scripts/install.sh --hf")

from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline  # noqa: E402

from glm53 import GLM53, ModelConfig  # noqa: E402
from glm53.checkpoints.format import save_checkpoint  # noqa: E402
from glm53.data.bpe_tokenizer import tokenizer_for  # noqa: E402
from glm53.interop.transformers_export import export_transformers  # noqa: E402
from glm53.interop.transformers_tokenizer import tokenizer_files  # noqa: E402

from ..tiny import TINY  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TEXTS = ["def f(x):\n    return x + 1\n", "é ü 中文 <eos> tab\t\n\n  x<pad><bos>", "", "    '''doc'''\n", "\x00\x7f",
         "# Complete this Python function.\n# add one\ndef g(y):"]
PROMPTS = ["def f(x):\n    return", "# Complete this Python function.\n# add one to y\ndef g(y):", "x", "\n\n"]
NEW_TOKENS = 10
RELEASED = dict(linear_attention="kda", sparse_selection="indexer", residual="mhc", router="sigmoid-bias",
                tie_embeddings=False, mtp_depth=1)


def _config(tokenizer: str = "byte", **switches) -> ModelConfig:
    vocab = {} if tokenizer == "byte" else {"tokenizer": tokenizer, "vocab_size": int(tokenizer.rsplit("-", 1)[1])}
    # a large init, so that an untrained model's greedy tokens vary (at 0.02 it repeats its input token)
    return ModelConfig(**{**TINY, **vocab, "max_sequence_length": 96, "init_std": 0.3, **switches})


def _exported(tmp_path: Path, config: ModelConfig) -> tuple[GLM53, Path]:
    torch.manual_seed(0)
    model = GLM53(config).eval()
    save_checkpoint(tmp_path / "checkpoint", model, {"stage": "pretrain", "step": 0, "seed": 0})
    return model, export_transformers(tmp_path / "checkpoint", tmp_path / "hf")


def _load(folder: Path):
    return (AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).eval(),
            AutoTokenizer.from_pretrained(folder))


def _glm53_ids(model: GLM53, prompts: list[str]) -> list[list[int]]:
    """glm53's greedy token ids, EOS included where a row stopped there."""
    return [g.token_ids for g in model.generate(prompts, max_new_tokens=NEW_TOKENS, stop="eos")]


def _new_ids(row: torch.Tensor, start: int, eos: int = 2) -> list[int]:
    ids = row[start:].tolist()
    return ids[: ids.index(eos) + 1] if eos in ids else ids


@pytest.mark.parametrize("name", ["byte", "broad-bpe-1024", "broad-bpe-2048", "code-bpe-2048"])
def test_the_tokenizer_gives_glm53s_ids_and_text(tmp_path, name):
    for file, text in tokenizer_files(name, 96).items():
        (tmp_path / file).write_text(text)
    tokenizer, ours = AutoTokenizer.from_pretrained(tmp_path), tokenizer_for(name)
    for text in TEXTS:
        assert tokenizer(text)["input_ids"] == ours.encode(text, bos=True), (name, text)
        assert tokenizer.decode(ours.encode(text), skip_special_tokens=True) == text
    assert (tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id) == (1, 2, 0)
    assert tokenizer.padding_side == "left"


@pytest.mark.parametrize("name", ["byte", "broad-bpe-2048", "code-bpe-2048"])
def test_greedy_generate_equals_glm53_generate(tmp_path, name):
    model, folder = _exported(tmp_path, _config(name))
    hf_model, tokenizer = _load(folder)
    expected = _glm53_ids(model, PROMPTS)
    assert len({tuple(ids) for ids in expected}) > 1  # the check compares varied completions, not one repeated token
    for prompt, ids in zip(PROMPTS, expected):
        encoded = tokenizer(prompt, return_tensors="pt")
        out = hf_model.generate(**encoded, max_new_tokens=NEW_TOKENS, do_sample=False)
        assert _new_ids(out[0], encoded["input_ids"].shape[1]) == ids, prompt
    batch = tokenizer(PROMPTS, return_tensors="pt", padding=True)  # left-padded: rows of unequal length together
    cached = hf_model.generate(**batch, max_new_tokens=NEW_TOKENS, do_sample=False)
    uncached = hf_model.generate(**batch, max_new_tokens=NEW_TOKENS, do_sample=False, use_cache=False)
    width = batch["input_ids"].shape[1]
    assert [_new_ids(row, width) for row in cached] == expected
    assert torch.equal(cached, uncached)
    texts = tokenizer.batch_decode([_new_ids(row, width) for row in cached], skip_special_tokens=True)
    assert texts == [g.completion for g in model.generate(PROMPTS, max_new_tokens=NEW_TOKENS, stop="eos")]


def test_the_pipeline_and_beam_search_run_on_the_cache(tmp_path):
    model, folder = _exported(tmp_path, _config())
    hf_model, tokenizer = _load(folder)
    generator = pipeline("text-generation", model=hf_model, tokenizer=tokenizer)
    out = generator(PROMPTS[:2], max_new_tokens=NEW_TOKENS, do_sample=False, return_full_text=False)
    expected = [g.completion for g in model.generate(PROMPTS[:2], max_new_tokens=NEW_TOKENS, stop="eos")]
    assert [row[0]["generated_text"] for row in out] == expected
    encoded = tokenizer(PROMPTS[0], return_tensors="pt")
    beams = [hf_model.generate(**encoded, max_new_tokens=6, num_beams=3, do_sample=False, use_cache=cache)
             for cache in (True, False)]
    assert torch.equal(*beams)  # the cache's rows follow the beams (reorder_cache)


def test_the_released_switches_export_and_decode_alike(tmp_path):
    model, folder = _exported(tmp_path, _config(**RELEASED))
    hf_model, tokenizer = _load(folder)
    batch = tokenizer(PROMPTS, return_tensors="pt", padding=True)
    out = hf_model.generate(**batch, max_new_tokens=NEW_TOKENS, do_sample=False)
    assert [_new_ids(row, batch["input_ids"].shape[1]) for row in out] == _glm53_ids(model, PROMPTS)


def test_padded_rows_score_as_unpadded_and_labels_give_the_loss(tmp_path):
    model, folder = _exported(tmp_path, _config())
    hf_model, _ = _load(folder)
    ids = torch.randint(4, 260, (1, 12))
    plain = model(ids)
    # the same tokens behind 3 pads on the left and before 2 on the right, as a TRL batch holds prompt + completion
    padded = torch.cat([torch.zeros(1, 3, dtype=torch.long), ids, torch.zeros(1, 2, dtype=torch.long)], dim=1)
    mask = torch.cat([torch.zeros(1, 3), torch.ones(1, 12), torch.zeros(1, 2)], dim=1).long()
    out = hf_model(input_ids=padded, attention_mask=mask)
    assert torch.allclose(out.logits[:, 3:15], plain, atol=1e-5)
    labels = ids.clone()
    loss = hf_model(input_ids=ids, labels=labels).loss
    expected = torch.nn.functional.cross_entropy(plain[0, :-1], ids[0, 1:])
    assert torch.allclose(loss, expected, atol=1e-5)
    with pytest.raises(ValueError, match="not one run"):
        hf_model(input_ids=ids, attention_mask=torch.tensor([[1] * 5 + [0] + [1] * 6]))


def test_the_folder_records_where_it_came_from_and_is_never_overwritten(tmp_path):
    model, folder = _exported(tmp_path, _config())
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "glm53" and config["auto_map"]["AutoModelForCausalLM"].startswith("modeling_glm53")
    assert config["glm53"]["init_std"] == 0.3
    meta = json.loads((folder / "metadata.json").read_text())
    recorded = json.loads((tmp_path / "checkpoint" / "metadata.json").read_text())["weights_sha256"]
    assert meta["checkpoint_weights_sha256"] == recorded and meta["format"] == "transformers"
    generation = json.loads((folder / "generation_config.json").read_text())
    assert [0] in generation["bad_words_ids"] and [2] not in generation["bad_words_ids"]  # EOS stays allowed
    before = sorted(p.name for p in folder.iterdir())
    with pytest.raises(FileExistsError, match="never overwrites"):
        export_transformers(tmp_path / "checkpoint", folder)
    assert sorted(p.name for p in folder.iterdir()) == before


def test_the_command_writes_the_folder_and_refuses_without_the_extra(tmp_path):
    _exported(tmp_path, _config())
    done = subprocess.run([sys.executable, "-m", "glm53", "export", str(tmp_path / "checkpoint"), "--format",
                           "transformers", "--out", str(tmp_path / "cli")], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "cli" / "modeling_glm53.py").is_file() and (tmp_path / "cli" / "tokenizer.json").is_file()
    hide = ("import importlib.util, sys; real = importlib.util.find_spec; "
            "importlib.util.find_spec = lambda n, *a: None if n == 'transformers' else real(n, *a); "
            "from glm53.cli import main; sys.exit(main())")
    refused = subprocess.run([sys.executable, "-c", hide, "export", str(tmp_path / "checkpoint"), "--format",
                              "transformers", "--out", str(tmp_path / "none")], capture_output=True, text=True,
                             cwd=ROOT)
    assert refused.returncode != 0 and "install.sh --hf" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert not (tmp_path / "none").exists()


def test_a_folder_whose_weights_do_not_fit_is_refused_not_loaded_as_noise(tmp_path):
    from safetensors.torch import load_file, save_file

    _, folder = _exported(tmp_path, _config())
    weights = load_file(str(folder / "model.safetensors"))
    weights.pop("model.glm53.final_norm.weight")  # a weight transformers would leave uninitialized, with a warning
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ValueError, match="missing keys: model.glm53.final_norm.weight") as refused:
        AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
    assert "\n" not in str(refused.value) and "glm53 export --format transformers" in str(refused.value)


def test_a_loaded_model_saves_again_and_the_save_loads_alike(tmp_path):
    """save_pretrained (what Trainer's checkpoints and push_to_hub call) writes the code files as the export does,
    not a copy of glm53's module whose imports would not resolve there."""
    model, folder = _exported(tmp_path, _config())
    hf_model, tokenizer = _load(folder)
    hf_model.save_pretrained(tmp_path / "saved")
    tokenizer.save_pretrained(tmp_path / "saved")
    assert "from glm53.interop.transformers_model import" in (tmp_path / "saved" / "modeling_glm53.py").read_text()
    assert not (tmp_path / "saved" / "transformers_model.py").exists()
    again, tokenizer = _load(tmp_path / "saved")
    batch = tokenizer(PROMPTS, return_tensors="pt", padding=True)
    out = again.generate(**batch, max_new_tokens=NEW_TOKENS, do_sample=False)
    assert [_new_ids(row, batch["input_ids"].shape[1]) for row in out] == _glm53_ids(model, PROMPTS)
    assert json.loads((tmp_path / "saved" / "generation_config.json").read_text())["top_k"] == 0


def test_the_loss_honours_trainers_token_count_and_packing_is_refused(tmp_path):
    model, folder = _exported(tmp_path, _config())
    hf_model, _ = _load(folder)
    ids = torch.randint(4, 260, (2, 12))
    labels = ids.clone()
    labels[0, :5] = -100
    summed = torch.nn.functional.cross_entropy(model(ids)[:, :-1].reshape(-1, 260), labels[:, 1:].reshape(-1),
                                               ignore_index=-100, reduction="sum")
    # Trainer under gradient accumulation: the count of the whole accumulated batch's labelled tokens
    loss = hf_model(input_ids=ids, labels=labels, num_items_in_batch=40).loss
    assert torch.allclose(loss, summed / 40, atol=1e-5)
    assert torch.allclose(hf_model(input_ids=ids, labels=labels).loss, summed / 18, atol=1e-5)  # 7 + 11 labelled
    left_padded_positions = torch.tensor([[0, 0, 1, 2], [0, 1, 2, 3]])  # what generate derives from the mask
    hf_model(input_ids=ids[:, :4], attention_mask=torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]]),
             position_ids=left_padded_positions)
    for packed in ({"position_ids": torch.tensor([[0, 1, 2, 0, 1, 2]] * 2)},
                   {"cu_seq_lens_q": torch.tensor([0, 3, 6])}):
        with pytest.raises(ValueError, match="one document a row") as refused:
            hf_model(input_ids=ids[:, :6], **packed)
        assert "\n" not in str(refused.value)


def test_a_prompt_past_the_context_is_refused_before_decoding(tmp_path):
    _, folder = _exported(tmp_path, _config())
    hf_model, tokenizer = _load(folder)
    encoded = tokenizer("x" * 90, return_tensors="pt")  # 91 ids with BOS, in a context of 96
    with pytest.raises(ValueError, match="lower max_new_tokens to at most 5") as refused:
        hf_model.generate(**encoded, max_new_tokens=6, do_sample=False)
    assert "\n" not in str(refused.value)
    assert hf_model.generate(**encoded, max_new_tokens=5, do_sample=False).shape[1] <= 96
