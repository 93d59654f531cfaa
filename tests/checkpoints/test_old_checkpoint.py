"""Every checkpoint ever written still loads (issue 45): `written_at_8b0004b/checkpoint-0003` was written by
`save_checkpoint` at commit 8b0004b, before the checkpoint format moved to glm53/checkpoints/ (a 3,824-parameter
model, seed 45); `expected.json` holds what that commit's `load_model` computed from it."""

import json
import shutil
from pathlib import Path

import torch

from glm53.checkpoints.format import LoadedModel, load_model, read_metadata, weights_sha256
from glm53.checkpoints.names import checkpoint_name

OLD = Path(__file__).parent / "written_at_8b0004b"


def test_a_checkpoint_written_before_the_move_loads_verified_and_computes_what_it_did():
    expected = json.loads((OLD / "expected.json").read_text())
    folder = OLD / checkpoint_name(3)
    loaded = load_model(folder)
    assert isinstance(loaded, LoadedModel) and loaded.verified
    assert loaded.weights_sha256 == expected["weights_sha256"] == read_metadata(folder)["weights_sha256"]
    with torch.no_grad():
        logits = loaded.model(torch.tensor(expected["ids"]))[0, -1, :12]
    torch.testing.assert_close(logits, torch.tensor(expected["last_logits_first_12"]))


def test_the_old_checkpoint_is_still_checked_against_its_hashes(tmp_path):
    """Loading it is no blind read: a changed byte of its weights is refused."""
    folder = tmp_path / "checkpoint-0003"
    shutil.copytree(OLD / checkpoint_name(3), folder)
    data = bytearray((folder / "model.safetensors").read_bytes())
    data[-1] ^= 1
    (folder / "model.safetensors").write_bytes(bytes(data))
    try:
        load_model(folder)
    except ValueError as err:
        assert "does not match" in str(err)
    else:
        raise AssertionError("a damaged old checkpoint loaded")


def test_weights_sha256_names_the_weights_not_the_object():
    model = load_model(OLD / checkpoint_name(3)).model
    same = load_model(OLD / checkpoint_name(3)).model
    assert weights_sha256(model) == weights_sha256(same)
    with torch.no_grad():
        next(same.parameters()).add_(1e-3)
    assert weights_sha256(model) != weights_sha256(same)
    assert weights_sha256(model.to(torch.bfloat16)) != weights_sha256(same.to(torch.bfloat16))  # bf16 hashes too
