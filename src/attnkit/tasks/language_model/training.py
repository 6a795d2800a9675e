"""Language modelling as the trainer sees it, for a decoder-only model.

A training example is one text's pieces; the model reads bos + pieces and predicts pieces + eos
(teacher forcing), so the loss is the next-token cross entropy summed over every predicted token,
eos included. Validation reports perplexity (lower is better) through :func:`.scoring.score_texts`,
as ``attnkit evaluate`` does.

Legend: B batch, T length (pieces + 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from torch import Tensor

from ...data.batching import collate_lm
from ...data.encoded import Encoded
from ...data.examples import train_text_tokenizer
from ...data.tokenizer import SubwordTokenizer
from ...errors import DataError
from ...linear_loss import output_loss
from ...loss import LossOutput, label_smoothed_cross_entropy
from ...plugin.training import SplitTask
from .scoring import score_texts


@dataclass
class LMBatch:
    tokens: Tensor  # (B, T) bos + text, right-padded
    targets: Tensor  # (B, T) text + eos, right-padded
    n_tgt_tokens: int  # predicted tokens (non-pad targets): the loss is averaged over these

    def to(self, device, non_blocking: bool = False) -> LMBatch:
        return LMBatch(
            self.tokens.to(device, non_blocking=non_blocking),
            self.targets.to(device, non_blocking=non_blocking),
            self.n_tgt_tokens,
        )

    def __len__(self) -> int:
        return self.tokens.size(0)


class LanguageModelTask(SplitTask):
    """Next-token prediction over texts; validation metric perplexity, lower is better.

    Reads text records: ``corpus: multi30k`` with ``lang``, ``text`` files, or ``hf`` with ``text_field``.
    """

    records = "text"
    encodes_valid = False  # validation scores the records themselves (score_texts)
    metric = "perplexity"
    metrics: tuple[str, ...] = ("loss", "perplexity")  # Task.metrics: any length
    choices: ClassVar[dict[str, bool]] = {"perplexity": False, "loss": False}

    def train_tokenizer(self, records: list, seed: int) -> SubwordTokenizer:
        assert self.cfg is not None, "the trainer builds its task with the run's config"
        return train_text_tokenizer(records, self.cfg.tokenizer, seed)

    def encode(
        self, records: Sequence, tokenizer: SubwordTokenizer, max_len: int, *, split: str = "train"
    ) -> Encoded:
        """Each text's pieces; empty texts and texts of more than ``max_len`` pieces are skipped."""
        texts = list(records)
        kept = [t for t in texts if t.strip()]
        ids = tokenizer.encode_batch(kept, side="tgt")
        examples = [s for s in ids if len(s) <= max_len]
        if not examples:
            raise DataError(
                f"the {split} split has no text of 1..{max_len} subword tokens (data.max_len, model.max_len)"
            )
        n_empty, n_long = len(texts) - len(kept), len(ids) - len(examples)
        dropped = (
            f"skipped {n_empty} empty {split} text(s) and {n_long} longer than {max_len} subwords"
            if n_empty or n_long
            else ""
        )
        return Encoded(examples, [(0, len(s)) for s in examples], dropped)

    def collate(self, examples: Sequence[list[int]], tokenizer: SubwordTokenizer) -> LMBatch:
        v = tokenizer.vocabulary
        tokens, targets = collate_lm(examples, pad_id=v.pad_id, bos_id=v.bos_id, eos_id=v.eos_id)  # (B, T)
        return LMBatch(tokens, targets, int((targets != v.pad_id).sum()))

    def loss(
        self,
        model,
        batch: LMBatch,
        tokenizer: SubwordTokenizer,
        *,
        epsilon: float = 0.0,
        loss_fn=label_smoothed_cross_entropy,
    ) -> LossOutput:
        pad_id = tokenizer.vocabulary.pad_id
        return output_loss(model, (batch.tokens,), batch.targets, loss_fn, epsilon=epsilon, pad_id=pad_id)

    def validate(self, model, tokenizer, valid: Encoded, records, device) -> dict[str, float]:
        s = score_texts(model, tokenizer, records, device, batch_tokens=self.valid_batch_tokens, amp=self.amp)
        return {"loss": s.loss, "perplexity": s.perplexity}
