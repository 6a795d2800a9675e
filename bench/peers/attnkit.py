"""attnkit's Transformer behind the peers' adapter: the reference every speed ratio is taken against.

Training and decoding go through attnkit's public API the way a user's train/translate call does.
"""

from __future__ import annotations

import importlib.metadata

import attnkit
import torch
from attnkit.decoding import beam_search, greedy_search
from attnkit.loss import label_smoothed_cross_entropy
from attnkit.model import Transformer, TransformerConfig, count_parameters
from torch import Tensor

from .common import DROPOUT, REFERENCE, PeerAdapter

NAME = "attnkit"


class FixedLength:
    """attnkit's seq2seq interface with EOS forbidden until ``n_tokens`` tokens are decoded."""

    def __init__(self, model: Transformer, n_tokens: int):
        self.model, self.n_tokens, self.config = model, n_tokens, model.config
        self.encode, self.init_cache = model.encode, model.init_cache

    def decode(self, tgt, enc, *, cache, need_weights=False):
        position = len(cache)  # positions decoded before this step (bos is position 0)
        out = self.model.decode(tgt, enc, cache=cache, need_weights=need_weights)
        if position < self.n_tokens:  # this step predicts token number position + 1 <= n_tokens
            out.logits[..., self.config.eos_id] = float("-inf")
        return out


def version() -> str:
    """The installed distribution's version, else the imported package's (run from a source tree)."""
    try:
        return importlib.metadata.version("attnkit")
    except importlib.metadata.PackageNotFoundError:
        return attnkit.__version__


def build(
    vocab_size: int = 8000,
    pad_id: int = 0,
    bos_id: int = 1,
    eos_id: int = 2,
    dims: dict | None = None,
    device: str = "cpu",
    dropout: float = DROPOUT,
) -> PeerAdapter:
    """attnkit's Transformer of the reference size (or ``dims``, e.g. the paper's base) on ``device``."""
    cfg = TransformerConfig(
        **(dims or REFERENCE), dropout=dropout, src_vocab_size=vocab_size, tgt_vocab_size=vocab_size,
        share_vocab=True, tie_output=True, pad_id=pad_id, bos_id=bos_id, eos_id=eos_id,
    )  # fmt: skip
    model = Transformer(cfg).to(device)

    def train_step(src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> Tensor:
        model.train()
        out = label_smoothed_cross_entropy(model(src, tgt_in), tgt_out, pad_id=pad_id)
        loss = out.loss / out.n_tokens
        loss.backward()
        return loss.detach()

    def decode(src: Tensor, beam_size: int = 1, n_tokens: int = 30) -> Tensor:
        model.eval()
        fixed, limit = FixedLength(model, n_tokens), dict(max_len_a=0, max_len_b=n_tokens + 1)
        if beam_size == 1:
            hyps = greedy_search(fixed, src, **limit)
        else:
            hyps = [nbest[0] for nbest in beam_search(fixed, src, beam_size=beam_size, **limit)]
        return torch.tensor([h.tokens for h in hyps], dtype=torch.long)

    notes = (
        "attnkit Transformer (post-norm, sinusoidal, ReLU, biases, shared + tied embeddings), "
        "label_smoothed_cross_entropy; decoding with greedy_search / beam_search (KV cache, finished "
        "sentences leave the batch) through a wrapper that masks EOS until n_tokens."
    )
    return PeerAdapter(NAME, version(), model, count_parameters(model), notes, train_step, decode, (1, 4))
