"""Fine-tuning: a new run that starts from a checkpoint's weights and tokenizer (``train.init_from``).

The checkpoint may be attnkit's own or one written by ``attnkit import`` (Marian / OPUS-MT). The new
run keeps the checkpoint's tokenizer (a new one would not fit the embeddings) and its model; the
optimizer, schedule, step count, sampler and best score start afresh. The model comes from the
checkpoint: a ``model`` key in the config that contradicts it is an error naming the key, except the
dropout rates, which a fine-tuning often raises on a small set. ``train.freeze`` keeps whole parts
(embeddings, encoder, decoder) fixed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn

from ..checkpoint import load_checkpoint, load_init  # noqa: F401 - load_init: its name here before
from ..errors import ConfigError
from ..model.config import ModelConfig
from ..model.registry import ARCHS
from .config import ExperimentConfig

REGULARISATION = (
    "dropout",
    "attention_dropout",
)  # may differ from the checkpoint's: no weight depends on them


def model_config(cfg: ExperimentConfig, state: dict[str, Any], data_fields: dict[str, Any]) -> ModelConfig:
    """The checkpoint's model config, with the dropout rates the config sets.

    Every other key written in the config's ``model`` section (or by its ``preset``) must equal the
    checkpoint's; what the training data fixes (a classifier's ``n_classes``) must too.
    """
    cls = ARCHS[cfg.arch][1]
    saved = dict(state["model_config"])
    written = {k: v for k, v in cfg.model.items() if k not in ("arch", "preset")}
    if preset := cfg.model.get("preset"):
        written = {**cls.presets[preset], **written}
    source = f"{cfg.train.init_from or 'the checkpoint'}'s"
    for key, value in written.items():
        if key in REGULARISATION:
            saved[key] = value
        elif key in saved and saved[key] != value:
            raise ConfigError(
                f"model.{key} = {value!r} contradicts {source} {saved[key]!r} (train.init_from: the weights "
                f"fix the model); remove model.{key}"
            )
    for key, value in data_fields.items():
        if saved.get(key) != value:
            raise ConfigError(
                f"the training data gives {key} = {value!r}, {source} model has {saved.get(key)!r}: "
                "fine-tune on data with the same classes"
            )
    return cls.from_dict(saved)


def freeze(model: nn.Module, parts: list[str], *, arch: str, path: str | Path = "") -> int:
    """Keep ``parts`` of ``model`` fixed (``requires_grad = False``); returns the parameters frozen.

    The model class names its parts (``freezable``); a tied output layer shares the target embedding
    and is frozen with it.
    """
    names: dict[str, tuple[str, ...]] = getattr(model, "freezable", {})
    frozen = 0
    for part in parts:
        if part not in names:
            have = ", ".join(names) or "none"
            raise ConfigError(f"train.freeze: a {arch!r} model has no {part!r} (it has: {have})")
        for child in names[part]:
            for p in getattr(model, child).parameters():
                if p.requires_grad:
                    p.requires_grad_(False)
                    frozen += p.numel()
    if parts and not any(p.requires_grad for p in model.parameters()):
        raise ConfigError(
            f"train.freeze: {', '.join(parts)} is every parameter of the model; nothing would train"
        )
    return frozen
