"""The experiment config: a YAML file of sections, each a validated dataclass, plus key=value overrides.

data:      which corpus, and where each split comes from (attnkit.data.config.DataConfig)
tokenizer: SentencePiece settings
model:     arch (transformer | rnn | lm | classifier), an optional preset, then that model config's fields
train:     optimizer, schedule, batching, precision, stopping
valid:     how often and how to validate, which checkpoints to keep
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from ..config import ConfigBase
from ..data.config import DataConfig
from ..data.config import upgrade as upgrade_data
from ..data.tokenizer import Vocabulary
from ..data.tokenizer_config import TokenizerConfig
from ..decoding.defaults import LENGTH_PENALTY
from ..device import DEVICE_NAMES, check_device_name
from ..errors import ConfigError
from ..model.config import ModelConfig
from ..model.registry import ARCHS, DEFAULT_ARCH
from ..precision import PRECISIONS


def _is_device_name(name: str) -> bool:
    try:
        check_device_name(name)
    except ConfigError:
        return False
    return True


DEFAULT_LR = 5e-4  # TrainConfig.lr's default: the one value noam accepts, since noam does not use it
FREEZABLE = ("embeddings", "encoder", "decoder")  # train.freeze: the parts a fine-tuning keeps fixed


@dataclasses.dataclass
class TrainConfig(ConfigBase):
    """Adam with the paper's schedule (section 5.3) unless told otherwise.

    schedule "noam": lr = lr_scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), so its peak is
    lr_scale * d_model^-0.5 * warmup^-0.5 and ``lr`` is not used: setting ``lr`` to anything but its
    default under noam is an error (set lr_scale, or choose inverse_sqrt), never a value silently dropped;
    "inverse_sqrt": lr rises linearly to ``lr`` over warmup, then decays as 1/sqrt(step);
    "constant": ``lr`` after a linear warmup.
    cooldown_steps: the last this many steps before max_steps bring the lr linearly down to ~0
    (so with a cooldown the schedule depends on max_steps: raising it on --resume moves the cooldown;
    a run that max_minutes, max_epochs or valid.patience stops earlier ends before or inside it).
    max_tokens: padded tokens per batch per process; accumulate: batches per optimizer step.
    bidirectional_epochs: the first this many epochs also train on every pair reversed (target ->
    source), each such epoch twice as long; the rest train as usual (bidirectional training, Ding
    et al., 2021: the reversed pairs teach both embeddings and both stacks each language in both
    roles). Translation with a joint vocabulary only; 0 = off.
    """

    max_tokens: int = 4096
    max_steps: int = 10000
    max_epochs: int = 0  # 0 = no limit
    bidirectional_epochs: int = 0  # 0 = off; see the docstring
    max_minutes: float = 0.0  # 0 = no limit; a wall-clock budget
    schedule: str = "noam"
    lr: float = DEFAULT_LR  # not used by noam (see the docstring)
    lr_scale: float = 1.0
    warmup_steps: int = 4000
    cooldown_steps: int = 0  # 0 = no cooldown
    beta1: float = 0.9
    beta2: float = 0.98
    eps: float = 1e-9
    weight_decay: float = 0.0
    label_smoothing: float = 0.1
    clip_norm: float = 0.0  # 0 = no clipping
    accumulate: int = 1
    seed: int = 1
    device: str = "auto"  # auto | cpu | cuda | cuda:N | mps
    # auto (bf16 on GPU, fp32 on CPU) | fp32 | bf16 (on a CPU it pays only with AMX or AVX512-BF16)
    # | fp16 (CUDA only: autocast with loss scaling, for GPUs without bf16)
    precision: str = "auto"
    # torch.compile the step's forward and loss as one graph, one for every batch shape (the GPU's
    # fast path; on a CPU the first steps compile for a minute or more)
    compile: bool = False
    # tokens per chunk of a loss that applies the output layer itself (attnkit.linear_loss), so the
    # batch's whole (tokens x vocabulary) logits never exist; 0 = the plain loss over all logits
    output_loss_chunk: int = 0
    # fine-tuning: start from this checkpoint's weights and tokenizer (attnkit's own, or one written by
    # `attnkit import`), with a fresh optimizer, schedule, step count, sampler and best score
    init_from: str = ""
    freeze: list[str] = dataclasses.field(default_factory=list)  # parts kept fixed: see FREEZABLE
    ema_decay: float = 0.0  # exponential moving average of the weights (e.g. 0.9999); 0 = off
    tensorboard: bool = False  # also log to <output_dir>/tensorboard (the `tensorboard` extra)
    log_every: int = 50
    progress: bool = True

    def validate(self) -> None:
        self._positive("max_tokens", "max_steps", "warmup_steps", "accumulate", "log_every")
        self._check(self.max_epochs >= 0, "max_epochs", "must be >= 0")
        # SentencePiece and numpy take 32-bit seeds: one range for every seed a run uses
        self._check(0 <= self.seed < 2**32, "seed", "must be an integer from 0 to 4,294,967,295")
        self._check(self.bidirectional_epochs >= 0, "bidirectional_epochs", "must be >= 0 (0 = off)")
        self._check(self.max_minutes >= 0, "max_minutes", "must be >= 0")
        self._check(
            0 <= self.output_loss_chunk < 2**31, "output_loss_chunk", "must be in [0, 2147483647] (0 = off)"
        )
        self._check(
            0 <= self.cooldown_steps <= self.max_steps,
            "cooldown_steps",
            f"must be in [0, max_steps] (max_steps is {self.max_steps})",
        )
        self._choice("schedule", ("noam", "inverse_sqrt", "constant"))
        self._check(self.lr > 0, "lr", "must be positive")
        self._check(math.isfinite(self.lr), "lr", "must be a finite number")
        self._check(self.lr_scale > 0, "lr_scale", "must be positive")
        if self.schedule == "noam" and self.lr != DEFAULT_LR:
            raise ConfigError(
                f"train.lr = {self.lr!r} is not used by schedule noam (its peak is "
                "lr_scale * d_model^-0.5 * warmup_steps^-0.5); set train.lr_scale, "
                "or schedule: inverse_sqrt (or constant) to use train.lr"
            )
        for beta in ("beta1", "beta2"):
            self._check(0 <= getattr(self, beta) < 1, beta, "must be in [0, 1)")
        self._check(self.eps > 0, "eps", "must be positive")
        self._check(0 <= self.label_smoothing < 1, "label_smoothing", "must be in [0, 1)")
        self._check(self.clip_norm >= 0, "clip_norm", "must be >= 0")
        self._check(self.weight_decay >= 0, "weight_decay", "must be >= 0")
        self._choice("precision", PRECISIONS)
        self._check(0 <= self.ema_decay < 1, "ema_decay", "must be in [0, 1) (0 = off)")
        self._check(isinstance(self.freeze, list), "freeze", f"must be a list of {', '.join(FREEZABLE)}")
        for part in self.freeze:
            self._check(part in FREEZABLE, "freeze", f"{part!r} is not one of {', '.join(FREEZABLE)}")
        self._check(not self.freeze or bool(self.init_from), "freeze", "needs train.init_from (fine-tuning)")
        self._check(_is_device_name(self.device), "device", f"must be {DEVICE_NAMES}")


@dataclasses.dataclass
class ValidConfig(ConfigBase):
    """Validation every ``every`` steps: loss and BLEU (decoded with ``beam_size``) on the valid split.

    metric: the validation metric that picks checkpoint_best.pt and counts for ``patience``; "" = the
    task's own (translation bleu, language model perplexity, classifier macro_f1); the model's task
    says which it accepts (translation: bleu, chrf, ter, loss; ter and loss: lower is better).
    patience: stop after this many validations without a better ``metric`` (0 = never stop early).
    keep_last: step checkpoints kept on disk; average_last: how many of them to average at the end.
    """

    every: int = 1000
    beam_size: int = 1
    length_penalty: float = LENGTH_PENALTY
    max_sentences: int = 0  # 0 = the whole valid split is decoded for BLEU
    patience: int = 0
    keep_last: int = 5
    average_last: int = 0
    batch_tokens: int = 8000
    metric: str = ""  # "" = the task's default; see the docstring

    def __post_init__(self) -> None:
        if isinstance(self.metric, str):
            self.metric = self.metric.lower()  # BLEU, chrF and TER as papers spell them
        super().__post_init__()

    def validate(self) -> None:
        self._positive("every", "beam_size", "batch_tokens")
        for name in ("max_sentences", "patience", "keep_last", "average_last"):
            self._check(getattr(self, name) >= 0, name, "must be >= 0")
        self._check(self.average_last <= self.keep_last, "average_last", "must be <= keep_last")


SECTIONS: dict[str, type[ConfigBase]] = {
    "data": DataConfig,
    "tokenizer": TokenizerConfig,
    "train": TrainConfig,
    "valid": ValidConfig,
}


@dataclasses.dataclass
class ExperimentConfig:
    data: DataConfig
    tokenizer: TokenizerConfig
    # arch, optional preset, and fields of that arch's config (vocabulary from the tokenizer)
    model: dict[str, Any]
    train: TrainConfig
    valid: ValidConfig
    output_dir: str = "runs/experiment"
    task: str | None = None  # a registered task's name; None: model.arch's (attnkit.tasks.task_for)

    @property
    def arch(self) -> str:
        return self.model.get("arch", DEFAULT_ARCH)

    def model_config(self, vocab: Vocabulary, data_fields: dict[str, Any] | None = None) -> ModelConfig:
        """The arch's config with the tokenizer's vocabulary sizes and special ids filled in, and
        ``data_fields``, what the training data fixes (a classifier's ``n_classes``).

        Those come from the tokenizer and the data alone: a ``model`` key that contradicts them is
        an error naming the key (an equal value is accepted), never silently overwritten.
        """
        cls = ARCHS[self.arch][1]
        names = cls.field_names()
        fields = {k: v for k, v in self.model.items() if k not in ("arch", "preset")}
        for key, value in vocab.model_fields().items():
            if key not in names:
                continue
            if key in fields and fields[key] != value:
                fix = "set tokenizer.vocab_size instead" if "vocab" in key else "the tokenizer fixes it"
                raise ConfigError(
                    f"model.{key} = {fields[key]!r} contradicts the tokenizer's {value}: vocabulary sizes "
                    f"and special ids come from the tokenizer; remove model.{key} ({fix})"
                )
            fields[key] = value
        for key, value in (data_fields or {}).items():
            if key in fields and fields[key] != value:
                raise ConfigError(
                    f"model.{key} = {fields[key]!r} contradicts the training data's {value}; "
                    f"remove model.{key} "
                    "(the training split fixes it)"
                )
            fields[key] = value
        preset = self.model.get("preset")
        return cls.preset(preset, **fields) if preset else cls.from_dict(fields)

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name).to_dict() for name in SECTIONS}
        task = {"task": self.task} if self.task is not None else {}  # a config without one stays as it was
        return {**out, "model": dict(self.model), "output_dir": self.output_dir, **task}

    @classmethod
    def from_saved(cls, values: dict[str, Any]) -> ExperimentConfig:
        """Rebuild the experiment stored in a checkpoint (older data sections are translated)."""
        if not isinstance(values, dict) or not values:
            raise ConfigError("the checkpoint holds no experiment config")
        data = values.get("data")
        return cls.from_dict({**values, "data": upgrade_data(data) if isinstance(data, dict) else data})

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ExperimentConfig:
        if not isinstance(values, dict):
            raise ConfigError("a config must be a mapping of sections (data, tokenizer, model, train, valid)")
        unknown = sorted(set(values) - {*SECTIONS, "model", "output_dir", "task"})
        if unknown:
            raise ConfigError(
                f"unknown config section(s): {', '.join(unknown)} "
                f"(valid: {', '.join([*SECTIONS, 'model', 'output_dir', 'task'])})"
            )
        sections: dict[str, Any] = {}  # each its own section class, as SECTIONS names them
        for name, section in SECTIONS.items():
            raw = values.get(name) or {}
            if not isinstance(raw, dict):
                raise ConfigError(f"config section {name!r} must be a mapping, got {raw!r}")
            sections[name] = section.from_dict(raw)
        model = dict(values.get("model") or {})
        arch = model.get("arch", DEFAULT_ARCH)
        if arch not in ARCHS:
            raise ConfigError(f"model.arch = {arch!r}: must be one of {', '.join(ARCHS)}")
        task = values.get("task")
        if task is not None:
            from ..plugin import task_for

            task_for(str(task), arch)  # a registered task that takes this arch, else one line
        output_dir = str(values.get("output_dir", "runs/experiment"))
        cfg = cls(model=model, output_dir=output_dir, task=None if task is None else str(task), **sections)
        # Validate the model fields now, against the vocabulary the tokenizer is asked for (the
        # trained one can be smaller on a tiny corpus; that is checked again once it exists).
        size = cfg.tokenizer.vocab_size
        cfg.model_config(Vocabulary(size, size))
        return cfg


def parse_override(text: str) -> tuple[list[str], Any]:
    """ "train.lr=0.001" -> (["train", "lr"], 0.001); values are parsed as YAML scalars."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like section.key=value")
    key, _, raw = text.partition("=")
    path = key.strip().split(".")
    if len(path) == 1 and path[0] not in ("output_dir", "task") or len(path) > 2 or not all(path):
        raise ConfigError(f"override key {key!r} must be section.key (e.g. train.lr), output_dir or task")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise ConfigError(
            f"override {text!r}: cannot parse value ({getattr(e, 'problem', None) or e})"
        ) from None
    return path, value


def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> ExperimentConfig:
    """Read a YAML config (a file, or a shipped config's name: :mod:`attnkit.train.shipped`; or start
    from defaults when path is None) and apply overrides."""
    values: dict[str, Any] = {}
    if path is not None:  # a file, or a shipped config's name; its extends: chain beneath it
        from .shipped import read_values, resolve

        values = read_values(resolve(path))
    for text in overrides:
        keys, value = parse_override(text)
        if keys in (["output_dir"], ["task"]):
            values[keys[0]] = value
        else:
            section = values.setdefault(keys[0], {})
            if not isinstance(section, dict):
                raise ConfigError(f"config section {keys[0]!r} must be a mapping")
            section[keys[1]] = value
    cfg = ExperimentConfig.from_dict(values)
    _check_given_tokenizer(cfg, values.get("tokenizer") or {})
    return cfg


def _check_given_tokenizer(cfg: ExperimentConfig, written: dict) -> None:
    """With ``tokenizer.model``, its pieces fix the vocabulary: a ``vocab_size`` or ``joint`` the config
    writes must agree with them (else it would be silently ignored, and recorded as if it held)."""
    if not cfg.tokenizer.model or not {"vocab_size", "joint"} & set(written):
        return
    from ..data.tokenizer import SubwordTokenizer

    tok = SubwordTokenizer.from_files(cfg.tokenizer.model)
    if "joint" in written and bool(written["joint"]) != tok.joint:
        raise ConfigError(
            f"tokenizer.joint = {written['joint']!r} contradicts tokenizer.model ({len(cfg.tokenizer.model)} "
            "file(s)): one model is joint, two are separate; remove tokenizer.joint"
        )
    if "vocab_size" in written and written["vocab_size"] != tok.src_vocab_size:
        raise ConfigError(
            f"tokenizer.vocab_size = {written['vocab_size']!r} contradicts tokenizer.model's "
            f"{tok.src_vocab_size} pieces; remove tokenizer.vocab_size"
        )
