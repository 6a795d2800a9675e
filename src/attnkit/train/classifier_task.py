"""The classification task: what the trainer asks of a task, for an encoder classifier.

A training example is a text's pieces (a text pair: pieces of text_a, eos, pieces of text_b) and
its class id; the label names are sorted from the training split and stored in the checkpoint.
Loss: cross entropy per example; validation metric macro-F1 (higher is better), with accuracy and
per-class precision/recall beside it.

Legend: B batch, T length, C classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ..classify import classifier_pieces
from ..data.tokenizer import SubwordTokenizer
from ..errors import DataError
from ..task_metrics import ClassificationReport, classification_report


@dataclass
class ClassifierBatch:
    tokens: Tensor  # (B, T) right-padded
    labels: Tensor  # (B,) class ids
    n_tokens: int  # examples: the loss is averaged per example

    def to(self, device, non_blocking: bool = False) -> ClassifierBatch:
        return ClassifierBatch(self.tokens.to(device, non_blocking=non_blocking),
                               self.labels.to(device, non_blocking=non_blocking), self.n_tokens)  # fmt: skip

    def __len__(self) -> int:
        return self.tokens.size(0)


class ClassifierTask:
    """Cross entropy over labelled texts; metric macro-F1, higher is better."""

    arch = "classifier"
    metric = "macro_f1"
    higher_is_better = True

    def __init__(self, tokenizer: SubwordTokenizer, labels: Sequence[str]):
        if len(labels) < 2:
            raise DataError(f"a classifier needs at least 2 labels in the training split, got {list(labels)}")
        self.tokenizer, self.labels = tokenizer, list(labels)
        self.index = {label: c for c, label in enumerate(self.labels)}

    def pieces(self, text: str, text_b: str | None = None) -> list[int]:
        return classifier_pieces(self.tokenizer, text if text_b is None else (text, text_b))

    def encode(self, records: Sequence, max_len: int) -> tuple[list[tuple[list[int], int]], int]:
        """(examples, n_truncated): records have .label, .text, .text_b; texts longer than max_len are
        cut (a classifier reads a prefix rather than losing the example)."""
        examples, cut = [], 0
        for r in records:
            ids = self.pieces(r.text, r.text_b)
            if len(ids) > max_len:
                ids, cut = ids[:max_len], cut + 1
            examples.append((ids, self.index[r.label]))
        return examples, cut

    @staticmethod
    def lengths(examples: Sequence[tuple[list[int], int]]) -> list[tuple[int, int]]:
        return [(len(ids), 0) for ids, _ in examples]

    def collate(self, examples: Sequence[tuple[list[int], int]]) -> ClassifierBatch:
        T = max(len(ids) for ids, _ in examples)
        tokens = torch.full((len(examples), T), self.tokenizer.pad_id, dtype=torch.long)
        for r, (ids, _) in enumerate(examples):
            tokens[r, : len(ids)] = torch.tensor(ids)
        labels = torch.tensor([c for _, c in examples], dtype=torch.long)
        return ClassifierBatch(tokens, labels, len(examples))

    def loss(self, model, batch: ClassifierBatch) -> tuple[Tensor, Tensor]:
        ce = F.cross_entropy(model(batch.tokens).float(), batch.labels, reduction="sum")
        return ce, ce.detach()

    @torch.no_grad()
    def evaluate(self, model, batches) -> ClassificationReport:
        gold, predicted = [], []
        for batch in batches:
            predicted += model(batch.tokens).argmax(-1).tolist()
            gold += batch.labels.tolist()
        return classification_report(gold, predicted, self.labels)

    @staticmethod
    def score(report: ClassificationReport) -> float:
        return report.macro_f1
