"""The classification task: what the trainer asks of a task, for an encoder classifier.

A training example is a text's pieces (a text pair: pieces of text_a, eos, pieces of text_b) and
its class id; the label names are sorted from the training split, fix the model's ``n_classes`` and
are stored in every checkpoint (``labels``, in class-id order), so ``attnkit classify`` names them.
Loss: cross entropy per example (label-smoothed as ``train.label_smoothing`` says); validation
metric macro-F1 (higher is better), with accuracy and the loss beside it.

Legend: B batch, T length, C classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ..classify import classifier_pieces, example_text
from ..data.batching import TokenBatchSampler
from ..data.config import DataConfig
from ..data.readers import LabelledExample, label_set
from ..data.tokenizer import SubwordTokenizer
from ..errors import DataError
from ..loss import LossOutput, label_smoothed_cross_entropy
from ..task_metrics import ClassificationReport, classification_report
from .data import load_records
from .task import Encoded

NO_PAD = -1  # class ids are never negative: the token loss, given this pad id, counts every example


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


class ClassifierTask:
    """Cross entropy over labelled texts; metric macro-F1, higher is better.

    Keeps :class:`attnkit.train.task.Task`. ``labels``: the classes, when known before the training
    split is read (tests, resuming); else :meth:`load` of the training split sets them.
    """

    records = "labelled"
    metric = "macro_f1"
    metrics = ("loss", "accuracy", "macro_f1")
    higher_is_better = True

    def __init__(self, cfg=None, bf16: bool = False, *, labels: Sequence[str] = ()):
        self.cfg, self.bf16 = cfg, bf16
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

    def epoch_examples(self, encoded, tokenizer: SubwordTokenizer, epoch: int) -> list:
        return encoded.examples

    def train_tokenizer(self, records: Sequence[LabelledExample], seed: int) -> SubwordTokenizer:
        texts = [t for r in records for t in (r.text, r.text_b) if t is not None and t.strip()]
        tok = self.cfg.tokenizer
        return SubwordTokenizer.train(
            texts,
            texts,
            vocab_size=tok.vocab_size,
            model_type=tok.model_type,
            character_coverage=tok.character_coverage,
            seed=seed,
        )

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
        T = max(len(ids) for ids, _ in examples)
        tokens = torch.full((len(examples), T), tokenizer.pad_id, dtype=torch.long)  # (B, T)
        for r, (ids, _) in enumerate(examples):
            tokens[r, : len(ids)] = torch.tensor(ids)
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

    @torch.no_grad()
    def report(
        self, model, tokenizer, valid: Encoded, device, batch_tokens: int = 8000
    ) -> tuple[float, ClassificationReport]:
        """(mean loss per example, the classification report) on encoded examples."""
        nll, n, gold, predicted = 0.0, 0, [], []
        for idx in TokenBatchSampler(valid.lengths, batch_tokens, shuffle=False):
            batch = self.collate([valid.examples[i] for i in idx], tokenizer).to(device)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=self.bf16):
                logits = model(batch.tokens)  # (B, C)
            out = label_smoothed_cross_entropy(logits, batch.labels, epsilon=0.0, pad_id=NO_PAD)
            nll, n = nll + out.nll.item(), n + out.n_tokens
            predicted += logits.argmax(-1).tolist()
            gold += batch.labels.tolist()
        return nll / max(n, 1), classification_report(gold, predicted, self.labels)

    def validate(self, model, tokenizer, valid: Encoded, records, device) -> dict[str, float]:
        batch_tokens = self.cfg.valid.batch_tokens if self.cfg is not None else 8000
        loss, report = self.report(model, tokenizer, valid, device, batch_tokens)
        return {"loss": loss, "accuracy": report.accuracy, "macro_f1": report.macro_f1}
