"""What a pretraining run starts from, built one way for both loops that pretrain (`glm53 pretrain`, pretrain.py, and
`glm53 speedrun`, speed/speedrun.py), so that the two cannot drift: the settings as this machine resolves them
(device, precision, the calibrated kernels), the seeded model, its optimizer (whose rate the schedule sets each
step: pretrain.py `learning_rate`), the tokenizer and an ordered run's documents.

Same seed, same weights: the model is initialised right after torch.manual_seed(cfg.seed) and the optimizer draws
nothing; the tokenizer and the documents draw from no torch generator (the batch of step t is a pure function of
(seed, t): data/pretrain_batches.py), so what is made here after the model changes no weight.

Simplification: the forward the loop runs (DistributedDataParallel, torch.compile) is each loop's own, made once a
resumed run's weights are back.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ..data.bpe_tokenizer import Tokenizer, tokenizer_for
from ..data.run_order import run_stream
from ..data.training_stream import training_stream
from ..model.model import GLM53
from ..runtime.device import resolve_device, resolve_precision
from ..runtime.distributed import SINGLE, DataParallel
from ..runtime.kernel_settings import resolve_kernels
from .optimizers import make_optimizer
from .pretrain_config import PretrainConfig


@dataclass
class Training:
    """A pretraining run's start: built by `build_training`, trained by the loop that asked for it."""
    cfg: PretrainConfig  # the calibrated kernels applied: what the run records, so that a rerun can give them
    device: torch.device
    precision: str
    kernels: dict  # the calibrated kernel settings applied ({}: the model flags as given)
    model: GLM53
    optimizer: torch.optim.Optimizer
    tokenizer: Tokenizer


def build_training(cfg: PretrainConfig, device: torch.device | None = None, dp: DataParallel = SINGLE) -> Training:
    """Resolve the device, precision and kernels for `cfg`, set this process's threads (under torchrun,
    distributed.from_environment has set them), then build the model from cfg.seed, its optimizer, the tokenizer
    and an ordered run's documents (made here, once, not inside the first timed step)."""
    device = device or resolve_device(cfg.runtime.device)
    precision = resolve_precision(cfg.runtime.precision, device)
    kernels = resolve_kernels(cfg.kernels, precision, device)
    if kernels:
        cfg = replace(cfg, model=replace(cfg.model, **kernels))
    if cfg.runtime.threads and not dp.active:
        torch.set_num_threads(cfg.runtime.threads)
    torch.manual_seed(cfg.seed)
    model = GLM53(cfg.model).to(device)
    optimizer = make_optimizer(model, cfg)
    tokenizer = tokenizer_for(cfg.model)
    # a stream file read (and refused) now
    training_stream(cfg.suite, cfg.docstring_share, cfg.stream_primitives, cfg.stream_primitives_share)
    run_stream(cfg)
    return Training(cfg, device, precision, kernels, model, optimizer, tokenizer)
