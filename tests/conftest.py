import pytest
import torch

from glm53 import ModelConfig

from .tiny import TINY
# a test that trains must be marked slow: the hooks of tests/trains_marked_slow.py, found here by their names
from .trains_marked_slow import (pytest_configure, pytest_runtest_setup, pytest_runtest_teardown,  # noqa: F401
                                 pytest_unconfigure)


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
