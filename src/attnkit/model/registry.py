"""Architecture names -> (model class, config class): what a config's ``model.arch`` and a
checkpoint's ``arch`` and ``model_config`` rebuild."""

from __future__ import annotations

from torch import nn

from .classifier import TransformerClassifier
from .config import ClassifierConfig, LMConfig, RNNConfig, TransformerConfig
from .lm import TransformerLM
from .rnn import RNNSeq2Seq
from .transformer import Transformer

ARCHS: dict[str, tuple[type[nn.Module], type]] = {
    "transformer": (Transformer, TransformerConfig),
    "rnn": (RNNSeq2Seq, RNNConfig),
    "lm": (TransformerLM, LMConfig),
    "classifier": (TransformerClassifier, ClassifierConfig),
}
