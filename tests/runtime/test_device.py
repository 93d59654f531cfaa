"""Device and precision resolution, the CPU description and the calibration cache's key."""

import pytest
import torch

from glm53.runtime import device as device_module
from glm53.runtime.device import resolve_device, resolve_precision


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
    from glm53.runtime.cpu import CPU_FLAGS, cpu_description

    cpu = cpu_description()
    assert cpu["model"] and cpu["cores"] >= 1 and set(cpu["flags"]) <= set(CPU_FLAGS)
    assert cpu["openmp_spin"]["GOMP_SPINCOUNT"] is not None
    if "cpu family" in open("/proc/cpuinfo").read():
        assert " family " in cpu["family"] and " model " in cpu["family"]


def test_calibration_key_tells_cpu_generations_with_one_name_apart(monkeypatch):
    """A virtual machine may call Zen 4 and Zen 5 both "AMD EPYC": a measurement on one must not serve the other."""
    from glm53.runtime import kernel_settings

    base = {"model": "AMD EPYC", "cores": 2, "threads": 2, "flags": ["avx2", "avx512f"]}
    keys = set()
    for family, flags in (("AuthenticAMD family 25 model 17 stepping 1", ["avx2", "avx512f"]),
                          ("AuthenticAMD family 26 model 2 stepping 1", ["avx2", "avx512f"]),
                          ("AuthenticAMD family 26 model 2 stepping 1", ["avx2", "avx512f", "avx512_bf16"])):
        monkeypatch.setattr(kernel_settings, "cpu_description", lambda: {**base, "family": family, "flags": flags})
        keys.add(kernel_settings.machine_key())
    assert len(keys) == 3
