"""What differs between tasks, as small objects the training loop calls: the loop knows none of it.

A task reads its splits (the kind of record it needs), turns raw records into encoded examples,
examples into batches, a batch into a loss, and a model into validation metrics; it names the metric
that picks the best checkpoint and says whether higher is better. What the data fixes about the model
(a classifier's number of classes) and what the checkpoint must keep beside it (the label names)
come from the task too. Translation is here; a language model or a classifier adds a class with the
same methods (:class:`Task`, ``epoch_examples`` included: :class:`SplitTask` gives the plain one)
and one entry in ``TASKS`` (train/build.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from ..data.batching import Batch, TokenBatchSampler, collate
from ..data.config import DataConfig
from ..data.tokenizer import SubwordTokenizer
from ..loss import LossOutput, label_smoothed_cross_entropy
from ..metrics import corpus_scores
from ..translate import Translator
from .config import ExperimentConfig
from .data import BidirectionalPairs, SampledPairs, encode_training_pairs, load_records, train_tokenizer


@dataclass
class Encoded:
    """Examples ready to batch, their (source, target) lengths for the sampler, and what was dropped."""

    examples: list[Any]
    lengths: list[tuple[int, int]]
    dropped: str = ""  # a sentence for the log ("skipped 3 pairs with an empty side"), or ""
    corpus: Any = None  # what a task keeps to re-encode the examples each epoch (subword sampling), or None
    epoch_size: Callable[[int], int] | None = None  # how many leading examples epoch e trains on (None: all)


class Task(Protocol):
    records: str  # what it reads: "pairs", "text" or "labelled" (train/data.py load_records)
    metric: str  # the validation metric that picks the best checkpoint, e.g. "bleu"
    metrics: tuple[str, ...]  # every key validate() returns, in the metrics CSV's order
    higher_is_better: bool

    def load(self, data: DataConfig, which: str) -> list:
        """The raw records of split ``which``; the training split is read first."""
        ...

    def model_fields(self) -> dict[str, Any]:
        """Model-config fields the data fixes (after ``load("train")``), e.g. ``n_classes``."""
        ...

    def checkpoint_fields(self) -> dict[str, Any]:
        """Kept in every checkpoint beside the model (e.g. ``labels``); a resumed run must match them."""
        ...

    def train_tokenizer(self, records: list, seed: int) -> SubwordTokenizer: ...

    def encode(self, records: list, tokenizer: SubwordTokenizer, max_len: int, *, split: str) -> Encoded: ...

    def epoch_examples(self, encoded: Encoded, tokenizer: SubwordTokenizer, epoch: int) -> Sequence:
        """The examples to train on in ``epoch``: ``encoded.examples``, or a new draw of them."""
        ...

    def collate(self, examples: list, tokenizer: SubwordTokenizer) -> Batch: ...

    def loss(
        self, model, batch: Batch, tokenizer: SubwordTokenizer, *, epsilon: float, loss_fn
    ) -> LossOutput: ...

    def validate(
        self, model, tokenizer: SubwordTokenizer, valid: Encoded, records: list, device
    ) -> dict[str, float]:
        """Metrics on the validation split: at least ``loss`` (per token) and ``self.metric``."""
        ...


class SplitTask:
    """What most tasks share: splits of ``self.records`` records, nothing fixed by or kept from the data."""

    records = "pairs"

    def load(self, data: DataConfig, which: str) -> list:
        return load_records(data, which, self.records)

    def model_fields(self) -> dict[str, Any]:
        return {}

    def checkpoint_fields(self) -> dict[str, Any]:
        return {}

    def epoch_examples(self, encoded: Encoded, tokenizer: SubwordTokenizer, epoch: int) -> Sequence:
        return encoded.examples


class TranslationTask(SplitTask):
    """Sentence pairs -> teacher-forced label-smoothed cross entropy; validation loss and cased BLEU."""

    records = "pairs"
    metric = "bleu"
    metrics = ("loss", "bleu")
    higher_is_better = True

    def __init__(self, cfg: ExperimentConfig, bf16: bool = False):
        self.cfg, self.bf16 = cfg, bf16
        self._drawn: tuple[int, Sequence] | None = None  # (epoch, its subword-sampled examples)

    def train_tokenizer(self, records: list[tuple[str, str]], seed: int) -> SubwordTokenizer:
        return train_tokenizer(records, self.cfg.tokenizer, seed)

    def encode(self, records, tokenizer, max_len, *, split: str) -> Encoded:
        corpus = encode_training_pairs(records, tokenizer, max_len, split=split)
        dropped = ""
        if corpus.n_empty or corpus.n_too_long:
            dropped = (
                f"skipped {corpus.n_empty} {split} pair(s) with an empty side and {corpus.n_too_long} "
                f"longer than {max_len} subwords (data.max_len, model.max_len)"
            )
        lengths = [(len(s), len(t) + 1) for s, t in corpus.examples]  # +1: bos (in) / eos (out)
        keep = split == "train" and self.cfg.tokenizer.sample_nbest > 0
        encoded = Encoded(corpus.examples, lengths, dropped, (corpus, max_len) if keep else None)
        epochs = self.cfg.train.bidirectional_epochs if split == "train" else 0
        if epochs:  # the reversed pairs follow; epochs from `epochs` on batch only the first n
            n = len(corpus.examples)
            encoded.examples = BidirectionalPairs(corpus.examples)
            encoded.lengths = lengths + [(len(t), len(s) + 1) for s, t in corpus.examples]
            encoded.epoch_size = lambda epoch: 2 * n if epoch < epochs else n
        return encoded

    def epoch_examples(self, encoded, tokenizer, epoch: int) -> Sequence:
        """With ``tokenizer.sample_nbest``, the training pairs as ``epoch``'s subword sampling draws
        them (from the run's seed, the epoch and the example's index: see ``SampledPairs``).

        Batches are packed from the best segmentation's lengths, so a batch may hold more tokens
        than ``train.max_tokens`` (Multi30k at 4,096 tokens, nbest 64, alpha 0.1: 1.15x on average,
        1.36x at most): lower the budget where memory is tight. The sampler moves to the next epoch
        as it hands out an epoch's last batch, so the step that trains on it reads the next epoch's draw.
        """
        if encoded.corpus is None:
            return encoded.examples
        if self._drawn is None or self._drawn[0] != epoch:
            tk, (corpus, max_len) = self.cfg.tokenizer, encoded.corpus
            seed = (self.cfg.train.seed % 2**64, epoch)  # SeedSequence takes non-negative integers
            drawn = SampledPairs(
                corpus, tokenizer, max_len, nbest=tk.sample_nbest, alpha=tk.sample_alpha, seed=seed
            )
            if encoded.epoch_size is not None:  # bidirectional: the reversed draw follows
                drawn = BidirectionalPairs(drawn)
            self._drawn = (epoch, drawn)
        return self._drawn[1]

    def collate(self, examples, tokenizer) -> Batch:
        return collate(examples, **tokenizer.vocabulary.special_ids)

    def loss(
        self, model, batch, tokenizer, *, epsilon: float, loss_fn=label_smoothed_cross_entropy
    ) -> LossOutput:
        logits = model(batch.src, batch.tgt_in)  # (B, T, V)
        return loss_fn(logits, batch.tgt_out, epsilon=epsilon, pad_id=tokenizer.vocabulary.pad_id)

    @torch.no_grad()
    def validate(self, model, tokenizer, valid: Encoded, records, device) -> dict[str, float]:
        v = self.cfg.valid
        nll, tokens = 0.0, 0
        for idx in TokenBatchSampler(valid.lengths, v.batch_tokens, shuffle=False):
            batch = self.collate([valid.examples[i] for i in idx], tokenizer).to(device)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=self.bf16):
                out = self.loss(model, batch, tokenizer, epsilon=0.0)
            nll, tokens = nll + out.nll.item(), tokens + out.n_tokens
        pairs = records[: v.max_sentences or None]
        hyps = Translator(model, tokenizer, device).translate(
            [s for s, _ in pairs],
            beam=v.beam_size,
            length_penalty=v.length_penalty,
            batch_tokens=v.batch_tokens,
        )
        bleu = corpus_scores([h.text for h in hyps], [t for _, t in pairs]).bleu
        return {"loss": nll / max(tokens, 1), "bleu": bleu}
