"""Translation as the trainer sees it: sentence pairs -> teacher-forced label-smoothed cross entropy;
validation loss and cased BLEU (through :func:`.scoring.evaluate`, as ``attnkit evaluate`` scores it),
and chrF or TER beside them when ``valid.metric`` picks the best checkpoint by one of them.

Training pairs are encoded into a :class:`~attnkit.data.store.PairStore` (flat arrays), in memory from
the corpus or memory-mapped from ``attnkit prepare``'s folder: both give the same examples in the
same order, so a run trains alike either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch

from ...data import bidirectional, subword_sampling
from ...data.batching import Batch, collate
from ...data.corpus import load_corpus
from ...data.encoded import Encoded
from ...data.examples import load_records, train_tokenizer
from ...data.mix import mix_entries, tag_ids, tags_of, weighted_epochs
from ...data.pairs import Counts, dropped_note, encode_pairs, select
from ...data.store import PairStore, Subset
from ...data.tokenizer import SubwordTokenizer
from ...linear_loss import output_loss
from ...loss import LossOutput, label_smoothed_cross_entropy
from ...plugin.training import SplitTask, mean_loss
from .scoring import evaluate
from .translator import Translator

if TYPE_CHECKING:
    from ...data.config import DataConfig
    from ...experiment import Experiment


class TranslationTask(SplitTask):
    """Keeps :class:`attnkit.plugin.training.TextPairTask`: prepared data, subword sampling and
    bidirectional training apply here."""

    records = "pairs"
    metric = "bleu"
    metrics: tuple[str, ...] = ("loss", "bleu")  # Task.metrics: any length; valid.metric's joins them
    choices: ClassVar[dict[str, bool]] = {"bleu": True, "chrf": True, "ter": False, "loss": False}

    cfg: Experiment  # always given: tokenizer, epochs and validation settings come from it

    def __init__(self, cfg: Experiment, amp: torch.dtype | None = None):
        super().__init__(cfg, amp)
        self._drawn: tuple[int, Sequence] | None = None  # (epoch, its subword-sampled examples)
        self.corpus_sizes: list[int] = []  # training records per corpus: the main one, then data.mix

    def load(self, data: DataConfig, which: str) -> list:
        records = load_records(data, which, self.records)
        if which == "train":
            self.corpus_sizes = [len(records)]
            for entry in mix_entries(data.mix):
                more = load_corpus(entry.spec)
                records, self.corpus_sizes = records + more, [*self.corpus_sizes, len(more)]
        return records

    def train_tokenizer(self, records: list[tuple[str, str]], seed: int) -> SubwordTokenizer:
        return train_tokenizer(records, self.cfg.tokenizer, seed, user_symbols=tags_of(self.cfg.data.mix))

    def encode(self, records, tokenizer, max_len, *, split: str) -> Encoded:
        train = split == "train"
        sizes = self.corpus_sizes if train and self.corpus_sizes else [len(records)]
        bounds = np.cumsum([0, *sizes])
        corpora = [records[bounds[k] : bounds[k + 1]] for k in range(len(sizes))]
        drop_identical = train and self.cfg.data.drop_identical
        tags = tag_ids(tokenizer, self.cfg.data.mix) if train else []
        store, counts = encode_pairs(tokenizer, corpora, tags=tags, drop_identical=drop_identical)
        encoded = self.encode_store(store, counts, max_len, split=split)
        if train:  # subword sampling re-segments the text each epoch
            subword_sampling.keep_text(self.cfg, encoded, records, drop_identical, counts.empty, max_len)
        return encoded

    def encode_store(self, store: PairStore, counts: Counts, max_len: int, *, split: str) -> Encoded:
        """The pairs of ``store`` that pass the length filters, ready for the sampler."""
        train = split == "train"
        ratio = self.cfg.data.max_len_ratio if train else 0.0
        lengths = store.lengths()  # (N, 2)
        sel = select(lengths, max_len, ratio, split=split)
        kept = lengths[sel.index]  # (M, 2)
        kept[:, 1] += 1  # bos (in) / eos (out)
        encoded = Encoded(Subset(store, sel.index), kept, dropped_note(split, counts, sel, max_len, ratio))
        if train and self.cfg.data.mix:
            weights = [1.0, *(e.weight for e in mix_entries(self.cfg.data.mix))]
            encoded.epoch_indices = weighted_epochs(store.corpus[sel.index], weights, self.cfg.train.seed)
        if train:
            bidirectional.add_reversed(self.cfg, encoded)
        return encoded

    def epoch_examples(self, encoded, tokenizer, epoch: int) -> Sequence:
        """With ``tokenizer.sample_nbest``, the training pairs as ``epoch``'s subword sampling draws them
        (:func:`attnkit.data.subword_sampling.draw`).

        Batches are packed from the best segmentation's lengths, so a batch may hold more tokens
        than ``train.max_tokens`` (Multi30k at 4,096 tokens, nbest 64, alpha 0.1: 1.15x on average,
        1.36x at most): lower the budget where memory is tight. The sampler moves to the next epoch
        as it hands out an epoch's last batch, so the step that trains on it reads the next epoch's draw.
        """
        if encoded.corpus is None:
            return encoded.examples
        if self._drawn is None or self._drawn[0] != epoch:
            self._drawn = (epoch, subword_sampling.draw(self.cfg, encoded, tokenizer, epoch))
        return self._drawn[1]

    def collate(self, examples, tokenizer) -> Batch:
        return collate(examples, **tokenizer.vocabulary.special_ids)

    def loss(
        self, model, batch, tokenizer, *, epsilon: float, loss_fn=label_smoothed_cross_entropy
    ) -> LossOutput:
        inputs, pad_id = (batch.src, batch.tgt_in), tokenizer.vocabulary.pad_id
        return output_loss(model, inputs, batch.tgt_out, loss_fn, epsilon=epsilon, pad_id=pad_id)

    def picture(self, model, tokenizer, records: list, device, png: Path) -> str | None:
        """The first validation sentence's cross-attention, every layer and head (TensorBoard's)."""
        from ...plotting import plot_attention
        from .maps import attention_maps

        if not records:
            return None
        maps = attention_maps(Translator(model, tokenizer, device), records[0][0], beam=1)
        if maps.cross is None:
            return None
        plot_attention(maps.cross, maps.src_pieces, maps.tgt_pieces, png)
        return "attention/cross"

    def validate(self, model, tokenizer, valid: Encoded, records, device) -> dict[str, float]:
        v = self.cfg.valid
        loss = mean_loss(self, model, tokenizer, valid, device, batch_tokens=v.batch_tokens, amp=self.amp)
        pairs = records[: v.max_sentences or None]
        result = evaluate(
            Translator(model, tokenizer, device),
            [s for s, _ in pairs],
            [t for _, t in pairs],
            beam=v.beam_size,
            length_penalty=v.length_penalty,
            batch_tokens=v.batch_tokens,
            ter="ter" in self.metrics,  # slow on poor output: only when it picks the best checkpoint
        )
        s = result.scores
        found = {"loss": loss, "bleu": s.bleu, "chrf": s.chrf}
        if s.ter is not None:
            found["ter"] = s.ter
        return {name: found[name] for name in self.metrics}
