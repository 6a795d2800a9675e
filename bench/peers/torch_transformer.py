"""Peer: torch.nn.Transformer, assembled into the reference model (no KV cache, greedy only)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .common import (
    D_FF,
    D_MODEL,
    DROPOUT,
    MAX_LEN,
    N_DEC,
    N_ENC,
    N_HEADS,
    PeerAdapter,
    count_trainable,
    eos_banned_argmax,
    sinusoidal,
    smoothed_loss,
)

NAME = "torch.nn.Transformer"


class TorchNNSeq2Seq(nn.Module):
    """torch.nn.Transformer (post-norm, no final encoder/decoder norms) + tied embeddings + sinusoidal PE."""

    def __init__(self, vocab_size: int, pad_id: int):
        super().__init__()
        self.pad_id = pad_id
        self.embed = nn.Embedding(vocab_size, D_MODEL, padding_idx=pad_id)
        self.register_buffer("pe", sinusoidal(MAX_LEN, D_MODEL), persistent=False)
        self.drop = nn.Dropout(DROPOUT)
        enc_layer = nn.TransformerEncoderLayer(
            D_MODEL, N_HEADS, D_FF, DROPOUT, activation="relu", batch_first=True, norm_first=False
        )
        dec_layer = nn.TransformerDecoderLayer(
            D_MODEL, N_HEADS, D_FF, DROPOUT, activation="relu", batch_first=True, norm_first=False
        )
        # norm=None: the paper's post-norm stack has no extra LayerNorm after the last layer
        # (nn.Transformer's default encoder/decoder add one each).
        encoder = nn.TransformerEncoder(enc_layer, N_ENC, norm=None, enable_nested_tensor=False)
        decoder = nn.TransformerDecoder(dec_layer, N_DEC, norm=None)
        self.transformer = nn.Transformer(
            D_MODEL, N_HEADS, custom_encoder=encoder, custom_decoder=decoder, batch_first=True
        )
        nn.init.normal_(self.embed.weight, 0.0, D_MODEL**-0.5)
        with torch.no_grad():
            self.embed.weight[pad_id].zero_()

    def _embed(self, ids: Tensor) -> Tensor:
        return self.drop(self.embed(ids) * math.sqrt(D_MODEL) + self.pe[: ids.size(1)])

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        src_kpm = src.eq(self.pad_id)
        return self.transformer.encoder(self._embed(src), src_key_padding_mask=src_kpm), src_kpm

    def decode(self, tgt_in: Tensor, memory: Tensor, src_kpm: Tensor) -> Tensor:
        T = tgt_in.size(1)
        causal = nn.Transformer.generate_square_subsequent_mask(T, device=tgt_in.device)
        h = self.transformer.decoder(
            self._embed(tgt_in),
            memory,
            tgt_mask=causal,
            tgt_key_padding_mask=tgt_in.eq(self.pad_id),
            memory_key_padding_mask=src_kpm,
            tgt_is_causal=True,
        )
        return F.linear(h, self.embed.weight)  # tied output projection

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        memory, src_kpm = self.encode(src)
        return self.decode(tgt_in, memory, src_kpm)


def build(vocab_size: int = 8000, pad_id: int = 0, bos_id: int = 1, eos_id: int = 2) -> PeerAdapter:
    """torch.nn.Transformer of the reference size; greedy decoding recomputes the prefix."""
    model = TorchNNSeq2Seq(vocab_size, pad_id)
    model.train()

    def train_step(src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> Tensor:
        model.train()
        loss = smoothed_loss(model(src, tgt_in), tgt_out, pad_id)
        loss.backward()
        return loss.detach()

    @torch.inference_mode()
    def decode(src: Tensor, beam_size: int = 1, n_tokens: int = 30) -> Tensor:
        if beam_size != 1:
            raise NotImplementedError("torch.nn.Transformer has no beam search")
        model.eval()
        memory, src_kpm = model.encode(src)
        ys = src.new_full((src.size(0), 1), bos_id)
        for _ in range(n_tokens):  # no KV cache in nn.TransformerDecoder: the prefix is recomputed
            logits = model.decode(ys, memory, src_kpm)[:, -1]
            ys = torch.cat([ys, eos_banned_argmax(logits, eos_id).unsqueeze(1)], dim=1)
        return ys[:, 1:]

    notes = (
        "torch.nn.Transformer (batch_first, norm_first=False = post-norm) with custom "
        "nn.TransformerEncoder/Decoder(norm=None) so there is no extra final LayerNorm; own "
        "embedding * sqrt(d) + sinusoidal PE + dropout, output projection tied to the embedding, "
        "no output bias. Differences: nn.Transformer's single `dropout` also drops attention "
        "weights and the FFN hidden layer (reference: only embeddings and sublayer outputs); "
        "decoding is a plain greedy loop without KV cache (the module has none), no beam search."
    )
    return PeerAdapter(
        name=NAME,
        version=torch.__version__,
        model=model,
        n_params=count_trainable(model),
        notes=notes,
        train_step_fn=train_step,
        decode_fn=decode,
        decode_beams=(1,),
    )
