"""Peer: OpenNMT-py 3.5's Transformer (pre-norm only; installed with --no-deps, see bench/PEERS.md)."""

from __future__ import annotations

import onmt
import onmt.opts
import pyonmttok
import torch
from onmt.constants import DefaultTokens
from onmt.model_builder import build_base_model
from onmt.utils.parse import ArgumentParser
from torch import Tensor, nn

from .common import (
    D_FF,
    D_MODEL,
    DROPOUT,
    N_DEC,
    N_ENC,
    N_HEADS,
    PeerAdapter,
    count_trainable,
    eos_banned_argmax,
    smoothed_loss,
)

NAME = "opennmt-py"


def opennmt_opts():
    """OpenNMT-py model options for the reference model (what a YAML config would set)."""
    parser = ArgumentParser()
    onmt.opts.distributed_opts(parser)
    onmt.opts.model_opts(parser)
    onmt.opts._add_train_general_opts(parser)
    onmt.opts._add_quant_opts(parser)
    args = (
        f"-encoder_type transformer -decoder_type transformer -enc_layers {N_ENC} -dec_layers {N_DEC} "
        f"-hidden_size {D_MODEL} -word_vec_size {D_MODEL} -transformer_ff {D_FF} -heads {N_HEADS} "
        f"-dropout {DROPOUT} -attention_dropout 0.0 "
        "-position_encoding -position_encoding_type SinusoidalInterleaved "
        "-share_embeddings -share_decoder_embeddings "
        "-add_qkvbias -add_ffnbias "  # OpenNMT-py 3.x defaults to no biases
        "-pos_ffn_activation_fn relu -param_init 0 -param_init_glorot"
    ).split()
    opt, unknown = parser.parse_known_args(args)
    if unknown:
        raise ValueError(f"OpenNMT-py rejected options: {unknown}")
    ArgumentParser.update_model_opts(opt)
    ArgumentParser.validate_model_opts(opt)
    return opt


def build(vocab_size: int = 8000, pad_id: int = 0, bos_id: int = 1, eos_id: int = 2) -> PeerAdapter:
    """OpenNMT-py's NMTModel of the reference size, glorot-initialised as its model builder does."""
    opt = opennmt_opts()
    names = {pad_id: DefaultTokens.PAD, bos_id: DefaultTokens.BOS, eos_id: DefaultTokens.EOS}
    unk_id = next(i for i in range(vocab_size) if i not in names)
    names[unk_id] = DefaultTokens.UNK
    vocab = pyonmttok.build_vocab_from_tokens([names.get(i, f"t{i}") for i in range(vocab_size)])
    assert len(vocab) == vocab_size and vocab[DefaultTokens.PAD] == pad_id
    vocabs = {"src": vocab, "tgt": vocab, "data_task": "seq2seq", "decoder_start_token": DefaultTokens.BOS}
    model = build_base_model(opt, vocabs)
    # initialisation as onmt.model_builder.build_model does with -param_init 0 -param_init_glorot
    for module in model.modules():
        for pname, p in module.named_parameters(recurse=False):
            if pname == "weight" and p.dim() > 1:
                nn.init.xavier_uniform_(p)
            elif pname == "bias":
                nn.init.zeros_(p)
    model.float()
    model.train()
    emb = model.encoder.embeddings.word_lut.weight
    assert model.decoder.embeddings.word_lut.weight is emb and model.generator.weight is emb

    def _lengths(src: Tensor) -> Tensor:
        return src.ne(pad_id).sum(1)  # OpenNMT masks by length: pads must be at the end

    def train_step(src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> Tensor:
        model.train()
        # NMTModel.forward feeds tgt[:, :-1] to the decoder: tgt = bos + target (+ eos)
        tgt = torch.cat([tgt_in, tgt_out[:, -1:]], dim=1).unsqueeze(-1)
        dec_out, _ = model(src.unsqueeze(-1), tgt, _lengths(src))
        loss = smoothed_loss(model.generator(dec_out), tgt_out, pad_id)
        loss.backward()
        return loss.detach()

    @torch.inference_mode()
    def decode(src: Tensor, beam_size: int = 1, n_tokens: int = 30) -> Tensor:
        if beam_size != 1:
            raise NotImplementedError("OpenNMT-py beam search needs its Translator pipeline; greedy only")
        model.eval()
        src3 = src.unsqueeze(-1)
        src_len = _lengths(src)
        enc_out, enc_final, src_len = model.encoder(src3, src_len)
        model.decoder.init_state(src3, enc_out, enc_final)
        y = src.new_full((src.size(0), 1, 1), bos_id)
        out = []
        for step in range(n_tokens):  # step-wise decoding with OpenNMT's KV cache
            dec_out, _ = model.decoder(y, enc_out, src_len=src_len, step=step)
            nxt = eos_banned_argmax(model.generator(dec_out[:, -1]), eos_id)
            out.append(nxt)
            y = nxt.view(-1, 1, 1)
        return torch.stack(out, dim=1)

    notes = (
        f"OpenNMT-py {onmt.__version__} build_base_model() with transformer encoder/decoder, "
        "-share_embeddings -share_decoder_embeddings (one matrix), -position_encoding "
        "(SinusoidalInterleaved, embeddings * sqrt(d)), ReLU, -add_qkvbias -add_ffnbias (biases "
        "are off by default in 3.x), -attention_dropout 0, glorot init. Differences: OpenNMT-py "
        "3.5 is pre-norm only, with a final LayerNorm after the encoder and after the decoder "
        "(+1,024 params); its generator nn.Linear has a bias (+8,000 params); the FFN also "
        "drops its hidden layer; attention on CPU is its own matmul/softmax path (SDPA only on "
        "GPU). Training calls NMTModel.forward + generator + the shared loss (not its "
        "LossCompute). Decoding: a plain greedy loop over the decoder's step-wise API (KV cache), "
        "not onmt.translate.Translator; no beam adapter."
    )
    return PeerAdapter(
        name=NAME,
        version=onmt.__version__,
        model=model,
        n_params=count_trainable(model),
        notes=notes,
        train_step_fn=train_step,
        decode_fn=decode,
        decode_beams=(1,),
    )
