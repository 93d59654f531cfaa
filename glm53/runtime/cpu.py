"""The CPU at hand: its model, family numbers, core count and the instruction-set flags that matter here
(native bf16 above all), for `--precision auto`, the calibration cache's key and receipts."""

from __future__ import annotations

import torch


def cpu_has_native_bf16() -> bool:
    """True when the CPU has bf16 matrix instructions (AVX512-BF16 or AMX), where bf16 autocast pays."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx512_fp16")


def cpu_summary(cpu: dict) -> str:
    """One line for a `cpu_description()`: model (family numbers), cores, flags; as `glm53 info` and `glm53 bench`
    print it."""
    family = f" ({cpu['family']})" if cpu.get("family") else ""
    return f"{cpu['model']}{family}, {cpu['cores']} cores, flags {' '.join(cpu['flags']) or '-'}"


def cpu_description() -> dict:
    """The CPU model, its relevant instruction-set flags and core count, for receipts (Linux /proc/cpuinfo;
    elsewhere what `platform` knows)."""
    import os
    import platform

    model, flags, ids = platform.processor() or platform.machine(), set(), {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "model name" and value:
                    model = value
                elif key == "flags":
                    flags = set(value.split())
                elif key in ("vendor_id", "cpu family", "model", "stepping") and key not in ids:
                    ids[key] = value
    except OSError:
        pass
    # a virtual machine may name only the product line ("AMD EPYC" for Zen 4 and Zen 5 alike): the family, model
    # and stepping numbers tell the generations apart
    family = (f"{ids.get('vendor_id', '?')} family {ids.get('cpu family', '?')} model {ids.get('model', '?')} "
              f"stepping {ids.get('stepping', '?')}") if ids else ""
    return {"model": model, "family": family, "cores": os.cpu_count(), "flags": [f for f in CPU_FLAGS if f in flags],
            "torch": torch.__version__, "threads": torch.get_num_threads(),
            "openmp_spin": {k: os.environ.get(k) for k in ("GOMP_SPINCOUNT", "KMP_BLOCKTIME", "OMP_WAIT_POLICY")}}
