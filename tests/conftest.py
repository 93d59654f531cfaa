import pytest
import torch

from glm53 import ModelConfig

TINY = dict(dim=32, layers=4, heads=4, expert_hidden=48, experts=4, top_k=2, streams=4,
            sparse_window=8, sparse_stride=8, max_sequence_length=64)


@pytest.fixture
def tiny_config() -> ModelConfig:
    return ModelConfig(**TINY)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
