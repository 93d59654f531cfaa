import pytest
import torch

from glm53 import ModelConfig

from .tiny import TINY


@pytest.fixture
def tiny_config() -> ModelConfig:
    return ModelConfig(**TINY)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
