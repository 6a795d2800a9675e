"""Models built from the attention blocks: the Transformer, the RNN baseline, a decoder-only LM and
an encoder classifier. Every one keeps a contract of :mod:`attnkit.model.interface`."""

from .classifier import TransformerClassifier
from .config import BlockConfig, ClassifierConfig, LMConfig, RNNConfig, TransformerConfig
from .interface import DecoderOutput, DecoderState, IncrementalDecoder, LanguageModel, Seq2SeqModel
from .lm import LMState, TransformerLM
from .rnn import RNNSeq2Seq, RNNState
from .transformer import EncoderOutput, Transformer, TransformerState, count_parameters

__all__ = [
    "BlockConfig",
    "ClassifierConfig",
    "DecoderOutput",
    "DecoderState",
    "EncoderOutput",
    "IncrementalDecoder",
    "LMConfig",
    "LMState",
    "LanguageModel",
    "RNNConfig",
    "RNNSeq2Seq",
    "RNNState",
    "Seq2SeqModel",
    "Transformer",
    "TransformerClassifier",
    "TransformerConfig",
    "TransformerLM",
    "TransformerState",
    "count_parameters",
]
