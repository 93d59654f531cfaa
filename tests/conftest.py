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


@pytest.fixture(autouse=True)
def _no_calibration_cache(tmp_path_factory, monkeypatch):
    """Tests never read or write the user's calibration cache (it changes what `--precision auto` means)."""
    monkeypatch.setenv("GLM53_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
