"""Peer: CTranslate2 (inference only) on the reference MarianMTModel, converted."""

from __future__ import annotations

import os
import tempfile

import ctranslate2
import torch
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import WhitespaceSplit
from torch import Tensor
from transformers import MarianMTModel, PreTrainedTokenizerFast

from .common import PeerAdapter, count_trainable
from .marian import build_marian_model, marian_config


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


def build(
    vocab_size: int = 8000,
    pad_id: int = 0,
    bos_id: int = 1,
    eos_id: int = 2,
    compute_type: str = "float32",
    marian_model=None,
    intra_threads: int | None = None,
) -> PeerAdapter:
    """CTranslate2 Translator on the reference Marian model (``marian_model``, or a fresh random one)."""
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

    def prepare(src: Tensor) -> list[list[str]]:
        """Token ids (B, S) -> the token strings CTranslate2 takes: a user's input, made before timing."""
        return [[tokens[i] for i in row if i != pad_id] for row in src.tolist()]

    def run(batch: list[list[str]], beam_size: int = 1, n_tokens: int = 30) -> list:
        """The timed call: one translate_batch over prepared tokens; results as CTranslate2 returns them."""
        return translator.translate_batch(
            batch,
            beam_size=beam_size,
            num_hypotheses=1,
            min_decoding_length=n_tokens,
            max_decoding_length=n_tokens,
            length_penalty=1.0,
            max_batch_size=0,
            return_scores=False,
        )

    def to_ids(results: list) -> Tensor:
        return torch.tensor(
            [[index[t] for t in r.hypotheses[0]] for r in results], dtype=torch.long
        )  # (B, n_tokens)

    def decode(src: Tensor, beam_size: int = 1, n_tokens: int = 30) -> Tensor:
        return to_ids(run(prepare(src), beam_size=beam_size, n_tokens=n_tokens))

    notes = (
        f"CTranslate2 {ctranslate2.__version__} Translator, compute_type={compute_type}, CPU, "
        f"inter_threads=1, intra_threads={threads}, converted with "
        "ctranslate2.converters.TransformersConverter from the reference MarianMTModel (same "
        "weights as given; a zero '<pad>' row is appended before conversion because the Marian "
        "converter drops the last vocabulary row). Inference only (no training). Decoder starts "
        "from a zero embedding (Marian). Token strings are prepared before the timed call, which is "
        "translate_batch alone (its users' fastest path). min_decoding_length=max_decoding_length=n_tokens. "
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
        extra={
            "tmpdir": tmp,
            "ct2_dir": ct2_dir,
            "tokens": tokens,
            "prepare": prepare,
            "run": run,
            "to_ids": to_ids,
        },
    )
