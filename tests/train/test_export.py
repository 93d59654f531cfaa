"""`glm53 export`: a weights-only folder with a model card built from the run's records, loadable with
GLM53.from_pretrained, pushable with push_to_hub (tested offline against a local folder)."""

import json
import subprocess
import sys

import pytest
import torch

from glm53 import GLM53
from glm53.checkpoints.format import load_model, read_metadata
from glm53.checkpoints.export import export_model
from glm53.train.pretrain import pretrain

from .test_pretrain import tiny_run


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "pretrain"
    pretrain(tiny_run(out, steps=2, checkpoints=(2,)), log=lambda *_: None)
    return out / "checkpoint-0002"


@pytest.mark.slow
def test_export_writes_a_loadable_weights_only_folder_with_a_card(checkpoint, tmp_path):
    out = export_model(checkpoint, tmp_path / "exported")
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "config.json", "metadata.json", "model.safetensors"]
    card = (out / "README.md").read_text()
    meta = read_metadata(checkpoint)
    assert "library_name: glm53" in card and meta["weights_sha256"] in card
    assert "stage: coding_pretraining, step 2" in card and "Intended use and limits" in card
    assert f"{GLM53.from_pretrained(out).parameter_counts()['total']:,} parameters" in card
    ids = torch.tensor([[1, 70, 71, 72]])
    torch.testing.assert_close(GLM53.from_pretrained(out)(ids), load_model(checkpoint).model(ids))
    # checked by its own hashes
    torch.testing.assert_close(load_model(out).model(ids), load_model(checkpoint).model(ids))


@pytest.mark.slow
def test_an_edited_config_or_missing_metadata_does_not_load_silently(checkpoint, tmp_path, capsys):
    import shutil

    edited = tmp_path / "edited"
    shutil.copytree(checkpoint, edited)
    config = json.loads((edited / "config.json").read_text())
    (edited / "config.json").write_text(json.dumps({**config, "hc_double_residual": not config["hc_double_residual"]}))
    with pytest.raises(ValueError, match="differs from the config these weights were saved with"):
        load_model(edited)
    bare = tmp_path / "bare"
    shutil.copytree(checkpoint, bare)
    (bare / "metadata.json").unlink()
    with pytest.raises(ValueError, match="has no metadata.json, so its weights and config cannot be checked"):
        load_model(bare)
    assert not load_model(bare, trust_unverified=True).verified and load_model(checkpoint).verified
    assert "loaded unchecked, as --trust-unverified asked" in capsys.readouterr().err
    # export never turns an unchecked folder into a checked one
    with pytest.raises(ValueError, match="--trust-unverified"):
        export_model(bare, tmp_path / "laundered")


@pytest.mark.slow
def test_export_refuses_an_existing_folder_before_writing(checkpoint, tmp_path):
    (tmp_path / "taken").mkdir()
    with pytest.raises(FileExistsError, match="never overwrites"):
        export_model(checkpoint, tmp_path / "taken")
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(ValueError, match="is a file, not a folder"):  # refused before the checkpoint is read
        export_model(checkpoint, tmp_path / "a-file" / "out")
    # a missing folder above --out is made, as every other command makes it (issue 44: it said PermissionError)
    assert (export_model(checkpoint, tmp_path / "missing-parent" / "out") / "model.safetensors").is_file()


@pytest.mark.slow
def test_export_refuses_tampered_weights(checkpoint, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(checkpoint, copy)
    data = bytearray((copy / "model.safetensors").read_bytes())
    data[-1] ^= 1
    (copy / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ValueError):
        export_model(copy, tmp_path / "never")
    assert not (tmp_path / "never").exists()


@pytest.mark.slow
def test_push_to_hub_uploads_the_exported_folder(checkpoint, tmp_path, monkeypatch):
    """Offline: the Hub client's upload is redirected into a local folder, which then loads as the model."""
    import shutil

    import huggingface_hub

    remote = tmp_path / "remote"

    def fake_upload_folder(self, *, repo_id, folder_path, **kw):
        shutil.copytree(folder_path, remote / repo_id)
        return "local://" + repo_id

    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo",
                        lambda self, repo_id, **kw: huggingface_hub.RepoUrl(f"https://huggingface.co/{repo_id}"))
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", fake_upload_folder)
    model = GLM53.from_pretrained(export_model(checkpoint, tmp_path / "exported"))
    model.push_to_hub("someone/tiny-glm53", token="offline")
    pushed = GLM53.from_pretrained(remote / "someone/tiny-glm53")
    assert json.loads((remote / "someone/tiny-glm53" / "config.json").read_text())["dim"] == model.config.dim
    for a, b in zip(pushed.state_dict().values(), model.state_dict().values()):
        torch.testing.assert_close(a, b)


@pytest.mark.slow
def test_the_cli_exports_and_prints_a_version(checkpoint, tmp_path):
    done = subprocess.run([sys.executable, "-m", "glm53", "export", str(checkpoint), "--out", str(tmp_path / "x")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "x" / "README.md").is_file()
    version = subprocess.run([sys.executable, "-m", "glm53", "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("glm53 0.")
