"""Helpers shared by the tests: tiny models of both seq2seq kinds behind one interface."""

from __future__ import annotations

import torch

from attnkit.model import RNNConfig, RNNSeq2Seq, Transformer, TransformerConfig


def make_model(kind: str, **overrides):
    """A tiny, deterministic model in eval mode: "transformer", "transformer-pre" or "rnn"."""
    torch.manual_seed(0)
    if kind == "rnn":
        return RNNSeq2Seq(RNNConfig.preset("tiny", **overrides)).eval()
    norm = "pre" if kind == "transformer-pre" else "post"
    return Transformer(TransformerConfig.preset("tiny", norm=norm, **overrides)).eval()


def random_tokens(B: int, T: int, vocab: int = 20, *, low: int = 3, seed: int = 1) -> torch.Tensor:
    """Token ids in [low, vocab): no pad (0), bos (1) or eos (2)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(low, vocab, (B, T), generator=g)
