"""What ``--resume`` may change, checked before the first step: a resumed run is the uninterrupted one.

A checkpoint holds the experiment config its run started with (``state["experiment"]``, a dict of
sections). Resuming compares it with the config given now, key by key, and refuses a change to any key
that changes what is trained: every ``data.*`` and ``tokenizer.*`` key, every ``train.*`` key (the
batching, the seed, the loss, the optimizer, the schedule, the precision, the bidirectional epochs) and
the model (compared as the checkpoint's resolved model config, so ``preset: tiny`` equals its fields).

Allowed changes, which say when to stop, how to report or where to run, never what a step computes:
``train.max_steps`` (not below the checkpoint's step), ``train.max_minutes``,
``train.max_epochs``, ``train.log_every``, ``train.progress``, ``train.device``, ``train.compile``,
``train.output_loss_chunk``, ``train.tensorboard``, ``train.init_from`` (the resumed weights are
the checkpoint's), every ``valid.*`` key and ``output_dir``; and the keys that only say where files are:
``data.data_dir``, ``data.prepared`` and ``tokenizer.model`` (a resumed run uses the checkpoint's
tokenizer), and ``model.cnn_weights`` (the file a captioner's CNN started from: its weights are the
checkpoint's, whose model config keeps no file). A key that an older checkpoint lacks compares equal
to its default.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ..config import ConfigBase
from ..data import bidirectional
from ..data.config import upgrade as upgrade_data
from ..errors import CheckpointError, ConfigError
from ..model.config import ModelConfig
from ..model.registry import ARCHS
from .config import SECTIONS, ExperimentConfig

# Per section, the keys --resume may change; every other key of data, tokenizer and train is fixed.
MAY_CHANGE: dict[str, frozenset[str]] = {
    "data": frozenset({"data_dir", "prepared"}),  # where the files are, not what they hold
    "tokenizer": frozenset({"model"}),  # a resumed run uses the checkpoint's tokenizer
    "train": frozenset(
        {"max_steps", "max_minutes", "max_epochs", "log_every", "progress", "device", "compile"}
        | {"output_loss_chunk"}  # how the loss is computed (to float tolerance), not what
        | {"tensorboard", "init_from"}  # how it reports; where the first weights came from
    ),
}
FIXED_SECTIONS = ("data", "tokenizer", "train")  # valid.* may all change
# The model keys --resume may change: where the first weights came from (the checkpoint holds them)
MODEL_MAY_CHANGE = frozenset({"cnn_weights"})


def check_resume(
    state: dict[str, Any], cfg: ExperimentConfig, model_cfg: ModelConfig, *, path: str | Path
) -> None:
    """Refuse to resume checkpoint ``state`` (read from ``path``) under ``cfg`` when the run would not be
    the uninterrupted one, or would train nothing; one line naming the key and both values."""
    saved = state.get("experiment") or {}
    bidirectional.check_resume(saved, cfg, path)
    if isinstance(saved, dict):
        for section in FIXED_SECTIONS:
            _check_section(section, saved.get(section), getattr(cfg, section))
    _check_model(state, cfg, model_cfg, path)
    # Equal is not refused: a run killed after writing its last step (or stopped by a signal at it,
    # validation pending) is resumed at max_steps to finish, and that must succeed like any other kill.
    step = state.get("step", 0)
    if cfg.train.max_steps < step:
        raise ConfigError(
            f"--resume: train.max_steps={cfg.train.max_steps} is below the checkpoint's step {step}: a run "
            f"cannot be resumed into fewer steps than it has trained; set train.max_steps above {step} to "
            "continue it"
        )


def _check_section(name: str, saved: Any, current: ConfigBase) -> None:
    if not isinstance(saved, dict):
        return  # a checkpoint without this section: nothing to compare with
    if name == "data":
        saved = upgrade_data(saved)  # an older checkpoint's keys, in today's names
    now = current.to_dict()
    fields = {f.name: f for f in dataclasses.fields(SECTIONS[name])}
    unused = set()
    if name == "train" and now["schedule"] == saved.get("schedule", _default(fields["schedule"])) == "noam":
        unused.add("lr")  # noam never reads it (an older run's config may still hold one)
    for f in fields.values():
        if f.name in MAY_CHANGE[name] or f.name in unused:
            continue
        was = saved.get(f.name, _default(f))
        if was != now[f.name]:
            raise ConfigError(
                f"--resume: {name}.{f.name} was {was!r} when the run started, the config says "
                f"{now[f.name]!r}; resume with the run's config (its resolved_config.yaml)"
            )


def _check_model(
    state: dict[str, Any], cfg: ExperimentConfig, model_cfg: ModelConfig, path: str | Path
) -> None:
    arch = state.get("arch")
    if arch != cfg.arch:
        _different_model(path, "arch", arch, cfg.arch)
    saved = state.get("model_config") or {}
    now = model_cfg.to_dict()
    defaults = {f.name: _default(f) for f in dataclasses.fields(ARCHS[cfg.arch][1])}
    for key in sorted((set(saved) | set(now)) - MODEL_MAY_CHANGE):
        was, says = saved.get(key, defaults.get(key)), now.get(key, defaults.get(key))
        if was != says:
            _different_model(path, key, was, says)


def _different_model(path: str | Path, key: str, was: Any, says: Any) -> None:
    raise CheckpointError(
        f"{path}: checkpoint holds a different model: model.{key} was {was!r} when the run started, the "
        f"config says {says!r}; resume with the config it was trained with (its resolved_config.yaml)"
    )


def _default(f: dataclasses.Field) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None if f.default is dataclasses.MISSING else f.default
