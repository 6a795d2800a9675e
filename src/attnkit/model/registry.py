"""Architecture names -> (model class, config class): what a config's ``model.arch`` and a
checkpoint's ``arch`` and ``model_config`` rebuild."""

from __future__ import annotations

from torch import nn

from .config import RNNConfig, TransformerConfig
from .rnn import RNNSeq2Seq
from .transformer import Transformer

ARCHS: dict[str, tuple[type[nn.Module], type]] = {
    "transformer": (Transformer, TransformerConfig),
    "rnn": (RNNSeq2Seq, RNNConfig),
}
