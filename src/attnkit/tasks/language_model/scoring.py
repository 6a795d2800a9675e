"""The language model's metrics and its one evaluation: perplexity and bits per token.

Perplexity is exp of the mean negative log-likelihood per predicted token (nats); bits per token is
the same mean in bits. Both are only comparable between models on the same tokenization.
``score_texts`` is what the trainer's validation and ``attnkit evaluate`` both call.

Legend: B texts in a batch, T length (pieces + 1), V vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ...data.batching import TokenBatchSampler, collate_lm
from ...data.tokenizer import SubwordTokenizer
from ...errors import DataError
from ...loss import label_smoothed_cross_entropy
from ...precision import autocast


@dataclass(frozen=True)
class LMScores:
    """Summed negative log-likelihood (nats) over ``tokens`` predicted tokens."""

    nll: float
    tokens: int

    @property
    def loss(self) -> float:
        """Mean NLL per token (nats)."""
        return self.nll / self.tokens

    @property
    def perplexity(self) -> float:
        return math.exp(self.loss)

    @property
    def bits_per_token(self) -> float:
        return self.loss / math.log(2)

    def format(self) -> str:
        return (
            f"perplexity      {self.perplexity:10.3f}\n"
            f"bits per token  {self.bits_per_token:10.4f}\n"
            f"nll per token   {self.loss:10.4f}  ({self.tokens} tokens, eos included)"
        )


def lm_scores(nll: float, tokens: int) -> LMScores:
    if tokens <= 0:
        raise DataError("no tokens to score: the text is empty")
    return LMScores(float(nll), int(tokens))


def text_ids(model, tokenizer: SubwordTokenizer, texts: Sequence[str]) -> list[list[int]]:
    """Each non-empty text's pieces, cut to the positions the model has after bos."""
    room = int(model.config.max_len) - 1
    return [ids[:room] for ids in tokenizer.encode_batch([t for t in texts if t.strip()], side="tgt")]


@torch.no_grad()
def score_texts(
    model,
    tokenizer: SubwordTokenizer,
    texts: Sequence[str],
    device,
    *,
    batch_tokens: int = 8000,
    amp: torch.dtype | None = None,
) -> LMScores:
    """The NLL of every piece and the end of each text, given bos and the text so far.

    Empty texts are skipped; a text longer than the model's ``max_len`` is scored on its prefix.
    """
    seqs = text_ids(model, tokenizer, texts)
    if not seqs:
        raise DataError("nothing to score: every line is empty")
    v = tokenizer.vocabulary
    device = torch.device(device)
    nll, n = 0.0, 0
    for idx in TokenBatchSampler([(0, len(s) + 1) for s in seqs], batch_tokens, shuffle=False):
        tokens, targets = collate_lm(
            [seqs[i] for i in idx], pad_id=v.pad_id, bos_id=v.bos_id, eos_id=v.eos_id
        )
        with autocast(device, amp):
            logits = model(tokens.to(device))  # (B, T, V)
        out = label_smoothed_cross_entropy(logits, targets.to(device), epsilon=0.0, pad_id=v.pad_id)
        nll, n = nll + out.nll.item(), n + int(out.n_tokens)
    return lm_scores(nll, n)
