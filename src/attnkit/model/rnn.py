"""The attention-based RNN encoder-decoder of Bahdanau et al. (2015), as seed 000 describes it.

RNN #1, a bidirectional GRU, reads the source both ways; the concatenated forward and backward
states h_j = [h_F^(j); h_B^(j)] are the annotations. RNN #2, the decoder GRU, receives at every
step i the context vector c_i = sum_j alpha_ij h_j (eq. 1), with alpha_i = softmax(e_i) (eq. 2) over
additive scores e_ij = v^T tanh(W s_(i-1) + U h_j). Its state s_i depends on s_(i-1), y_(i-1) and c_i.

It keeps the seq2seq contract of :mod:`attnkit.model.interface` (``encode``, ``init_state``, ``decode``,
``forward``), so the same trainer and the same searches serve it and the Transformer.

Legend: B sentences, G hypotheses per sentence, N = B * G rows, S source length, T target length,
E embedding size, H encoder hidden size per direction, Hd decoder hidden size, A attention size, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..attention import AdditiveAttention, MultiplicativeAttention, real_tokens
from .config import RNNConfig
from .interface import DecoderOutput


@dataclass
class RNNEncoderOutput:
    """annotations (B, S, 2H), src_mask (B, S) True = real, keys (B, S, A) = U h_j, s0 (B, Hd)."""

    annotations: Tensor
    src_mask: Tensor
    keys: Tensor
    s0: Tensor

    def select(self, sentences: Tensor) -> RNNEncoderOutput:
        return RNNEncoderOutput(*(getattr(self, f.name).index_select(0, sentences) for f in fields(self)))


@dataclass
class RNNState:
    """The decoder state s_(i-1) (N, Hd), one row per hypothesis, and the sentences it reads
    (:class:`~attnkit.model.interface.DecoderState`). The annotations stay one row per sentence."""

    enc: RNNEncoderOutput
    s: Tensor
    length: int = 0
    group: int = 1

    def __len__(self) -> int:
        return self.length

    def expand(self, k: int) -> None:
        if self.group != 1:
            raise ValueError(f"expand needs one row per sentence, the state has {self.group}")
        self.s = self.s.repeat_interleave(k, dim=0)  # (B * k, Hd)
        self.group = k

    def reorder(self, rows: Tensor) -> None:
        self.s = self.s.index_select(0, rows)

    def select(self, sentences: Tensor) -> None:
        G = self.group
        self.reorder((sentences[:, None] * G + torch.arange(G, device=sentences.device)).view(-1))
        self.enc = self.enc.select(sentences)


class RNNSeq2Seq(nn.Module):
    """Bidirectional GRU encoder, attentive GRU decoder, deep output layer (Bahdanau et al., 2015)."""

    # train.freeze: the parts a fine-tuning can keep fixed, by child module (the output layer trains)
    freezable = {
        "embeddings": ("src_embed", "tgt_embed"),
        "encoder": ("encoder",),
        "decoder": ("W_s", "attention", "decoder_cell", "deep_output"),
    }

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
        self.W_s = nn.Linear(c.hidden_size, c.hidden_size)  # s0 = tanh(W_s h_B^(1))
        self.attention: AdditiveAttention | MultiplicativeAttention
        if c.attention == "additive":
            self.attention = AdditiveAttention(c.hidden_size, annotation, c.attention_size)
        else:
            self.attention = MultiplicativeAttention(c.hidden_size, annotation)
        self.decoder_cell = nn.GRUCell(c.emb_size + annotation, c.hidden_size)
        self.deep_output = nn.Linear(c.hidden_size + annotation + c.emb_size, c.emb_size)
        self.output_proj = nn.Linear(c.emb_size, c.tgt_vocab_size)
        self.dropout = nn.Dropout(c.dropout)

    def encode(self, src: Tensor, *, need_weights: bool = False) -> RNNEncoderOutput:
        """src (B, S) -> annotations h_j (B, S, 2H). Padding is packed away, so it changes nothing."""
        mask = real_tokens(src, self.config.pad_id)  # (B, S)
        lengths = mask.sum(1).clamp(min=1).cpu()
        x = self.dropout(self.src_embed(src))  # (B, S, E)
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.encoder(packed)
        annotations, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))  # (B, S, 2H)
        H = self.config.hidden_size
        backward_first = annotations[:, 0, H:]  # backward state at the first word: it has read everything
        s0 = torch.tanh(self.W_s(backward_first))  # (B, Hd)
        return RNNEncoderOutput(annotations, mask, self.attention.keys(annotations), s0)

    def init_state(self, enc: RNNEncoderOutput, *, cache: type | None = None) -> RNNState:
        """The state before the first target token; ``cache`` is ignored (a GRU keeps no key/value cache)."""
        return RNNState(enc, enc.s0)

    def decode(self, tgt: Tensor, state: RNNState, *, need_weights: bool = False) -> DecoderOutput:
        """Run RNN #2 over tgt (N, T) = y_(i-1) tokens -> logits (N, T, V); the state advances by T."""
        enc, s, G = state.enc, state.s, state.group  # s: (N, Hd)
        y = self.dropout(self.tgt_embed(tgt))  # (N, T, E)
        outputs, alphas = [], []
        for i in range(tgt.size(1)):
            c, alpha = self.attention(
                s, enc.annotations, keys=enc.keys, mask=enc.src_mask, group=G
            )  # (N, 2H), (N, S)
            s = self.decoder_cell(torch.cat([y[:, i], c], dim=-1), s)  # s_i from y_(i-1), c_i, s_(i-1)
            outputs.append(torch.tanh(self.deep_output(torch.cat([s, c, y[:, i]], dim=-1))))  # (N, E)
            alphas.append(alpha)
        state.s, state.length = s, state.length + tgt.size(1)
        logits = self.output_proj(self.dropout(torch.stack(outputs, dim=1)))  # (N, T, V)
        if not need_weights:
            return DecoderOutput(logits)
        return DecoderOutput(logits, None, [torch.stack(alphas, dim=1)[:, None]])  # cross: 1 x (N, 1, T, S)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: the gold previous token y_(i-1) is fed at every step."""
        return self.decode(tgt_in, self.init_state(self.encode(src))).logits
