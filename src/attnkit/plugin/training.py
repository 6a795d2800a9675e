"""What the training loop asks of a task (:class:`Task`), the defaults most tasks share
(:class:`SplitTask`), and the validation helpers a task's ``validate`` builds on."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import numpy as np
import torch

from ..data.batching import TokenBatchSampler
from ..data.config import DataConfig
from ..data.encoded import Encoded
from ..data.examples import load_records
from ..data.pairs import Counts
from ..data.store import PairStore
from ..data.tokenizer import SubwordTokenizer
from ..errors import ConfigError
from ..loss import LossOutput, label_smoothed_cross_entropy
from ..precision import autocast

if TYPE_CHECKING:
    from ..experiment import Experiment


class Task(Protocol):
    """What the training loop asks of a task; it knows nothing else about it."""

    records: str  # what it reads: "pairs", "text" or "labelled" (data/examples.py load_records)
    metric: str  # the validation metric that picks the best checkpoint: valid.metric, e.g. "bleu"
    metrics: tuple[str, ...]  # every key validate() returns, in the metrics CSV's order
    higher_is_better: bool  # of ``metric``
    encodes_valid: bool  # whether validate() reads the encoded valid split (else only its records)

    def load(self, data: DataConfig, which: str) -> list:
        """The raw records of split ``which``; the training split is read first."""
        ...

    def model_fields(self) -> dict[str, Any]:
        """Model-config fields the data fixes (after ``load("train")``), e.g. ``n_classes``."""
        ...

    def checkpoint_fields(self) -> dict[str, Any]:
        """Kept in every checkpoint beside the model (e.g. ``labels``); a resumed run must match them."""
        ...

    def restore(self, state: dict) -> None:
        """Take :meth:`checkpoint_fields` back from a checkpoint, so that a task used on a trained model
        (``attnkit heads``) reads any split without the training split first."""
        ...

    def train_tokenizer(self, records: list, seed: int) -> SubwordTokenizer: ...

    def encode(self, records: list, tokenizer: SubwordTokenizer, max_len: int, *, split: str) -> Encoded: ...

    def epoch_examples(self, encoded: Encoded, tokenizer: SubwordTokenizer, epoch: int) -> Sequence:
        """The examples to train on in ``epoch``: ``encoded.examples``, or a new draw of them."""
        ...

    def collate(self, examples: list, tokenizer: SubwordTokenizer) -> Any: ...

    def loss(
        self,
        model,
        batch,
        tokenizer: SubwordTokenizer,
        *,
        epsilon: float,
        loss_fn: Callable[..., LossOutput] = label_smoothed_cross_entropy,
    ) -> LossOutput:
        """The batch's summed loss; ``loss_fn`` computes it from logits (the trainer passes a faster
        equal one), validation leaves the default."""
        ...

    def validate(
        self, model, tokenizer: SubwordTokenizer, valid: Encoded, records: list, device
    ) -> dict[str, float]:
        """Metrics on the validation split: at least ``loss`` (per token) and ``self.metric``."""
        ...

    def picture(self, model, tokenizer: SubwordTokenizer, records: list, device, png: Path) -> str | None:
        """At each validation, a picture for TensorBoard written to ``png`` (its tag), or None."""
        ...


@runtime_checkable
class TextPairTask(Task, Protocol):
    """A task whose examples are pairs of texts (translation): it alone trains from ``data.prepared``
    (``attnkit prepare``'s token ids of text pairs), re-segments its examples with
    ``tokenizer.sample_nbest`` and reverses them with ``train.bidirectional_epochs``."""

    def encode_store(self, store: PairStore, counts: Counts, max_len: int, *, split: str) -> Encoded:
        """Examples from pairs encoded beforehand (``attnkit prepare``); translation only."""
        ...


def check_metrics(task: Task, task_name: str) -> None:
    """A task's declared metrics, checked when the run is built: the metric that picks the best
    checkpoint must be one that ``validate`` reports (``metrics``), and ``loss`` must be among them."""
    if task.metric not in task.metrics:
        raise ConfigError(
            f"task {task_name!r}: its metric {task.metric!r} is not among the metrics its validate reports "
            f"({', '.join(task.metrics)}); declare it in metrics or choose one of them"
        )
    if "loss" not in task.metrics:
        raise ConfigError(f"task {task_name!r}: metrics must include 'loss' (got {', '.join(task.metrics)})")


def check_reported(task: Task, task_name: str, reported: dict[str, float]) -> None:
    """What ``validate`` returned holds every declared metric: else one line naming what is missing."""
    missing = [m for m in task.metrics if m not in reported]
    if missing:
        raise ConfigError(
            f"task {task_name!r}: validate reported {', '.join(reported) or 'nothing'}, not its declared "
            f"metric(s) {', '.join(missing)}"
        )


def takes_text_pairs(task: object) -> bool:
    """Whether a task (its training object, or that object's class) keeps :class:`TextPairTask`."""
    return callable(getattr(task, "encode_store", None))


class SplitTask:
    """What most tasks share: splits of ``self.records`` records, nothing fixed by or kept from the data,
    and ``valid.metric`` chosen among the task's ``choices`` (``metric``, the default, when unset)."""

    records = "pairs"
    metric = "loss"
    metrics: tuple[str, ...] = ("loss",)
    # what valid.metric may name, each with whether higher is better: a metric validate() can report
    # (a new one, COMET say, is one more entry here and one more key of validate())
    choices: ClassVar[dict[str, bool]] = {"loss": False}
    encodes_valid = True

    def __init__(self, cfg: Experiment | None = None, amp: torch.dtype | None = None):
        # cfg None: the defaults (a task used outside a run); amp: the autocast dtype (None: fp32)
        self.cfg, self.amp = cfg, amp
        if cfg is not None and cfg.valid.metric:
            if cfg.valid.metric not in self.choices:
                raise ConfigError(
                    f"valid.metric = {cfg.valid.metric!r}: must be one of {', '.join(self.choices)} "
                    f"for model.arch {cfg.arch!r}"
                )
            self.metric = cfg.valid.metric
        if self.metric not in self.choices:  # a task's own default, misnamed: found before any data is read
            raise ConfigError(
                f"{type(self).__name__}.metric = {self.metric!r} is not among its choices "
                f"({', '.join(self.choices)}): declare it in choices, with whether higher is better"
            )
        self.higher_is_better = self.choices[self.metric]
        if self.metric not in self.metrics:  # e.g. TER: computed, and written to the CSV, only when chosen
            self.metrics = (*self.metrics, self.metric)

    @property
    def valid_batch_tokens(self) -> int:
        return self.cfg.valid.batch_tokens if self.cfg is not None else 8000

    def load(self, data: DataConfig, which: str) -> list:
        return load_records(data, which, self.records)

    def model_fields(self) -> dict[str, Any]:
        return {}

    def checkpoint_fields(self) -> dict[str, Any]:
        return {}

    def restore(self, state: dict) -> None:
        pass

    def picture(self, model, tokenizer: SubwordTokenizer, records: list, device, png: Path) -> str | None:
        return None

    def epoch_examples(self, encoded: Encoded, tokenizer: SubwordTokenizer, epoch: int) -> Sequence:
        return encoded.examples


def batches(
    collate: Callable[[list], Any],
    examples: Sequence,
    lengths: Sequence[tuple[int, int]] | np.ndarray,
    batch_tokens: int,
    device,
) -> Iterator[Any]:
    """Examples in length-sorted batches under a token budget, in a fixed order, moved to ``device``."""
    for idx in TokenBatchSampler(lengths, batch_tokens, shuffle=False):
        yield collate([examples[i] for i in idx]).to(device)


@torch.no_grad()
def mean_loss(
    task: Task,
    model,
    tokenizer: SubwordTokenizer,
    valid: Encoded,
    device,
    *,
    batch_tokens: int,
    amp: torch.dtype | None = None,
) -> float:
    """The loss per predicted token (no label smoothing) over encoded examples."""
    nll, tokens = 0.0, 0
    for batch in batches(
        lambda ex: task.collate(ex, tokenizer), valid.examples, valid.lengths, batch_tokens, device
    ):
        with autocast(device, amp):
            out = task.loss(model, batch, tokenizer, epsilon=0.0)
        nll, tokens = nll + out.nll.item(), tokens + int(out.n_tokens)
    return nll / max(tokens, 1)
