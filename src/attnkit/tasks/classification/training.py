"""Classification as the trainer sees it, for an encoder classifier.

A training example is a text's pieces (a text pair: pieces of text_a, eos, pieces of text_b) and
its class id; the label names are sorted from the training split, fix the model's ``n_classes`` and
are stored in every checkpoint (``labels``, in class-id order), so ``attnkit classify`` names them.
Loss: cross entropy per example (label-smoothed as ``train.label_smoothing`` says); validation
metric macro-F1 (higher is better), with accuracy and the loss beside it, through
:func:`.scoring.evaluate_examples`, as ``attnkit evaluate`` scores them.

Legend: B batch, T length, C classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor

from ...data.batching import pad_sequences
from ...data.config import DataConfig
from ...data.encoded import Encoded
from ...data.examples import load_records, train_text_tokenizer
from ...data.readers import LabelledExample, label_set
from ...data.tokenizer import SubwordTokenizer
from ...errors import DataError
from ...loss import LossOutput, label_smoothed_cross_entropy
from ...plugin.training import SplitTask
from .inputs import classifier_pieces, example_text
from .scoring import NO_PAD, evaluate_examples


@dataclass
class ClassifierBatch:
    tokens: Tensor  # (B, T) right-padded
    labels: Tensor  # (B,) class ids
    n_tgt_tokens: int  # examples: the loss is averaged per example

    def to(self, device, non_blocking: bool = False) -> ClassifierBatch:
        return ClassifierBatch(
            self.tokens.to(device, non_blocking=non_blocking),
            self.labels.to(device, non_blocking=non_blocking),
            self.n_tgt_tokens,
        )

    def __len__(self) -> int:
        return self.tokens.size(0)


class ClassifierTask(SplitTask):
    """Cross entropy over labelled texts; metric macro-F1, higher is better.

    Keeps :class:`attnkit.plugin.Task`. ``labels``: the classes, when known before the training
    split is read (tests, resuming); else :meth:`load` of the training split sets them.
    """

    records = "labelled"
    encodes_valid = False  # validation scores the records themselves (evaluate_examples)
    metric = "macro_f1"
    metrics: tuple[str, ...] = ("loss", "accuracy", "macro_f1")  # Task.metrics: any length
    choices: ClassVar[dict[str, bool]] = {"macro_f1": True, "accuracy": True, "loss": False}

    def __init__(self, cfg=None, amp: torch.dtype | None = None, *, labels: Sequence[str] = ()):
        super().__init__(cfg, amp)
        self.labels: list[str] = []
        if labels:
            self.set_labels(labels)

    def set_labels(self, labels: Sequence[str]) -> None:
        if len(labels) < 2:
            raise DataError(f"a classifier needs at least 2 labels in the training split, got {list(labels)}")
        self.labels = list(labels)
        self.index = {label: c for c, label in enumerate(self.labels)}

    # -- data ------------------------------------------------------------------------------------
    def load(self, data: DataConfig, which: str) -> list[LabelledExample]:
        if which == "train":
            records = load_records(data, "train", self.records)
            self.set_labels(label_set(records))
            return records
        if not self.labels:
            raise RuntimeError("load the training split first: it gives the label set")
        return load_records(data, which, self.records, labels=self.labels)

    def model_fields(self) -> dict[str, Any]:
        return {"n_classes": len(self.labels)}

    def checkpoint_fields(self) -> dict[str, Any]:
        return {"labels": list(self.labels)}

    def restore(self, state: dict) -> None:
        if isinstance(state.get("labels"), list):
            self.set_labels([str(x) for x in state["labels"]])

    def train_tokenizer(self, records: Sequence[LabelledExample], seed: int) -> SubwordTokenizer:
        texts = [t for r in records for t in (r.text, r.text_b) if t is not None]
        assert self.cfg is not None, "the trainer builds its task with the run's config"
        return train_text_tokenizer(texts, self.cfg.tokenizer, seed)

    def encode(
        self,
        records: Sequence[LabelledExample],
        tokenizer: SubwordTokenizer,
        max_len: int,
        *,
        split: str = "train",
    ) -> Encoded:
        """(pieces, class id) per record; a text longer than ``max_len`` pieces is cut to its prefix
        (a classifier reads a prefix rather than losing the example)."""
        examples, cut = [], 0
        for r in records:
            ids = classifier_pieces(tokenizer, example_text(r))
            if len(ids) > max_len:
                ids, cut = ids[:max_len], cut + 1
            if not ids:  # text of nothing but characters the tokenizer drops
                raise DataError(f"the {split} split has an example ({r.text[:40]!r}) with no subword tokens")
            examples.append((ids, self.index[r.label]))
        dropped = f"cut {cut} {split} text(s) to their first {max_len} subwords" if cut else ""
        return Encoded(examples, [(len(ids), 0) for ids, _ in examples], dropped)

    def collate(
        self, examples: Sequence[tuple[list[int], int]], tokenizer: SubwordTokenizer
    ) -> ClassifierBatch:
        tokens = pad_sequences([ids for ids, _ in examples], tokenizer.pad_id)  # (B, T)
        labels = torch.tensor([c for _, c in examples], dtype=torch.long)  # (B,)
        return ClassifierBatch(tokens, labels, len(examples))

    # -- loss and metrics ------------------------------------------------------------------------
    def loss(
        self,
        model,
        batch: ClassifierBatch,
        tokenizer: SubwordTokenizer,
        *,
        epsilon: float = 0.0,
        loss_fn=label_smoothed_cross_entropy,
    ) -> LossOutput:
        return loss_fn(model(batch.tokens), batch.labels, epsilon=epsilon, pad_id=NO_PAD)  # logits (B, C)

    def validate(self, model, tokenizer, valid: Encoded, records, device) -> dict[str, float]:
        loss, report = evaluate_examples(
            model,
            tokenizer,
            self.labels,
            records,
            device,
            batch_tokens=self.valid_batch_tokens,
            amp=self.amp,
        )
        return {"loss": loss, "accuracy": report.accuracy, "macro_f1": report.macro_f1}
