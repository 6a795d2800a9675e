"""Models built from the attention blocks: the Transformer, a decoder-only LM, an encoder classifier."""

from .classifier import ClassifierOutput, TransformerClassifier
from .config import BlockConfig, ClassifierConfig, LMConfig, TransformerConfig
from .lm import TransformerLM
from .transformer import DecoderCache, DecoderOutput, EncoderOutput, Transformer, count_parameters

__all__ = [
    "BlockConfig",
    "ClassifierConfig",
    "ClassifierOutput",
    "DecoderCache",
    "DecoderOutput",
    "EncoderOutput",
    "LMConfig",
    "Transformer",
    "TransformerClassifier",
    "TransformerConfig",
    "TransformerLM",
    "count_parameters",
]
