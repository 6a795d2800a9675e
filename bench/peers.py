"""Equal-work peer models for attnkit's speed benchmark.

Every builder returns a :class:`PeerAdapter` for the same small Transformer ("the reference"):
d_model 256, 4 heads, FFN 1024, 3 encoder + 3 decoder layers, one shared vocabulary of 8000,
dropout 0.1 (embeddings and sublayer outputs), tied embeddings (source = target = output
projection), ReLU, post-norm, sinusoidal positions. Each adapter's ``notes`` says honestly
where the peer's model differs from that.

Every peer's training adapter computes the same loss on the peer's logits: token-level cross
entropy with label smoothing 0.1, pad ignored, summed and divided by the number of non-pad target
tokens, through PyTorch's ``F.cross_entropy(label_smoothing=0.1)``. That is what OpenNMT-py 3.5's
loss calls, and as fast as or faster than HF's ``LabelSmoother`` (log-softmax, gather, sum) and
JoeyNMT's ``XentLoss`` (KL divergence to a materialized smoothed distribution), so no peer is
slowed by its loss. attnkit uses its own ``label_smoothed_cross_entropy`` (the same value, with
the gradient written out; tests compare both against ``F.cross_entropy``).

Decoding adapters (``decode_fn``) all produce exactly ``n_tokens`` tokens per sentence (EOS is
forbidden until then), so every peer does equal work whatever the random weights predict.

The peers are optional: a builder raises ImportError when its package is missing, and
:func:`available_builders` lists the ones that import. Install them with the ``bench`` extra
(bench/PEERS.md has the exact pip commands).
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

D_MODEL = 256
N_HEADS = 4
D_FF = 1024
N_ENC = 3
N_DEC = 3
DROPOUT = 0.1
LABEL_SMOOTHING = 0.1
MAX_LEN = 512

TrainStepFn = Callable[[Tensor, Tensor, Tensor], Tensor]
DecodeFn = Callable[..., Tensor]


@dataclass
class PeerAdapter:
    """A peer's model behind one interface.

    train_step_fn(src (B,S), tgt_in (B,T), tgt_out (B,T)) -> detached loss: sets train mode, runs
    forward + loss + backward (no optimizer step, no zero_grad). None for inference-only peers.
    decode_fn(src (B,S), beam_size=1, n_tokens=30) -> LongTensor (B, n_tokens), in eval mode
    without gradients; beam sizes it supports are in ``decode_beams``.
    """

    name: str
    version: str
    model: Any
    n_params: int
    notes: str
    train_step_fn: TrainStepFn | None = None
    decode_fn: DecodeFn | None = None
    decode_beams: tuple[int, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def parameters(self):
        """Trainable parameters for the optimizer the benchmark adds (empty for inference-only)."""
        if isinstance(self.model, nn.Module):
            return [p for p in self.model.parameters() if p.requires_grad]
        return []


def count_trainable(model: nn.Module) -> int:
    """Parameters that require grad; ``Module.parameters()`` yields a shared tensor once."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def smoothed_loss(logits: Tensor, tgt_out: Tensor, pad_id: int, epsilon: float = LABEL_SMOOTHING) -> Tensor:
    """Mean over non-pad target tokens of label-smoothed cross entropy (the value attnkit computes)."""
    logits = logits.reshape(-1, logits.size(-1)).float()
    target = tgt_out.reshape(-1)
    loss = F.cross_entropy(logits, target, ignore_index=pad_id, label_smoothing=epsilon, reduction="sum")
    return loss / (target != pad_id).sum().clamp(min=1)


def _sinusoidal(max_len: int, d_model: int) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...) (paper section 3.5)."""
    pos = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe


def _eos_banned_argmax(logits: Tensor, eos_id: int) -> Tensor:
    logits = logits.clone()
    logits[:, eos_id] = float("-inf")
    return logits.argmax(-1)


# --------------------------------------------------------------------------------------------
# torch.nn.Transformer
# --------------------------------------------------------------------------------------------


class TorchNNSeq2Seq(nn.Module):
    """torch.nn.Transformer (post-norm, no final encoder/decoder norms) + tied embeddings + sinusoidal PE."""

    def __init__(self, vocab_size: int, pad_id: int):
        super().__init__()
        self.pad_id = pad_id
        self.embed = nn.Embedding(vocab_size, D_MODEL, padding_idx=pad_id)
        self.register_buffer("pe", _sinusoidal(MAX_LEN, D_MODEL), persistent=False)
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


def build_torch(vocab_size: int = 8000, pad_id: int = 0, bos_id: int = 1, eos_id: int = 2) -> PeerAdapter:
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
            ys = torch.cat([ys, _eos_banned_argmax(logits, eos_id).unsqueeze(1)], dim=1)
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
        name="torch.nn.Transformer",
        version=torch.__version__,
        model=model,
        n_params=count_trainable(model),
        notes=notes,
        train_step_fn=train_step,
        decode_fn=decode,
        decode_beams=(1,),
    )


# --------------------------------------------------------------------------------------------
# Hugging Face transformers: MarianMTModel
# --------------------------------------------------------------------------------------------


def marian_config(vocab_size: int = 8000, pad_id: int = 0, bos_id: int = 1, eos_id: int = 2, **overrides):
    """The reference model as a MarianConfig (Marian = post-norm, sinusoidal, all linear biases)."""
    from transformers import MarianConfig

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
    from transformers import MarianMTModel

    if seed is not None:
        torch.manual_seed(seed)
    return MarianMTModel(marian_config(vocab_size, pad_id, bos_id, eos_id))


def build_hf_marian(
    vocab_size: int = 8000, pad_id: int = 0, bos_id: int = 1, eos_id: int = 2, model=None
) -> PeerAdapter:
    """``model``: a MarianMTModel to wrap (e.g. another size from ``marian_config(**overrides)``);
    by default a fresh random one of the reference size."""
    import transformers
    from transformers import GenerationConfig

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
        name="transformers-marian",
        version=transformers.__version__,
        model=model,
        n_params=count_trainable(model),
        notes=notes,
        train_step_fn=train_step,
        decode_fn=decode,
        decode_beams=(1, 4),
    )


# --------------------------------------------------------------------------------------------
# CTranslate2 (inference only), on the same Marian model converted
# --------------------------------------------------------------------------------------------


def _ct2_token(i: int, pad_id: int, bos_id: int, eos_id: int, unk_id: int) -> str:
    if i == pad_id:
        return "<blank>"
    if i == bos_id:
        return "<s>"
    if i == eos_id:
        return "</s>"
    if i == unk_id:
        return "<unk>"
    return f"t{i}"


def export_marian_for_ct2(
    model, out_dir: str, pad_id: int = 0, bos_id: int = 1, eos_id: int = 2
) -> list[str]:
    """Save ``model`` (a MarianMTModel) as a Hugging Face folder that CTranslate2's converter reads.

    CTranslate2's Marian loader expects the Marian layout: "<pad>" is the *last* vocabulary entry and
    its row is dropped (the decoder starts from a zero embedding instead). So the saved copy has
    vocab_size + 1 rows, the extra last row a zero "<pad>"; after conversion the CTranslate2 model
    has exactly the original vocab_size entries and the same weights. A word-level tokenizer with
    the matching vocabulary is saved beside it (the converter reads the vocabulary from it).
    Returns the token strings of ids 0 .. vocab_size-1.
    """
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import MarianMTModel, PreTrainedTokenizerFast

    cfg = model.config
    V = cfg.vocab_size
    unk_id = next(i for i in range(V) if i not in (pad_id, bos_id, eos_id))
    tokens = [_ct2_token(i, pad_id, bos_id, eos_id, unk_id) for i in range(V)]

    big_cfg = marian_config(V + 1, pad_id, bos_id, eos_id, pad_token_id=V, decoder_start_token_id=V)
    big = MarianMTModel(big_cfg)
    src_state = model.state_dict()
    with torch.no_grad():
        for name, p in big.state_dict().items():
            q = src_state[name]
            if q.shape == p.shape:
                p.copy_(q)
            elif p.dim() >= 1 and p.shape[0] == V + 1 and q.shape[0] == V:  # embeddings
                p[:V].copy_(q)
                p[V:].zero_()
            elif p.dim() == 2 and p.shape[1] == V + 1 and q.shape[1] == V:  # final_logits_bias
                p[:, :V].copy_(q)
                p[:, V:].zero_()
            else:
                raise ValueError(f"cannot copy {name}: {tuple(q.shape)} -> {tuple(p.shape)}")
    big.save_pretrained(out_dir)

    vocab = {t: i for i, t in enumerate(tokens + ["<pad>"])}
    tok = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", eos_token="</s>", bos_token="<s>", pad_token="<pad>"
    )
    fast.save_pretrained(out_dir)
    return tokens


def build_ctranslate2(
    vocab_size: int = 8000,
    pad_id: int = 0,
    bos_id: int = 1,
    eos_id: int = 2,
    compute_type: str = "float32",
    marian_model=None,
    intra_threads: int | None = None,
) -> PeerAdapter:
    """CTranslate2 Translator on the reference Marian model (``marian_model``, or a fresh random one)."""
    import ctranslate2

    if marian_model is None:
        marian_model = build_marian_model(vocab_size, pad_id, bos_id, eos_id)
    n_params = count_trainable(marian_model)
    tmp = tempfile.TemporaryDirectory(prefix="attnkit-ct2-")
    hf_dir = os.path.join(tmp.name, "hf")
    ct2_dir = os.path.join(tmp.name, "ct2")
    tokens = export_marian_for_ct2(marian_model, hf_dir, pad_id, bos_id, eos_id)
    ctranslate2.converters.TransformersConverter(hf_dir).convert(ct2_dir, force=True)
    threads = intra_threads or torch.get_num_threads()
    translator = ctranslate2.Translator(
        ct2_dir, device="cpu", compute_type=compute_type, inter_threads=1, intra_threads=threads
    )
    index = {t: i for i, t in enumerate(tokens)}

    def decode(src: Tensor, beam_size: int = 1, n_tokens: int = 30) -> Tensor:
        batch = [[tokens[i] for i in row if i != pad_id] for row in src.tolist()]
        results = translator.translate_batch(
            batch,
            beam_size=beam_size,
            num_hypotheses=1,
            min_decoding_length=n_tokens,
            max_decoding_length=n_tokens,
            length_penalty=1.0,
            max_batch_size=0,
            return_scores=False,
        )
        return torch.tensor([[index[t] for t in r.hypotheses[0]] for r in results], dtype=torch.long)

    notes = (
        f"CTranslate2 {ctranslate2.__version__} Translator, compute_type={compute_type}, CPU, "
        f"inter_threads=1, intra_threads={threads}, converted with "
        "ctranslate2.converters.TransformersConverter from the reference MarianMTModel (same "
        "weights as given; a zero '<pad>' row is appended before conversion because the Marian "
        "converter drops the last vocabulary row). Inference only (no training). Decoder starts "
        "from a zero embedding (Marian). Token ids are passed as strings (id <-> string mapping "
        "is part of the timed call). min_decoding_length=max_decoding_length=n_tokens. "
        + (
            "int8: weights quantized to int8 at load time, so outputs differ slightly from float32."
            if "int8" in compute_type
            else ""
        )
    )
    return PeerAdapter(
        name=f"ctranslate2-{compute_type}",
        version=ctranslate2.__version__,
        model=translator,
        n_params=n_params,
        notes=notes,
        train_step_fn=None,
        decode_fn=decode,
        decode_beams=(1, 4),
        extra={"tmpdir": tmp, "ct2_dir": ct2_dir, "tokens": tokens},
    )


# --------------------------------------------------------------------------------------------
# JoeyNMT
# --------------------------------------------------------------------------------------------


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


def build_joeynmt(vocab_size: int = 8000, pad_id: int = 0, bos_id: int = 1, eos_id: int = 2) -> PeerAdapter:
    """JoeyNMT's Transformer. JoeyNMT's vocabulary always puts <unk>, <pad>, <s>, </s> at ids 0-3,
    so the adapter maps the benchmark's ids onto JoeyNMT's with one index lookup (and back)."""
    from types import SimpleNamespace

    import joeynmt
    from joeynmt.model import build_model
    from joeynmt.search import beam_search, transformer_greedy
    from joeynmt.vocabulary import Vocabulary

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
        name="joeynmt",
        version=joeynmt.__version__,
        model=model,
        n_params=count_trainable(model),
        notes=notes,
        train_step_fn=train_step,
        decode_fn=decode,
        decode_beams=(1, 4),
    )


# --------------------------------------------------------------------------------------------
# OpenNMT-py
# --------------------------------------------------------------------------------------------


def opennmt_opts():
    """OpenNMT-py model options for the reference model (what a YAML config would set)."""
    import onmt.opts
    from onmt.utils.parse import ArgumentParser

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


def build_opennmt(vocab_size: int = 8000, pad_id: int = 0, bos_id: int = 1, eos_id: int = 2) -> PeerAdapter:
    import onmt
    import pyonmttok
    from onmt.constants import DefaultTokens
    from onmt.model_builder import build_base_model

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
            nxt = _eos_banned_argmax(model.generator(dec_out[:, -1]), eos_id)
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
        name="opennmt-py",
        version=onmt.__version__,
        model=model,
        n_params=count_trainable(model),
        notes=notes,
        train_step_fn=train_step,
        decode_fn=decode,
        decode_beams=(1,),
    )


BUILDERS: dict[str, Callable[..., PeerAdapter]] = {
    "torch": build_torch,
    "transformers": build_hf_marian,
    "joeynmt": build_joeynmt,
    "opennmt": build_opennmt,
    "ctranslate2": build_ctranslate2,
}
_MODULES = {
    "torch": "torch",
    "transformers": "transformers",
    "joeynmt": "joeynmt",
    "opennmt": "onmt",
    "ctranslate2": "ctranslate2",
}


def available_builders() -> dict[str, Callable[..., PeerAdapter]]:
    """The builders whose package can be found (without importing it)."""
    import importlib.util

    found = {}
    for key, builder in BUILDERS.items():
        mods = [_MODULES[key]] + (["transformers"] if key == "ctranslate2" else [])
        if all(importlib.util.find_spec(m) is not None for m in mods):
            found[key] = builder
    return found
