"""Peer: Hugging Face transformers' MarianMTModel of the reference size (matches it exactly)."""

from __future__ import annotations

import torch
import transformers
from torch import Tensor
from transformers import GenerationConfig, MarianConfig, MarianMTModel

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
    smoothed_loss,
)

NAME = "transformers-marian"


def marian_config(vocab_size: int = 8000, pad_id: int = 0, bos_id: int = 1, eos_id: int = 2, **overrides):
    """The reference model as a MarianConfig (Marian = post-norm, sinusoidal, all linear biases)."""
    kwargs = dict(
        vocab_size=vocab_size,
        decoder_vocab_size=vocab_size,
        d_model=D_MODEL,
        encoder_layers=N_ENC,
        decoder_layers=N_DEC,
        encoder_attention_heads=N_HEADS,
        decoder_attention_heads=N_HEADS,
        encoder_ffn_dim=D_FF,
        decoder_ffn_dim=D_FF,
        activation_function="relu",  # MarianConfig defaults to "gelu"/swish depending on version
        dropout=DROPOUT,
        attention_dropout=0.0,
        activation_dropout=0.0,
        max_position_embeddings=MAX_LEN,
        scale_embedding=True,  # embeddings * sqrt(d_model)
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        pad_token_id=pad_id,
        bos_token_id=bos_id,
        eos_token_id=eos_id,
        # Marian starts the decoder from the pad token (whose embedding is zero); CTranslate2's
        # Marian converter does the same (start_from_zero_embedding), so both decode alike.
        decoder_start_token_id=pad_id,
        forced_eos_token_id=None,
        init_std=D_MODEL**-0.5,
    )
    kwargs.update(overrides)
    return MarianConfig(**kwargs)


def build_marian_model(
    vocab_size: int = 8000, pad_id: int = 0, bos_id: int = 1, eos_id: int = 2, seed: int | None = None
):
    """A randomly initialised MarianMTModel of the reference size (no downloaded weights)."""
    if seed is not None:
        torch.manual_seed(seed)
    return MarianMTModel(marian_config(vocab_size, pad_id, bos_id, eos_id))


def build(
    vocab_size: int = 8000, pad_id: int = 0, bos_id: int = 1, eos_id: int = 2, model=None
) -> PeerAdapter:
    """``model``: a MarianMTModel to wrap (e.g. another size from ``marian_config(**overrides)``);
    by default a fresh random one of the reference size."""
    if model is None:
        model = build_marian_model(vocab_size, pad_id, bos_id, eos_id)
    model.train()
    emb = model.get_input_embeddings().weight
    assert model.get_output_embeddings().weight is emb, "Marian embeddings are not tied"
    assert model.model.decoder.embed_tokens.weight is emb

    def train_step(src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> Tensor:
        model.train()
        out = model(
            input_ids=src,
            attention_mask=src.ne(pad_id).long(),
            decoder_input_ids=tgt_in,
            decoder_attention_mask=tgt_in.ne(pad_id).long(),
            use_cache=False,
        )
        loss = smoothed_loss(out.logits, tgt_out, pad_id)
        loss.backward()
        return loss.detach()

    @torch.inference_mode()
    def decode(src: Tensor, beam_size: int = 1, n_tokens: int = 30) -> Tensor:
        model.eval()
        gen = GenerationConfig(
            do_sample=False,
            num_beams=beam_size,
            num_return_sequences=1,
            min_new_tokens=n_tokens,  # EOS is masked until n_tokens: every sentence is n_tokens long
            max_new_tokens=n_tokens,
            early_stopping=False,
            length_penalty=1.0,
            decoder_start_token_id=pad_id,
            bos_token_id=bos_id,
            eos_token_id=eos_id,
            pad_token_id=pad_id,
            use_cache=True,
        )
        out = model.generate(input_ids=src, attention_mask=src.ne(pad_id).long(), generation_config=gen)
        return out[:, 1:]  # drop the decoder start token

    attn_impl = getattr(model.config, "_attn_implementation", None)
    notes = (
        "transformers MarianMTModel from MarianConfig: post-norm, sinusoidal positions, ReLU "
        "(activation_function='relu'; the config's default is not ReLU), scale_embedding=True, "
        "share_encoder_decoder_embeddings + tie_word_embeddings (one 8000x256 matrix), biases on "
        "all projections, dropout 0.1 with attention_dropout=activation_dropout=0 = the reference. "
        f"Attention implementation: {attn_impl!r}. Output layer has a zero, non-trainable "
        "final_logits_bias buffer (not counted). Decoder starts from the pad token (Marian "
        "convention) in generate; training uses tgt_in as given. Decoding: generate() with KV "
        "cache, greedy or beam, min_new_tokens=max_new_tokens=n_tokens so EOS never ends early."
    )
    return PeerAdapter(
        name=NAME,
        version=transformers.__version__,
        model=model,
        n_params=count_trainable(model),
        notes=notes,
        train_step_fn=train_step,
        decode_fn=decode,
        decode_beams=(1, 4),
    )
