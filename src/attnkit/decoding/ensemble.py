"""An ensemble of seq2seq models behind the one search contract: every search decodes it unchanged.

At each step every member decodes from its own state (its own key/value caches) and the ensemble's
next-token distribution is the mean of the members' probabilities, returned as log-probabilities:

    log p(y | x) = log (1/M) Σ_m p_m(y | x) = logsumexp_m(log p_m(y | x)) - log M

as fairseq's ``EnsembleModel`` does (the log of the mean probability, not the mean log-probability).
The members must share a vocabulary (a tokenizer, checked by the caller) and special ids; the
ensemble can embed the positions every member can (the smallest ``max_len``).

Legend: M members, B sentences, N rows, S source length, T new positions, V target vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ..errors import ConfigError
from ..model.interface import DecoderOutput, DecoderState, Seq2SeqModel


@dataclass(frozen=True)
class EnsembleConfig:
    """What the searches read of a model's config (:class:`~attnkit.model.interface.Seq2SeqIds`)."""

    pad_id: int
    bos_id: int
    eos_id: int
    max_len: int
    tgt_vocab_size: int


class EnsembleState:
    """One decoder state per member, moved together (:class:`~attnkit.model.interface.DecoderState`)."""

    def __init__(self, states: list[DecoderState]):
        self.states = states

    @property
    def group(self) -> int:
        return self.states[0].group

    def __len__(self) -> int:
        return len(self.states[0])

    def expand(self, k: int) -> None:
        for s in self.states:
            s.expand(k)

    def reorder(self, rows: Tensor) -> None:
        for s in self.states:
            s.reorder(rows)

    def select(self, sentences: Tensor) -> None:
        for s in self.states:
            s.select(sentences)


class Ensemble(nn.Module):
    """Seq2seq models decoded as one: the mean of their next-token probabilities at each step.

    Args:
        models: one or more seq2seq models with the same target vocabulary and special ids.
    Shape:
        ``decode(tokens (N, T), state)`` -> logits (N, T, V), normalized: log of the mean probability.
    """

    def __init__(self, models: Sequence[nn.Module]):
        super().__init__()
        if not models:
            raise ConfigError("an ensemble needs at least one model")
        seq2seq: list[Seq2SeqModel] = []
        for i, model in enumerate(models):
            if not isinstance(model, Seq2SeqModel):
                raise ConfigError(f"ensemble member {i} is a {type(model).__name__}, not a seq2seq model")
            seq2seq.append(model)
        configs = [
            (m.config.pad_id, m.config.bos_id, m.config.eos_id, m.config.tgt_vocab_size) for m in seq2seq
        ]
        if len(set(configs)) > 1:
            raise ConfigError(
                "ensemble members differ in (pad, bos, eos, target vocabulary size): "
                + ", ".join(str(c) for c in configs)
            )
        pad, bos, eos, vocab = configs[0]
        max_len = min(int(m.config.max_len) for m in seq2seq)
        self.members = nn.ModuleList(models)  # registered: .to(), .eval() and the packing reach them
        self.seq2seq = seq2seq  # the same modules, typed for the search contract
        self.config = EnsembleConfig(pad, bos, eos, max_len, vocab)

    def encode(self, src: Tensor, *, need_weights: bool = False) -> list[Any]:
        """Every member's encoder output for src (B, S)."""
        return [m.encode(src, need_weights=need_weights) for m in self.seq2seq]

    def init_state(self, enc: list[Any], *, cache: type | None = None) -> EnsembleState:
        """Every member's decoder state; ``cache``: the key/value cache class, where members keep one."""
        models = self.seq2seq
        if cache is None:
            return EnsembleState([m.init_state(e) for m, e in zip(models, enc, strict=True)])
        return EnsembleState([m.init_state(e, cache=cache) for m, e in zip(models, enc, strict=True)])

    def decode(self, tokens: Tensor, state: EnsembleState, *, need_weights: bool = False) -> DecoderOutput:
        """Log of the members' mean probability at each new position; the cross-attention, when asked
        for, is the members' last-layer attention averaged over heads and members: one (N, 1, T, S)."""
        outs = [m.decode(tokens, s, need_weights=need_weights) for m, s in zip(self.seq2seq, state.states)]
        logp = torch.stack([torch.log_softmax(o.logits.float(), dim=-1) for o in outs])  # (M, N, T, V)
        logits = torch.logsumexp(logp, dim=0) - math.log(len(outs))  # (N, T, V)
        cross = None
        if need_weights and all(o.cross_attn for o in outs):
            heads = [o.cross_attn[-1].mean(dim=1, keepdim=True) for o in outs if o.cross_attn]  # (N, 1, T, S)
            cross = [torch.stack(heads).mean(dim=0)]
        return DecoderOutput(logits, cross_attn=cross)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: (N, T, V) log of the members' mean probability of each next token."""
        return self.decode(tgt_in, self.init_state(self.encode(src))).logits
