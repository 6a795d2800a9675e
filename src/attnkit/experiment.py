"""What the data, the checkpoint and the tasks read of an experiment: a protocol of its own, above the
config sections it names, so that ``attnkit.config`` (the sections' base) imports none of them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .data.config import DataConfig
    from .data.tokenizer import Vocabulary
    from .data.tokenizer_config import TokenizerConfig
    from .model.config import ModelConfig


class Experiment(Protocol):
    """What the data and the tasks read of an experiment (``attnkit.train.config.ExperimentConfig``
    is one): each section is read where it lives, and ``train``/``valid`` only through the keys a
    task uses (``train.seed``, ``train.bidirectional_epochs``, ``train.init_from``, ``valid.*``)."""

    data: DataConfig
    tokenizer: TokenizerConfig
    train: Any
    valid: Any
    model: dict[str, Any]
    task: str | None

    @property
    def arch(self) -> str: ...

    def model_config(self, vocab: Vocabulary, data_fields: dict[str, Any] | None = None) -> ModelConfig: ...
