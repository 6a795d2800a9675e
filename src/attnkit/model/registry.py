"""Architecture names -> (model class, config class): what a config's ``model.arch`` and a
checkpoint's ``arch`` and ``model_config`` rebuild."""

from __future__ import annotations

from torch import nn

from .captioner import CaptionTransformer
from .classifier import TransformerClassifier
from .config import (
    CaptionerConfig,
    ClassifierConfig,
    LMConfig,
    ModelConfig,
    RNNConfig,
    TransformerConfig,
)
from .lm import TransformerLM
from .rnn import RNNSeq2Seq
from .transformer import Transformer

ARCHS: dict[str, tuple[type[nn.Module], type[ModelConfig]]] = {
    "transformer": (Transformer, TransformerConfig),
    "rnn": (RNNSeq2Seq, RNNConfig),
    "lm": (TransformerLM, LMConfig),
    "classifier": (TransformerClassifier, ClassifierConfig),
    "captioner": (CaptionTransformer, CaptionerConfig),
}

DEFAULT_ARCH = "transformer"  # a config without model.arch trains the paper's model


def arch_of(model_or_config: object) -> str:
    """The ``arch`` name a checkpoint of this model (or model config) carries."""
    kind = type(model_or_config)
    return next(name for name, classes in ARCHS.items() if kind in classes)
