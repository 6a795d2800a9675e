"""Peer: JoeyNMT 2.3's Transformer, post-norm on both sides (ids remapped to JoeyNMT's specials)."""

from __future__ import annotations

from types import SimpleNamespace

import joeynmt
import torch
from joeynmt.model import build_model
from joeynmt.search import beam_search, transformer_greedy
from joeynmt.vocabulary import Vocabulary
from torch import Tensor

from .common import D_FF, D_MODEL, DROPOUT, N_DEC, N_ENC, N_HEADS, PeerAdapter, count_trainable, smoothed_loss

NAME = "joeynmt"


def joeynmt_config() -> dict:
    layer = {
        "type": "transformer",
        "num_layers": N_ENC,
        "num_heads": N_HEADS,
        "embeddings": {"embedding_dim": D_MODEL, "scale": True, "dropout": DROPOUT},
        "hidden_size": D_MODEL,
        "ff_size": D_FF,
        "dropout": DROPOUT,
        "layer_norm": "post",  # the encoder's default is "pre"
        "activation": "relu",
    }
    return {
        "initializer": "xavier_uniform",
        "embed_initializer": "xavier_uniform",
        "embed_init_gain": 1.0,
        "init_gain": 1.0,
        "bias_initializer": "zeros",
        "tied_embeddings": True,
        "tied_softmax": True,
        "encoder": dict(layer),
        "decoder": dict(layer, num_layers=N_DEC),
    }


def build(vocab_size: int = 8000, pad_id: int = 0, bos_id: int = 1, eos_id: int = 2) -> PeerAdapter:
    """JoeyNMT's Transformer. JoeyNMT's vocabulary always puts <unk>, <pad>, <s>, </s> at ids 0-3,
    so the adapter maps the benchmark's ids onto JoeyNMT's with one index lookup (and back)."""
    # benchmark id -> JoeyNMT id: specials first in JoeyNMT's fixed order, the rest in order.
    unk_b = next(i for i in range(vocab_size) if i not in (pad_id, bos_id, eos_id))
    order = [unk_b, pad_id, bos_id, eos_id] + [
        i for i in range(vocab_size) if i not in (unk_b, pad_id, bos_id, eos_id)
    ]
    to_joey = torch.empty(vocab_size, dtype=torch.long)
    to_joey[torch.tensor(order)] = torch.arange(vocab_size)
    from_joey = torch.tensor(order, dtype=torch.long)
    specials = SimpleNamespace(
        unk_token="<unk>",
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        sep_token=None,
        unk_id=0,
        pad_id=1,
        bos_id=2,
        eos_id=3,
        sep_id=None,
        lang_tags=[],
    )
    vocab = Vocabulary([f"t{i}" for i in order[4:]], specials)
    assert len(vocab) == vocab_size
    model = build_model(joeynmt_config(), src_vocab=vocab, trg_vocab=vocab)
    model.train()
    assert model.src_embed is model.trg_embed
    assert model.decoder.output_layer.weight is model.trg_embed.lut.weight
    jpad = vocab.pad_index

    def _masks(src_j: Tensor):
        src_mask = src_j.ne(jpad).unsqueeze(1)  # (B, 1, S)
        return src_mask, src_mask.sum(-1).squeeze(1)

    def train_step(src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> Tensor:
        model.train()
        src_j, tgt_in_j, tgt_out_j = to_joey[src], to_joey[tgt_in], to_joey[tgt_out]
        src_mask, src_length = _masks(src_j)
        trg_mask = tgt_out_j.ne(jpad).unsqueeze(1)  # as joeynmt.batch.Batch builds it
        logits, _, _, _ = model._encode_decode(
            src=src_j, trg_input=tgt_in_j, src_mask=src_mask, src_length=src_length, trg_mask=trg_mask
        )
        loss = smoothed_loss(logits, tgt_out_j, jpad)
        loss.backward()
        return loss.detach()

    @torch.inference_mode()
    def decode(src: Tensor, beam_size: int = 1, n_tokens: int = 30) -> Tensor:
        model.eval()
        src_j = to_joey[src]
        src_mask, src_length = _masks(src_j)
        enc_out, enc_hidden, _, _ = model(
            return_type="encode", src=src_j, src_length=src_length, src_mask=src_mask
        )
        if beam_size == 1:
            out, _, _ = transformer_greedy(
                src_mask=src_mask,
                max_output_length=n_tokens,
                model=model,
                encoder_output=enc_out,
                encoder_hidden=enc_hidden,
                min_output_length=n_tokens,
            )
        else:
            out, _, _ = beam_search(
                model=model,
                beam_size=beam_size,
                encoder_output=enc_out,
                encoder_hidden=enc_hidden,
                src_mask=src_mask,
                max_output_length=n_tokens,
                alpha=1.0,
                n_best=1,
                min_output_length=n_tokens,
            )
        return from_joey[out.long()]

    notes = (
        f"JoeyNMT {joeynmt.__version__} build_model(): transformer encoder+decoder with "
        "layer_norm='post' on both (the encoder layers default to 'pre'), ReLU, scaled embeddings, "
        "its sinusoidal PositionalEncoding, tied_embeddings + tied_softmax, output layer without "
        "bias, linear biases on. Differences: JoeyNMT applies the one `dropout` also to attention "
        "weights and the FFN hidden layer; LayerNorm eps 1e-6. JoeyNMT's vocabulary fixes "
        "<unk>,<pad>,<s>,</s> = ids 0-3, so the adapter remaps ids with one gather per tensor. "
        "Training calls Model._encode_decode (what return_type='loss' runs) and the shared loss "
        "instead of JoeyNMT's XentLoss. Decoding: joeynmt.search.transformer_greedy (recomputes "
        "the whole prefix each step, no KV cache) and beam_search, min_output_length=n_tokens."
    )
    return PeerAdapter(
        name=NAME,
        version=joeynmt.__version__,
        model=model,
        n_params=count_trainable(model),
        notes=notes,
        train_step_fn=train_step,
        decode_fn=decode,
        decode_beams=(1, 4),
    )
