"""The attention-based RNN encoder-decoder of Bahdanau et al. (2015), as seed 000 describes it.

RNN #1, a bidirectional GRU, reads the source both ways; the concatenated forward and backward
states h_j = [h_F^(j); h_B^(j)] are the annotations. RNN #2, the decoder GRU, receives at every
step i the context vector c_i = sum_j alpha_ij h_j (eq. 1), with alpha_i = softmax(e_i) (eq. 2) over
additive scores e_ij = v^T tanh(W s_(i-1) + U h_j). Its state s_i depends on s_(i-1), y_(i-1) and c_i.

The interface is the Transformer's (``encode``, ``init_cache``, ``decode``, ``forward``), so the same
trainer and the same greedy and beam search serve both.

Legend: B batch, S source length, T target length, E embedding size, H encoder hidden size per
direction, Hd decoder hidden size, A attention size, V vocabulary.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .attention import AdditiveAttention, MultiplicativeAttention
from .config import ConfigBase
from .dropout import Dropout
from .model.transformer import DecoderOutput


@dataclasses.dataclass
class RNNConfig(ConfigBase):
    """The RNN encoder-decoder. ``attention``: "additive" (Bahdanau) or "multiplicative" (Luong)."""

    src_vocab_size: int = 8000
    tgt_vocab_size: int = 8000
    emb_size: int = 256
    hidden_size: int = 512
    attention_size: int = 512
    attention: str = "additive"
    n_encoder_layers: int = 1
    dropout: float = 0.2
    max_len: int = 256
    share_vocab: bool = False
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2

    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "tiny": dict(
            emb_size=32,
            hidden_size=48,
            attention_size=32,
            dropout=0.0,
            src_vocab_size=20,
            tgt_vocab_size=20,
            max_len=64,
        ),
    }

    def validate(self) -> None:
        self._positive("src_vocab_size", "tgt_vocab_size", "emb_size", "hidden_size", "attention_size")
        self._positive("n_encoder_layers", "max_len")
        self._choice("attention", ("additive", "multiplicative"))
        self._check(0.0 <= self.dropout < 1.0, "dropout", "must be in [0, 1)")
        if self.share_vocab:
            self._check(
                self.src_vocab_size == self.tgt_vocab_size, "share_vocab", "needs equal vocabulary sizes"
            )
        vocab = min(self.src_vocab_size, self.tgt_vocab_size)
        for name in ("pad_id", "bos_id", "eos_id"):
            self._check(0 <= getattr(self, name) < vocab, name, f"must be a token id below {vocab}")


@dataclass
class RNNEncoderOutput:
    """annotations (B, S, 2H), src_mask (B, S) True = real, keys (B, S, A) = U h_j, s0 (B, Hd)."""

    annotations: Tensor
    src_mask: Tensor
    keys: Tensor
    s0: Tensor

    def repeat_beams(self, beams: int) -> RNNEncoderOutput:
        """Each sentence's annotations repeated for its K beams (the GRU decoder reads them per row)."""
        return self.index_select(
            torch.arange(self.s0.size(0), device=self.s0.device).repeat_interleave(beams)
        )

    def index_select(self, index: Tensor) -> RNNEncoderOutput:
        return RNNEncoderOutput(
            *(getattr(self, f.name).index_select(0, index) for f in dataclasses.fields(self))
        )


@dataclass
class RNNCache:
    """The decoder state s_(i-1) (B, Hd) and how many target positions it has read."""

    state: Tensor
    length: int = 0

    def __len__(self) -> int:
        return self.length

    def index_select(self, index: Tensor) -> None:
        self.state = self.state.index_select(0, index)

    reorder_beams = repeat_beams = index_select  # the whole state belongs to the hypothesis


class RNNSeq2Seq(nn.Module):
    """Bidirectional GRU encoder, attentive GRU decoder, deep output layer (Bahdanau et al., 2015)."""

    def __init__(self, config: RNNConfig):
        super().__init__()
        self.config = c = config
        self.src_embed = nn.Embedding(c.src_vocab_size, c.emb_size, padding_idx=c.pad_id)
        self.tgt_embed = (
            self.src_embed
            if c.share_vocab
            else nn.Embedding(c.tgt_vocab_size, c.emb_size, padding_idx=c.pad_id)
        )
        self.encoder = nn.GRU(
            c.emb_size,
            c.hidden_size,
            num_layers=c.n_encoder_layers,
            batch_first=True,
            bidirectional=True,
            dropout=c.dropout if c.n_encoder_layers > 1 else 0.0,
        )
        annotation = 2 * c.hidden_size
        self.init_state = nn.Linear(c.hidden_size, c.hidden_size)  # s0 = tanh(W_s h_B^(1))
        if c.attention == "additive":
            self.attention = AdditiveAttention(c.hidden_size, annotation, c.attention_size)
        else:
            self.attention = MultiplicativeAttention(c.hidden_size, annotation)
        self.decoder_cell = nn.GRUCell(c.emb_size + annotation, c.hidden_size)
        self.deep_output = nn.Linear(c.hidden_size + annotation + c.emb_size, c.emb_size)
        self.output_proj = nn.Linear(c.emb_size, c.tgt_vocab_size)
        self.dropout = Dropout(c.dropout)

    def encode(self, src: Tensor, *, need_weights: bool = False) -> RNNEncoderOutput:
        """src (B, S) -> annotations h_j (B, S, 2H). Padding is packed away, so it changes nothing."""
        mask = src != self.config.pad_id  # (B, S)
        lengths = mask.sum(1).clamp(min=1).cpu()
        x = self.dropout(self.src_embed(src))  # (B, S, E)
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.encoder(packed)
        annotations, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))  # (B, S, 2H)
        H = self.config.hidden_size
        backward_first = annotations[:, 0, H:]  # backward state at the first word: it has read everything
        s0 = torch.tanh(self.init_state(backward_first))  # (B, Hd)
        return RNNEncoderOutput(annotations, mask, self.attention.keys(annotations), s0)

    def init_cache(self, enc: RNNEncoderOutput) -> RNNCache:
        return RNNCache(enc.s0)

    def decode(
        self, tgt: Tensor, enc: RNNEncoderOutput, *, cache: RNNCache | None = None, need_weights: bool = False
    ) -> DecoderOutput:
        """Run RNN #2 over tgt (B, T) = y_(i-1) tokens -> logits (B, T, V); cache advances by T."""
        cache = cache if cache is not None else self.init_cache(enc)
        s = cache.state  # (B, Hd)
        y = self.dropout(self.tgt_embed(tgt))  # (B, T, E)
        outputs, alphas = [], []
        for i in range(tgt.size(1)):
            c, alpha = self.attention(s, enc.annotations, keys=enc.keys, mask=enc.src_mask)  # (B, 2H), (B, S)
            s = self.decoder_cell(torch.cat([y[:, i], c], dim=-1), s)  # s_i from y_(i-1), c_i, s_(i-1)
            outputs.append(torch.tanh(self.deep_output(torch.cat([s, c, y[:, i]], dim=-1))))  # (B, E)
            alphas.append(alpha)
        cache.state, cache.length = s, cache.length + tgt.size(1)
        logits = self.output_proj(self.dropout(torch.stack(outputs, dim=1)))  # (B, T, V)
        if not need_weights:
            return DecoderOutput(logits)
        return DecoderOutput(logits, None, [torch.stack(alphas, dim=1)[:, None]])  # cross: 1 x (B, 1, T, S)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: the gold previous token y_(i-1) is fed at every step."""
        return self.decode(tgt_in, self.encode(src)).logits
