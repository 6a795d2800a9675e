"""Each sentence's best extensions in a beam search step, exactly as one top-k over every token finds
them, by way of vocabulary blocks: PyTorch's CPU top-k costs more than the log-softmax it ranks.

Legend: B sentences, N = B * beams rows, V vocabulary, C extensions wanted per sentence.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor


@functools.cache  # asked at every step
def block_size(vocab_size: int) -> int | None:
    """The width of the vocabulary blocks ``rank_extensions`` reads maxima of: the largest divisor of
    V from 16 to 64, or None (a vocabulary under 1024 or without such a divisor: plain top-k)."""
    if vocab_size < 1024:
        return None
    return next((b for b in range(64, 15, -1) if vocab_size % b == 0), None)


def top_extensions(scores: Tensor, logp: Tensor, C: int) -> tuple[Tensor, Tensor, Tensor]:
    """Each sentence's C best extensions: scores (B, C) best first, the beam (B, C) and token (B, C)
    of each. scores (B, beams) running log P, logp (N, V) log-probabilities of the next token.

    PyTorch's CPU top-k costs ~1.5 ns an element whatever k, more than the log-softmax itself.
    So the vocabulary is cut into blocks of ``block_size`` tokens and only block maxima are ranked
    first: the C best extensions of a sentence lie in its C blocks with the highest maxima (a block
    holding one of them has a maximum at least as high, and fewer than C blocks can beat it), so a
    second top-k over those C blocks' tokens gives the same C best sums (and, ties aside, the same
    candidates) as one top-k over every token.
    """
    n, beams = scores.shape
    V = logp.size(-1)
    blk = block_size(V)
    if blk is None or beams * (V // blk) < C:
        # A sentence's C best extensions are among the C best tokens of each of its beams (fewer
        # when the vocabulary is smaller than that; impossible ones score -inf and never finish).
        per_row = min(C, V)
        logp, tok = logp.topk(per_row, dim=-1)  # (N, per_row)
        cand = (scores[:, :, None] + logp.view(n, beams, per_row)).view(n, beams * per_row)  # (B, C')
        top_scores, top_idx = cand.topk(C, dim=1)  # (B, C), best first
        return top_scores, top_idx // per_row, tok.view(n, beams * per_row).gather(1, top_idx)
    nb = V // blk  # blocks per row
    blocks = logp.reshape(-1, nb, blk)  # (N, nb, blk)
    block_best = (blocks.amax(dim=-1) + scores.reshape(-1, 1)).view(n, beams * nb)  # (B, beams * nb)
    top_blocks = block_best.topk(C, dim=1).indices  # (B, C) block id within the sentence: beam * nb + block
    rows = top_blocks // nb + torch.arange(n, device=scores.device)[:, None] * beams  # (B, C) row in N
    cand = blocks.reshape(-1, blk).index_select(0, (rows * nb + top_blocks % nb).view(-1)).view(n, C, blk)
    cand = scores.reshape(-1)[rows][:, :, None] + cand  # (B, C, blk): the same sums as the plain path
    top_scores, pos = cand.view(n, C * blk).topk(C, dim=1)  # (B, C), best first
    block = top_blocks.gather(1, pos // blk)  # (B, C)
    return top_scores, block // nb, (block % nb) * blk + pos % blk
