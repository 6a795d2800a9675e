"""What a task is: the training object the loop calls, and the one record of everything else.

A task (translation, language modelling, classification) lives in one package of
:mod:`attnkit.tasks`: its training object (reads its splits, encodes records into examples, batches
them, computes a batch's loss and validation metrics), its inference wrapper, its metrics and its one
evaluation function (used by the trainer's validation and by ``attnkit evaluate`` alike), and the
object the server serves. :class:`TaskInfo` names these parts, and :mod:`attnkit.tasks` maps every
``model.arch`` to its task: the trainer, the server and the commands ask that map, nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

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
    prepared: bool  # whether it trains from data.prepared (attnkit prepare's token ids of text pairs)
    subword_sampling: bool  # whether tokenizer.sample_nbest can re-segment its examples
    bidirectional: bool  # whether train.bidirectional_epochs can reverse its examples

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

    def encode_store(self, store: PairStore, counts: Counts, max_len: int, *, split: str) -> Encoded:
        """Examples from pairs encoded beforehand (``attnkit prepare``); translation only."""
        ...

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
    prepared = False
    subword_sampling = False
    bidirectional = False

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

    def encode_store(self, store: PairStore, counts: Counts, max_len: int, *, split: str) -> Encoded:
        raise ConfigError("prepared data holds token ids of text pairs; this task does not train from it")


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


@dataclass(frozen=True)
class TaskInfo:
    """One task's parts, as the rest of attnkit finds them (through :mod:`.registry`).

    name: the task's name, as ``task:`` in a config and the server's API say it ("translate").
    noun: what a model of the task is called in messages ("a translation model").
    archs: the ``model.arch`` values whose models this task trains and serves; a config without
    ``task:`` takes the first registered task that lists its arch.
    records: the kind of record it reads ("pairs", "text", "labelled").
    training: the trainer's task object, built from ``(Experiment, amp)``, amp the autocast dtype.
    open: the inference wrapper from a loaded checkpoint: ``open(state, device=..., path=...)``.
    serve: the server's model from ``(name, state, device)``.
    endpoints: the server endpoints (``/v1/NAME``) that answer for this task.
    routes: ``"module:function"``, the function that adds those endpoints to the app
    (``function(app, server)``, :class:`attnkit.serve.app.Server`); imported only by the server.
    commands: the task's command-line verbs, verb -> ``"module"`` holding ``add_parser`` and ``run``.
    evaluate: ``"module:function"``, what ``attnkit evaluate`` runs: ``function(args, state)``.
    evaluate_flags: the flags of ``attnkit evaluate`` that only some tasks read which it reads
    (``--src``, ``--ref``, ``--hyp-output``, ``--lowercase``, ``--input``, ``--confusion``).
    attention: ``"module:function"``, what ``attnkit attention`` runs: ``function(args, state)``.
    attention_flags: what it reads and writes beyond ``--out``: ``--text`` or ``--image``, ``--html``.
    page: the package whose ``static/`` holds the task's panel of the attention page (``panel.js``,
    which calls ``registerPanel``; ``input.html`` and ``view.html`` where it has them), or None.
    """

    name: str
    noun: str
    archs: tuple[str, ...]
    records: str
    training: Callable[..., Task]
    open: Callable[..., Any]
    serve: Callable[[str, dict[str, Any], str], Any]
    endpoints: tuple[str, ...]
    routes: str | None = None
    commands: Mapping[str, str] = field(default_factory=dict)
    evaluate: str | None = None
    evaluate_flags: tuple[str, ...] = ()
    attention: str | None = None
    attention_flags: tuple[str, ...] = ("--text",)
    page: str | None = None

    def command_names(self) -> tuple[str, ...]:
        return tuple(self.commands)


def as_list(inputs: Any, one: tuple[type, ...] = (str,)) -> list:
    """The one shape every task's wrapper takes: one input (an instance of ``one``) or a sequence of
    them, as a list. Results are always a list, one per input, in order."""
    if isinstance(inputs, one):
        return [inputs]
    if isinstance(inputs, (str, bytes)):  # a string where another kind belongs: never its characters
        raise ConfigError(
            f"expected {' or '.join(t.__name__ for t in one)} or a list of them, got {inputs!r:.60}"
        )
    return list(inputs)


def parameter_count(model) -> int:
    """Parameters of a served model, each shared tensor once (tied embeddings count once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
