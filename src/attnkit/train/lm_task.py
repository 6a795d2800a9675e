"""The language-model task: what the trainer asks of a task, for a decoder-only model.

A training example is one text's pieces; the model reads bos + pieces and predicts pieces + eos
(teacher forcing), so the loss is the next-token cross entropy summed over every predicted token,
eos included. Validation reports perplexity (lower is better) and bits per token.

Legend: B batch, T length (pieces + 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ..data.batching import TokenBatchSampler, collate_lm
from ..data.tokenizer import SubwordTokenizer
from ..errors import DataError
from ..loss import LossOutput, label_smoothed_cross_entropy
from ..task_metrics import LMScores, lm_scores
from .task import Encoded, SplitTask


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

    Keeps :class:`attnkit.train.task.Task`: the trainer calls it as it calls the translation task.
    Reads text records: ``corpus: multi30k`` with ``lang``, ``text`` files, or ``hf`` with ``text_field``.
    """

    records = "text"
    metric = "perplexity"
    metrics = ("loss", "perplexity")
    higher_is_better = False

    def __init__(self, cfg=None, bf16: bool = False):
        self.cfg, self.bf16 = cfg, bf16

    def train_tokenizer(self, records: list, seed: int) -> SubwordTokenizer:
        texts = [t for t in records if t.strip()]
        if not texts:
            raise DataError("cannot train a tokenizer: the training text is empty")
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
        return loss_fn(
            model(batch.tokens), batch.targets, epsilon=epsilon, pad_id=tokenizer.vocabulary.pad_id
        )

    @torch.no_grad()
    def scores(self, model, tokenizer, valid: Encoded, device, batch_tokens: int = 8000) -> LMScores:
        nll, n = 0.0, 0
        for idx in TokenBatchSampler(valid.lengths, batch_tokens, shuffle=False):
            batch = self.collate([valid.examples[i] for i in idx], tokenizer).to(device)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=self.bf16):
                out = self.loss(model, batch, tokenizer, epsilon=0.0)
            nll, n = nll + out.nll.item(), n + out.n_tokens
        return lm_scores(nll, n)

    def validate(self, model, tokenizer, valid: Encoded, records, device) -> dict[str, float]:
        batch_tokens = self.cfg.valid.batch_tokens if self.cfg is not None else 8000
        s = self.scores(model, tokenizer, valid, device, batch_tokens)
        return {"loss": s.loss, "perplexity": s.perplexity}
