"""`glm53 calibrate`: timings taken in turns, the cache per machine, and what --precision auto and --kernels auto
take from it."""

import statistics

import pytest
import torch

from glm53.model.config import ModelConfig
from glm53.runtime import device as device_module
from glm53.runtime import kernel_settings
from glm53.runtime.device import resolve_precision
from glm53.speed import calibrate as calibrate_module


def test_calibration_is_cached_per_machine_and_used_by_auto(monkeypatch):
    from glm53.runtime.device import explain_precision

    monkeypatch.setattr(device_module, "cpu_has_native_bf16", lambda: True)
    monkeypatch.setattr(calibrate_module, "cpu_has_native_bf16", lambda: True)
    # stand-in timings: bf16 trains faster, fp32 decodes faster (as measured on one CPU)
    monkeypatch.setattr(calibrate_module, "_time_training",
                        lambda candidates, steps: [{"fp32": 2.0, "bf16": 1.0}[p] for _, p in candidates])
    monkeypatch.setattr(calibrate_module, "_time_decoding", lambda kw, ps: [{"fp32": 1.0, "bf16": 1.5}[p] for p in ps])
    cpu = torch.device("cpu")
    assert kernel_settings.cached() is None
    entry = calibrate_module.calibrate(log=lambda *_: None)
    assert (entry["train_precision"], entry["decode_precision"]) == ("bf16", "fp32")
    assert resolve_precision("auto", cpu) == "bf16" and resolve_precision("auto", cpu, purpose="decode") == "fp32"
    assert resolve_precision("fp32", cpu) == "fp32"  # explicit choices are never overridden
    assert "measured by glm53 calibrate" in explain_precision(cpu)
    # a near tie goes to fp32
    monkeypatch.setattr(calibrate_module, "_time_training",
                        lambda candidates, steps: [{"fp32": 1.0, "bf16": 0.95}[p] for _, p in candidates])
    assert calibrate_module.calibrate(log=lambda *_: None)["train_precision"] == "fp32"


@pytest.mark.slow
def test_calibration_times_a_tiny_model():
    from glm53.speed.calibrate import _time_decoding, _time_training

    tiny = dict(dim=32, layers=4, heads=4, expert_hidden=48, experts=4, sparse_window=8, sparse_stride=8)
    assert all(t > 0 for t in _time_training([(tiny, "fp32"), ({**tiny, "linear_attention_chunk": 16}, "fp32")], 1))
    assert all(t > 0 for t in _time_decoding(tiny, ["fp32", "fp32"], rounds=1))


def test_calibration_compares_candidates_round_by_round_so_a_drift_cancels():
    from glm53.speed.calibrate import _paired

    # the candidate is 5% faster; the machine slows 1.5x in the third round, between the two candidates' steps
    reference = [1.0, 1.0, 1.0, 1.5, 1.5]
    candidate = [0.95, 0.95, 1.425, 1.425, 1.425]
    assert statistics.median(candidate) > statistics.median(reference)  # separate medians: 42% slower
    assert _paired([reference, candidate]) == pytest.approx([1.0, 0.95])


@pytest.mark.slow
def test_kernel_settings_are_calibrated_one_at_a_time_and_used_by_kernels_auto(monkeypatch, tmp_path):
    from glm53.train.pretrain import pretrain
    from glm53.train.pretrain_config import PretrainConfig

    from ..tiny import TINY

    monkeypatch.setattr(device_module, "cpu_has_native_bf16", lambda: True)
    monkeypatch.setattr(calibrate_module, "cpu_has_native_bf16", lambda: True)

    def seconds(kw, precision):  # chunk 16 fastest, padding 0 only 2% faster (a tie), bf16 cores faster
        t = {"fp32": 2.0, "bf16": 1.0}[precision]
        t *= {16: 0.8, 32: 1.0, 64: 1.1, 128: 0.85}[kw.get("linear_attention_chunk", 32)]
        t *= 0.98 if kw.get("expert_row_padding", 64) == 0 else 1.0
        t *= 0.93 if kw.get("linear_attention_core", "fp32") == "bf16" else 1.0
        return t * (0.7 if kw.get("sparse_attention_core", "fp32") == "bf16" else 1.0)

    def stand_in(candidates, steps):
        return [seconds(kw, p) for kw, p in candidates]

    monkeypatch.setattr(calibrate_module, "_time_training", stand_in)
    monkeypatch.setattr(calibrate_module, "_time_decoding", lambda kw, ps: [1.0 for _ in ps])
    entry = calibrate_module.calibrate(log=lambda *_: None)
    choice = {"linear_attention_core": "bf16", "linear_attention_chunk": 16, "expert_row_padding": 64,
              "sparse_attention_core": "bf16"}
    assert entry["kernels"] == {**entry["kernels"], "precision": "bf16", "choice": choice}
    cpu = torch.device("cpu")
    assert kernel_settings.resolve_kernels("auto", "bf16", cpu) == choice
    assert kernel_settings.resolve_kernels("auto", "fp32", cpu) == {}  # measured for bf16 only
    assert kernel_settings.resolve_kernels("config", "bf16", cpu) == {}
    assert "linear_attention_chunk 16" in kernel_settings.explain_kernels()
    receipt = pretrain(PretrainConfig(out=str(tmp_path / "run"), steps=1, batch_size=2, sequence_length=128,
                                      precision="bf16", progress=False,
                                      model=ModelConfig(**{**TINY, "max_sequence_length": 160})),
                       dev_tasks=[], log=lambda *_: None)
    assert {k: receipt["config"][k] for k in choice} == choice
    with pytest.raises(ValueError, match="--kernels must be one of auto, config"):
        from glm53.train.pretrain_config import PretrainConfig as P

        P(out="x", kernels="fastest")
