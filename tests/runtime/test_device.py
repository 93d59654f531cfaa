"""Device and precision resolution."""

import statistics

import pytest
import torch

from glm53.runtime import device as device_module
from glm53.runtime.device import resolve_device, resolve_precision
from glm53.model.config import ModelConfig


def test_explicit_precisions_pass_through():
    assert resolve_precision("fp32", torch.device("cpu")) == "fp32"
    assert resolve_precision("bf16", torch.device("cpu")) == "bf16"


@pytest.mark.parametrize("native, expected", [(True, "bf16"), (False, "fp32")])
def test_auto_precision_on_cpu_follows_native_bf16(monkeypatch, native, expected):
    monkeypatch.setattr(device_module, "cpu_has_native_bf16", lambda: native)
    assert resolve_precision("auto", torch.device("cpu")) == expected


def test_auto_precision_elsewhere_is_fp32():
    assert resolve_precision("auto", torch.device("meta")) == "fp32"


def test_bad_names_are_refused():
    with pytest.raises(ValueError, match="unknown precision"):
        resolve_precision("fp16", torch.device("cpu"))
    with pytest.raises(ValueError, match="unknown device"):
        resolve_device("tpu")


def test_auto_device_is_a_real_device():
    assert resolve_device("auto").type in ("cuda", "mps", "cpu")
    assert resolve_device("cpu") == torch.device("cpu")


def test_cpu_description_names_the_model_and_the_spin_setting():
    import glm53  # noqa: F401 - importing glm53 sets the OpenMP spin default
    from glm53.runtime.device import cpu_description

    cpu = cpu_description()
    assert cpu["model"] and cpu["cores"] >= 1 and set(cpu["flags"]) <= set(device_module.CPU_FLAGS)
    assert cpu["openmp_spin"]["GOMP_SPINCOUNT"] is not None
    if "cpu family" in open("/proc/cpuinfo").read():
        assert " family " in cpu["family"] and " model " in cpu["family"]


def test_calibration_key_tells_cpu_generations_with_one_name_apart(monkeypatch):
    """A virtual machine may call Zen 4 and Zen 5 both "AMD EPYC": a measurement on one must not serve the other."""
    from glm53.speed import calibrate as calibrate_module

    base = {"model": "AMD EPYC", "cores": 2, "threads": 2, "flags": ["avx2", "avx512f"]}
    keys = set()
    for family, flags in (("AuthenticAMD family 25 model 17 stepping 1", ["avx2", "avx512f"]),
                          ("AuthenticAMD family 26 model 2 stepping 1", ["avx2", "avx512f"]),
                          ("AuthenticAMD family 26 model 2 stepping 1", ["avx2", "avx512f", "avx512_bf16"])):
        monkeypatch.setattr(calibrate_module, "cpu_description", lambda: {**base, "family": family, "flags": flags})
        keys.add(calibrate_module.machine_key())
    assert len(keys) == 3


def test_calibration_is_cached_per_machine_and_used_by_auto(monkeypatch):
    from glm53.speed import calibrate as calibrate_module
    from glm53.runtime.device import explain_precision

    monkeypatch.setattr(device_module, "cpu_has_native_bf16", lambda: True)
    monkeypatch.setattr(calibrate_module, "cpu_has_native_bf16", lambda: True)
    # stand-in timings: bf16 trains faster, fp32 decodes faster (as measured on one CPU)
    monkeypatch.setattr(calibrate_module, "_time_training",
                        lambda candidates, steps: [{"fp32": 2.0, "bf16": 1.0}[p] for _, p in candidates])
    monkeypatch.setattr(calibrate_module, "_time_decoding", lambda kw, ps: [{"fp32": 1.0, "bf16": 1.5}[p] for p in ps])
    cpu = torch.device("cpu")
    assert calibrate_module.cached() is None
    entry = calibrate_module.calibrate(log=lambda *_: None)
    assert (entry["train_precision"], entry["decode_precision"]) == ("bf16", "fp32")
    assert resolve_precision("auto", cpu) == "bf16" and resolve_precision("auto", cpu, purpose="decode") == "fp32"
    assert resolve_precision("fp32", cpu) == "fp32"  # explicit choices are never overridden
    assert "measured by glm53 calibrate" in explain_precision(cpu)
    # a near tie goes to fp32
    monkeypatch.setattr(calibrate_module, "_time_training",
                        lambda candidates, steps: [{"fp32": 1.0, "bf16": 0.95}[p] for _, p in candidates])
    assert calibrate_module.calibrate(log=lambda *_: None)["train_precision"] == "fp32"


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


def test_kernel_settings_are_calibrated_one_at_a_time_and_used_by_kernels_auto(monkeypatch, tmp_path):
    from glm53.speed import calibrate as calibrate_module
    from glm53.train.pretrain import PretrainConfig, pretrain

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
    assert calibrate_module.resolve_kernels("auto", "bf16", cpu) == choice
    assert calibrate_module.resolve_kernels("auto", "fp32", cpu) == {}  # measured for bf16 only
    assert calibrate_module.resolve_kernels("config", "bf16", cpu) == {}
    assert "linear_attention_chunk 16" in calibrate_module.explain_kernels()
    receipt = pretrain(PretrainConfig(out=str(tmp_path / "run"), steps=1, batch_size=2, sequence_length=128,
                                      precision="bf16", progress=False,
                                      model=ModelConfig(**{**TINY, "max_sequence_length": 160})),
                       dev_tasks=[], log=lambda *_: None)
    assert {k: receipt["config"][k] for k in choice} == choice
    with pytest.raises(ValueError, match="--kernels must be one of auto, config"):
        from glm53.train.pretrain import PretrainConfig as P

        P(out="x", kernels="fastest")
