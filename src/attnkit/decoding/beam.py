"""Batched beam search with the GNMT length penalty (Wu et al., 2016), for any seq2seq model.

Each sentence keeps K live hypotheses; at every step the 2K best extensions are ranked, those ending
in eos (among the top K) are finalized (the K best are kept), and the best K others live on. A
sentence is done once it has K finished hypotheses and no live one can still beat the worst of
them (log-probabilities only fall, and the length penalty is at most lp(length limit)); its rows
then leave the batch, so later steps cost less.

Legend: B sentences still decoding, K beam size, N = B * K rows, V vocabulary, S source length.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..attention.linear import packed_weights
from .common import Hypothesis, decode_cap, length_limits, step_topk


def length_penalty(length: int, alpha: float) -> float:
    """lp(Y) = ((5 + |Y|) / 6) ^ alpha; score = log P(Y | X) / lp(Y). alpha = 0 disables it."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
@packed_weights()  # weights cannot change while searching: pack them once
def beam_search(
    model,
    src: Tensor,
    *,
    beam_size: int = 4,
    length_penalty_alpha: float = 0.6,
    nbest: int = 1,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    return_attention: bool = False,
) -> list[list[Hypothesis]]:
    """Decode src (B, S); returns for each sentence its ``nbest`` hypotheses, best first."""
    if not 1 <= nbest <= beam_size:
        raise ValueError(f"nbest must be between 1 and beam_size={beam_size}, got {nbest}")
    cfg, K, device = model.config, beam_size, src.device
    B = src.size(0)
    limits = length_limits(src, cfg.pad_id, max_len_a, max_len_b, decode_cap(model))  # (B,)
    # The first step decodes one row per sentence (all beams would be identical); its K best
    # tokens then open K rows per sentence, and the encoder output and cache follow them.
    enc = model.encode(src)
    cache = model.init_cache(enc)
    beams = 1  # live hypotheses per sentence: 1 before the first step, K after it

    active = torch.arange(B, device=device)  # original sentence index of each live sentence
    scores = torch.zeros(B, 1, device=device)  # running log P of each live hypothesis
    prefix = torch.full((B, 1), cfg.bos_id, dtype=torch.long, device=device)  # (N, t+1)
    attn_hist: Tensor | None = None  # (N, t, S)
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]

    step = 0
    while active.numel() > 0:
        n = active.numel()
        at_limit = (step + 1 >= limits[active]).repeat_interleave(beams)  # (N,)
        # A sentence's 2K best extensions are among the 2K best tokens of each of its beams.
        logp, tok, attn = step_topk(
            model, prefix[:, -1:], enc, cache, 2 * K, at_limit, need_weights=return_attention
        )
        cand = (scores[:, :, None] + logp.view(n, beams, 2 * K)).view(n, beams * 2 * K)  # (B, beams*2K)
        top_scores, top_idx = cand.topk(2 * K, dim=1)  # (B, 2K), best first
        top_beam = top_idx // (2 * K)  # (B, 2K) beam each candidate extends
        top_tok = tok.view(n, beams * 2 * K).gather(1, top_idx)  # (B, 2K)
        is_eos = (top_tok == cfg.eos_id) & torch.isfinite(top_scores)
        if attn is not None:
            step_attn = attn[:, None]  # (N, 1, S)
            attn_hist = step_attn if attn_hist is None else torch.cat([attn_hist, step_attn], dim=1)

        # Finalize eos candidates that rank among the top K of their sentence.
        for b, j in is_eos[:, :K].nonzero().tolist():
            i = active[b].item()
            row = b * beams + top_beam[b, j].item()
            tokens = prefix[row, 1:].tolist()
            log_p = top_scores[b, j].item()
            attention = attn_hist[row].clone() if attn_hist is not None else None
            hyp = Hypothesis(
                tokens, log_p / length_penalty(len(tokens) + 1, length_penalty_alpha), log_p, attention
            )
            finished[i].append(hyp)
            if len(finished[i]) > K:  # keep the K best
                finished[i].remove(min(finished[i], key=lambda h: h.score))

        # The K best non-eos candidates live on (eos ones pushed behind all others).
        rank = torch.arange(2 * K, device=device).expand(n, -1) + is_eos.long() * 2 * K  # (B, 2K)
        keep_pos = rank.topk(K, dim=1, largest=False).indices  # (B, K)
        scores = top_scores.gather(1, keep_pos)  # (B, K)
        origin = (top_beam.gather(1, keep_pos) + torch.arange(n, device=device)[:, None] * beams).view(
            -1
        )  # (B*K,)
        new_tok = top_tok.gather(1, keep_pos).view(-1, 1)  # (N, 1)
        prefix = torch.cat([prefix.index_select(0, origin), new_tok], dim=1)
        if attn_hist is not None:
            attn_hist = attn_hist.index_select(0, origin)
        if beams == 1:  # one row per sentence becomes K
            enc = enc.repeat_beams(K)
            cache.repeat_beams(origin)
        else:
            cache.reorder_beams(origin)  # origin stays within each sentence's K rows
        beams = K
        step += 1

        # The best score a live hypothesis could still reach: its log P (which only falls) over the
        # largest length penalty it can get (at its length limit).
        alive = scores.max(dim=1).values  # (B,)
        bound = (alive / ((5.0 + limits[active].double()) / 6.0) ** length_penalty_alpha).tolist()
        done = torch.tensor(
            [
                bound[b] == float("-inf")
                or (len(finished[i]) >= K and bound[b] <= min(h.score for h in finished[i]))
                for b, i in enumerate(active.tolist())
            ],
            device=device,
        )
        if done.any():
            keep = (~done).nonzero().squeeze(1)  # (B',) live sentences
            keep_rows = (keep[:, None] * K + torch.arange(K, device=device)).view(-1)  # (B'*K,)
            active, scores = active[keep], scores[keep]
            prefix = prefix.index_select(0, keep_rows)
            if attn_hist is not None:
                attn_hist = attn_hist.index_select(0, keep_rows)
            enc = enc.index_select(keep_rows)
            cache.index_select(keep_rows)

    return [sorted(hyps, key=lambda h: h.score, reverse=True)[:nbest] for hyps in finished]
