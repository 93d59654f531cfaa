"""glm53: a CPU-first laboratory for a tiny GLM-5.3-Flash-style language model."""

from .model.config import ModelConfig
from .model.model import GLM53, ModelAux
from .tokenizer import ByteTokenizer

__all__ = ["ByteTokenizer", "ModelConfig", "GLM53", "ModelAux"]
__version__ = "0.1.0"
