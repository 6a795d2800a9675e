"""Translation as the trainer sees it: sentence pairs -> teacher-forced label-smoothed cross entropy;
validation loss and cased BLEU (through :func:`.scoring.evaluate`, as ``attnkit evaluate`` scores it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...data.batching import Batch, collate
from ...data.examples import BidirectionalPairs, SampledPairs, encode_training_pairs, train_tokenizer
from ...data.tokenizer import SubwordTokenizer
from ...loss import LossOutput, label_smoothed_cross_entropy
from ..base import Encoded, SplitTask, mean_loss
from .scoring import evaluate
from .translator import Translator

if TYPE_CHECKING:
    from ...train.config import ExperimentConfig


class TranslationTask(SplitTask):
    """Keeps :class:`attnkit.tasks.base.Task`; ``subword_sampling`` and ``bidirectional`` apply here."""

    records = "pairs"
    metric = "bleu"
    metrics: tuple[str, ...] = ("loss", "bleu")  # Task.metrics: any length
    higher_is_better = True
    subword_sampling = True
    bidirectional = True

    cfg: ExperimentConfig  # always given: tokenizer, epochs and validation settings come from it

    def __init__(self, cfg: ExperimentConfig, bf16: bool = False):
        super().__init__(cfg, bf16)
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
            drawn: Sequence = SampledPairs(
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

    def validate(self, model, tokenizer, valid: Encoded, records, device) -> dict[str, float]:
        v = self.cfg.valid
        loss = mean_loss(self, model, tokenizer, valid, device, batch_tokens=v.batch_tokens, bf16=self.bf16)
        pairs = records[: v.max_sentences or None]
        result = evaluate(
            Translator(model, tokenizer, device),
            [s for s, _ in pairs],
            [t for _, t in pairs],
            beam=v.beam_size,
            length_penalty=v.length_penalty,
            batch_tokens=v.batch_tokens,
        )
        return {"loss": loss, "bleu": result.scores.bleu}
