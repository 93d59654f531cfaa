"""--resume loads a checkpoint's trainer_state.pt (issue 62): as tensors and plain values only, so a pickle in a
poisoned run folder never runs, and checked against the sha256 its metadata.json recorded, so a changed byte is
refused. A checkpoint written before the hash was recorded still resumes (loaded weights_only)."""

import json
import struct
import zipfile

import pytest
import torch

from glm53.train.pretrain import pretrain

from .test_pretrain import losses, tiny_run


class Payload:
    """What a poisoned state could carry: unpickling it calls exec, which leaves a marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').close()",)


@pytest.fixture
def stopped(tmp_path):
    """A run stopped right after its checkpoint at step 2 (of 4)."""
    out = tmp_path / "run"
    pretrain(tiny_run(out, steps=2, checkpoints=(2,)), dev_tasks=[], log=lambda *_: None)
    (out / "training-receipt.json").unlink()
    return out


def resume(out):
    return pretrain(tiny_run(out, steps=4, checkpoints=(2, 4), resume=True), dev_tasks=[], log=lambda *_: None)


def set_recorded_hash(checkpoint, sha):
    """As a poisoner who can write the run folder would: metadata.json is a file there too."""
    meta = json.loads((checkpoint / "metadata.json").read_text())
    if sha is None:
        meta.pop("trainer_state_sha256")
    else:
        meta["trainer_state_sha256"] = sha
    (checkpoint / "metadata.json").write_text(json.dumps(meta))


@pytest.mark.slow
@pytest.mark.parametrize("recorded", ["matching", "absent"])
def test_a_poisoned_trainer_state_is_refused_and_its_payload_never_runs(stopped, tmp_path, recorded):
    from glm53.runtime.files import sha256_file

    checkpoint, marker = stopped / "checkpoint-0002", tmp_path / "payload-ran"
    state_file = checkpoint / "trainer_state.pt"
    state = torch.load(state_file, weights_only=True)
    torch.save({**state, "note": Payload(marker)}, state_file)  # still a whole state: the old load ran it, resumed
    set_recorded_hash(checkpoint, sha256_file(state_file) if recorded == "matching" else None)
    with pytest.raises(ValueError, match=r"trainer_state.pt cannot be read as tensors and plain values .*would run as "
                                         r"code\. Delete this checkpoint folder"):
        resume(stopped)
    assert not marker.exists()


@pytest.mark.slow
def test_a_changed_byte_in_the_trainer_state_is_refused_by_its_hash(stopped):
    state_file = stopped / "checkpoint-0002" / "trainer_state.pt"
    data = bytearray(state_file.read_bytes())
    # a byte in the middle of the largest tensor's storage: it loaded silently before (the zip holds it unchecked)
    largest = max(zipfile.ZipFile(state_file).infolist(), key=lambda info: info.file_size)
    name_length, extra_length = struct.unpack("<HH", data[largest.header_offset + 26:largest.header_offset + 30])
    data[largest.header_offset + 30 + name_length + extra_length + largest.file_size // 2] ^= 0x40
    state_file.write_bytes(data)
    with pytest.raises(ValueError, match=r"trainer_state.pt: its sha256 does not match the one recorded in "
                                         r"metadata.json; .*Delete this checkpoint folder"):
        resume(stopped)


@pytest.mark.slow
def test_the_hash_is_recorded_and_a_checkpoint_written_before_it_still_resumes_exactly(stopped, tmp_path):
    from glm53.runtime.files import sha256_file

    checkpoint = stopped / "checkpoint-0002"
    meta = json.loads((checkpoint / "metadata.json").read_text())
    assert meta["trainer_state_sha256"] == sha256_file(checkpoint / "trainer_state.pt")
    set_recorded_hash(checkpoint, None)  # as written before this change
    resume(stopped)
    whole = tmp_path / "whole"
    pretrain(tiny_run(whole, steps=4, checkpoints=(2, 4)), dev_tasks=[], log=lambda *_: None)
    assert losses(stopped) == losses(whole)
