"""Build a seq2seq model from its arch name and config dict, as stored in checkpoints."""

from __future__ import annotations

from typing import Any

from torch import nn

from ..errors import CheckpointError, ConfigError
from ..model import Transformer
from ..rnn import RNNSeq2Seq
from .config import ARCHS

MODELS: dict[str, type[nn.Module]] = {"transformer": Transformer, "rnn": RNNSeq2Seq}


def build_model(arch: str, config: dict[str, Any]) -> nn.Module:
    if arch not in MODELS:
        raise ConfigError(f"unknown model arch {arch!r} (known: {', '.join(MODELS)})")
    return MODELS[arch](ARCHS[arch].from_dict(config))


def model_from_checkpoint(state: dict[str, Any], *, expect_arch: str | None = None) -> nn.Module:
    """Rebuild the model and load its weights; a mismatch is a :class:`CheckpointError`."""
    arch = state["arch"]
    if expect_arch is not None and arch != expect_arch:
        raise CheckpointError(f"checkpoint holds a {arch!r} model, but the config asks for {expect_arch!r}")
    try:
        model = build_model(arch, state["model_config"])
    except ConfigError as e:
        raise CheckpointError(f"checkpoint has an incompatible model config: {e}") from None
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as e:
        raise CheckpointError(f"checkpoint weights do not fit the model: {str(e).splitlines()[0]}") from None
    return model
