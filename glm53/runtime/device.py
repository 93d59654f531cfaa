"""Device choice: `auto` picks cuda, then mps, then cpu; precision and autocast; compiling a forward."""

from __future__ import annotations

import os

import torch

from .config import DEVICE_CHOICES, PRECISIONS
from .cpu import cpu_has_native_bf16
from .kernel_settings import cache_folder, cached


def resolve_device(name: str = "auto") -> torch.device:
    if name not in DEVICE_CHOICES:
        raise ValueError(f"unknown device {name!r}; choose one of {', '.join(DEVICE_CHOICES)}")
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for but this torch build sees no CUDA device; use --device auto "
                         "or cpu")
    if name == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ValueError("--device mps was asked for but MPS is not available; use --device auto or cpu")
    return torch.device(name)


def peak_memory_bytes(device: torch.device) -> int:
    """Peak accelerator memory on cuda; peak resident set size of this process on cpu."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    try:
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
    except Exception:
        return 0


def resolve_precision(name: str, device: torch.device, purpose: str = "train") -> str:
    """auto on a CPU: this machine's calibration (`glm53 calibrate`) for `purpose` ("train" or "decode") when one
    is cached, else bf16 where the CPU has native bf16; on CUDA bf16 where supported; fp32 elsewhere."""
    if name not in PRECISIONS:
        raise ValueError(f"unknown precision {name!r}; choose one of {', '.join(PRECISIONS)}")
    if name != "auto":
        return name
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    if device.type == "cpu":
        entry = cached()
        if entry is not None:
            return entry["decode_precision" if purpose == "decode" else "train_precision"]
        return "bf16" if cpu_has_native_bf16() else "fp32"
    return "fp32"


def native_bf16(device: torch.device) -> bool:
    """True where bf16 matrix products run in hardware: a CUDA device of compute capability 8.0 or newer (Ampere on;
    torch.cuda.is_bf16_supported() also counts emulation), a CPU with AVX512-BF16 or AMX. Elsewhere (a CPU without
    them, such as AMD Zen 3 or an AVX-512 Xeon before Cooper Lake; an older GPU; MPS) explicit bf16 kernels (Muon's
    Newton-Schulz) take fp32, since an emulated bf16 product is many times slower."""
    if device.type == "cuda":
        return torch.cuda.get_device_capability(device) >= (8, 0)
    return device.type == "cpu" and cpu_has_native_bf16()


def explain_precision(device: torch.device) -> str:
    """What `--precision auto` picks on `device` for training and decoding, and why."""
    chosen = resolve_precision("auto", device)
    if device.type == "cpu":
        entry = cached()
        if entry is not None:
            train, decode = entry["train_seconds_per_step"], entry["decode_seconds"]
            return (f"training {entry['train_precision']} "
                    f"({', '.join(f'{p} {s:.3f} s/step' for p, s in train.items())}), "
                    f"decoding {entry['decode_precision']} ({', '.join(f'{p} {s:.3f} s' for p, s in decode.items())}); "
                    f"measured by glm53 calibrate on {entry['measured']}")
        why = "this CPU has native bf16 (AVX512-BF16 or AMX)" if chosen == "bf16" else "this CPU has no native bf16"
    elif device.type == "cuda":
        why = "the GPU supports bf16" if chosen == "bf16" else "the GPU lacks bf16"
    else:
        why = f"{device.type} runs fp32"
    return f"{chosen} ({why}; a rule: `glm53 calibrate` measures instead)"


def autocast(device: torch.device, precision: str):
    """A context manager: bf16 autocast for precision 'bf16', a no-op for 'fp32'."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=(precision == "bf16"))


# Inductor writes its default folder into TORCHINDUCTOR_CACHE_DIR on first use, so a value found later cannot tell
# the user's choice from Inductor's own: the user's is the one present when glm53 was imported
USER_INDUCTOR_CACHE = os.environ.get("TORCHINDUCTOR_CACHE_DIR")


def compiled(forward, shapes: int = 1):
    """torch.compile(forward), with Inductor's cache in glm53's cache folder (`$GLM53_CACHE_DIR/inductor`), so a
    second run of the same shapes loads the compiled code instead of generating it again; a TORCHINDUCTOR_CACHE_DIR
    the user set before starting glm53 wins. The variable is the process's (Inductor reads it when it compiles):
    each call sets it again, so a later run in the same process with another GLM53_CACHE_DIR follows its own. Every
    `--compile` (pretrain, speedrun, bench) compiles through here.

    Static shapes (`dynamic=False`): at a second shape Dynamo would otherwise trace the model again with symbolic
    sizes, which its chunked and windowed attention's integer arithmetic does not survive (the frames fall back to
    eager, graph broken); a shape a graph instead, and the callers keep the shapes few (pretrain.py rounds a
    length-bucketed batch's width up to data.pretrain_batches.compiled_width). `shapes`: how many the caller may
    meet; Dynamo's recompile limit (8 by default, past which a new shape runs eagerly with a warning) is raised to
    it."""
    import torch._dynamo

    os.environ["TORCHINDUCTOR_CACHE_DIR"] = USER_INDUCTOR_CACHE or str(cache_folder() / "inductor")
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, shapes)
    return torch.compile(forward, dynamic=False)
