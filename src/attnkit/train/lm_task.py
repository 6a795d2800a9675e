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
import torch.nn.functional as F
from torch import Tensor

from ..data.tokenizer import SubwordTokenizer
from ..errors import DataError
from ..task_metrics import LMScores, lm_scores


@dataclass
class LMBatch:
    tokens: Tensor  # (B, T) bos + text, right-padded
    targets: Tensor  # (B, T) text + eos, right-padded
    n_tokens: int  # predicted tokens (non-pad targets)

    def to(self, device, non_blocking: bool = False) -> LMBatch:
        return LMBatch(self.tokens.to(device, non_blocking=non_blocking),
                       self.targets.to(device, non_blocking=non_blocking), self.n_tokens)  # fmt: skip

    def __len__(self) -> int:
        return self.tokens.size(0)


class LanguageModelTask:
    """Next-token prediction over texts; metric perplexity, lower is better."""

    arch = "lm"
    metric = "perplexity"
    higher_is_better = False

    def __init__(self, tokenizer: SubwordTokenizer):
        self.tokenizer = tokenizer
        self.pad_id, self.bos_id, self.eos_id = tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id

    def encode(self, texts: Sequence[str], max_len: int) -> tuple[list[list[int]], int, int]:
        """(examples, n_empty, n_too_long): each text's pieces; empty and over-long texts skipped."""
        kept = [t for t in texts if t.strip()]
        ids = self.tokenizer.encode_batch(kept, side="src")
        examples = [s for s in ids if len(s) <= max_len]
        if not examples:
            raise DataError(f"no training text of 1..{max_len} subword tokens (data.max_len, model.max_len)")
        return examples, len(texts) - len(kept), len(ids) - len(examples)

    @staticmethod
    def lengths(examples: Sequence[list[int]]) -> list[tuple[int, int]]:
        """(source, target) lengths for the token-budget batch sampler: no source, the text as target."""
        return [(0, len(s)) for s in examples]

    def collate(self, examples: Sequence[list[int]]) -> LMBatch:
        T = max(len(s) for s in examples) + 1
        tokens = torch.full((len(examples), T), self.pad_id, dtype=torch.long)
        targets = torch.full((len(examples), T), self.pad_id, dtype=torch.long)
        for r, s in enumerate(examples):
            tokens[r, : len(s) + 1] = torch.tensor([self.bos_id, *s])
            targets[r, : len(s) + 1] = torch.tensor([*s, self.eos_id])
        return LMBatch(tokens, targets, int((targets != self.pad_id).sum()))

    def loss(self, model, batch: LMBatch) -> tuple[Tensor, Tensor]:
        """(summed cross entropy to back-propagate, summed NLL to log); both over batch.n_tokens."""
        logits = model(batch.tokens)  # (B, T, V)
        nll = F.cross_entropy(logits.flatten(0, 1).float(), batch.targets.flatten(), ignore_index=self.pad_id,
                              reduction="sum")  # fmt: skip
        return nll, nll.detach()

    @torch.no_grad()
    def evaluate(self, model, batches) -> LMScores:
        """Perplexity over batches of (LMBatch on the model's device)."""
        nll, n = 0.0, 0
        for batch in batches:
            nll += self.loss(model, batch)[1].item()
            n += batch.n_tokens
        return lm_scores(nll, n)

    @staticmethod
    def score(scores: LMScores) -> float:
        return scores.perplexity
