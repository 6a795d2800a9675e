"""Import a Hugging Face MarianMTModel folder (e.g. an OPUS-MT model) as an attnkit checkpoint.

Marian's ids are those of its ``vocab.json`` (often one vocabulary for both sides, with pad last and
eos 0), not its SentencePiece models' ids; attnkit's are the SentencePiece ids with pad 0, bos 1,
eos 2, unk 3. So each side's SentencePiece model is rewritten with the specials first
(``spm_vocab.reorder_pieces``) and the embedding rows are gathered in that order:

- source: every piece of source.spm, each taking the row vocab.json gives it (unk if none);
- target: every piece of target.spm, then every other piece of the target vocabulary (appended as
  UNUSED pieces: never produced by encoding, decoded as their text), so the softmax runs over the
  same tokens as Marian's and scores agree;
- attnkit bos (the decoder's first input) takes Marian's ``decoder_start_token_id`` row; pad takes
  Marian's pad row.

The D features are reordered from Marian's sine/cosine layout to attnkit's interleaved one (see
``huggingface.py``), sources get Marian's trailing ``</s>`` (``SubwordTokenizer(src_eos=True)``),
the FFN activation (relu, gelu, swish) and ``final_logits_bias`` come along.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ..data.tokenizer import SubwordTokenizer
from ..errors import CheckpointError
from ..model import TransformerConfig
from ..model.registry import arch_of
from .huggingface import HF_ACTIVATIONS, hf_name_table, marian_feature_order, residual_axis
from .marian_folder import check_pieces_in_vocab, marian_config, marian_weights, read_json, read_vocab
from .spm_vocab import SPECIAL_ROLES, reorder_pieces
from .weights import attnkit_state_dict

NO_TOKEN_BIAS = -1e4  # exp(-1e4) underflows to 0: the token drops out of the softmax


def _attnkit_config(
    hf_config, src_vocab: int, tgt_vocab: int, share: bool, output_bias: bool
) -> TransformerConfig:
    c = hf_config
    by_marian = {v: k for k, v in HF_ACTIVATIONS.items()} | {"silu": "swish", "gelu_new": None}
    activation = by_marian.get(c.activation_function)
    problems = []
    if activation is None:
        problems.append(f"activation {c.activation_function!r} (attnkit has relu, gelu, swish)")
    if not c.scale_embedding:
        problems.append("scale_embedding = false (attnkit scales embeddings by sqrt(d_model))")
    if c.encoder_attention_heads != c.decoder_attention_heads or c.encoder_ffn_dim != c.decoder_ffn_dim:
        problems.append("different encoder and decoder widths")
    if getattr(c, "normalize_before", False) or getattr(c, "add_final_layer_norm", False):
        problems.append("pre-norm layers")
    if problems:
        raise CheckpointError("this Marian model cannot be imported: " + "; ".join(problems))
    assert activation is not None  # else it is among the problems above
    return TransformerConfig(
        d_model=c.d_model,
        n_heads=c.encoder_attention_heads,
        d_ff=c.encoder_ffn_dim,
        dropout=float(c.dropout),
        attention_dropout=float(c.attention_dropout),
        activation=activation,
        norm="post",
        positional="sinusoidal",
        max_len=c.max_position_embeddings,
        bias=True,
        pad_id=0,
        src_vocab_size=src_vocab,
        tgt_vocab_size=tgt_vocab,
        n_encoder_layers=c.encoder_layers,
        n_decoder_layers=c.decoder_layers,
        share_vocab=share,
        tie_output=bool(c.tie_word_embeddings),
        output_bias=output_bias and bool(c.tie_word_embeddings),
        bos_id=1,
        eos_id=2,
    )


def _rows(pieces: list[str], vocab: dict[str, int], roles: dict[str, int]) -> Tensor:
    """Marian row of each attnkit id: the specials by role, the other pieces through vocab.json."""
    rows = [roles[r] for r in SPECIAL_ROLES]
    rows += [vocab.get(p, roles["unk"]) for p in pieces[len(SPECIAL_ROLES) :]]
    return torch.tensor(rows)


def _vocabularies(folder: Path, c, hf_state: dict[str, Tensor]):
    """(separate, source vocab, target vocab, SentencePiece protos, special ids, target special ids),
    each checked against the embeddings."""
    tok_config = (
        read_json(folder / "tokenizer_config.json") if (folder / "tokenizer_config.json").exists() else {}
    )
    separate = tok_config.get("separate_vocabs", False)
    unk = tok_config.get("unk_token", "<unk>")
    unk = unk.get("content", "<unk>") if isinstance(unk, dict) else unk
    if not isinstance(separate, bool) or not isinstance(unk, str):
        raise CheckpointError(
            f"{folder / 'tokenizer_config.json'}: separate_vocabs must be true or false and "
            "unk_token a string"
        )
    src_rows_n = hf_state["model.encoder.embed_tokens.weight"].shape[0]
    tgt_rows_n = hf_state["model.decoder.embed_tokens.weight"].shape[0]
    src_vocab = read_vocab(folder, "vocab.json", src_rows_n)
    tgt_vocab = read_vocab(folder, "target_vocab.json", tgt_rows_n) if separate else src_vocab
    if not separate and tgt_rows_n != src_rows_n:
        raise CheckpointError(
            f"{folder}: one vocab.json for {src_rows_n} source and {tgt_rows_n} target embedding rows"
        )
    protos = {}
    for side, name in (("src", "source.spm"), ("tgt", "target.spm")):
        if not (folder / name).is_file():
            raise CheckpointError(f"{folder}: not a MarianMTModel folder ({name} is missing)")
        protos[side] = (folder / name).read_bytes()
    if unk not in src_vocab or unk not in tgt_vocab:
        raise CheckpointError(f"{folder}: the vocabulary has no unknown token {unk!r}")
    start = c.decoder_start_token_id if c.decoder_start_token_id is not None else c.pad_token_id
    roles = {"pad": c.pad_token_id, "bos": start, "eos": c.eos_token_id, "unk": src_vocab[unk]}
    for role, row in roles.items():
        if row is None or row >= min(src_rows_n, tgt_rows_n):
            raise CheckpointError(
                f"{folder / 'config.json'}: the {role} id {row} is not a row of the embeddings "
                f"({min(src_rows_n, tgt_rows_n)})"
            )
    tgt_roles = {**roles, "unk": tgt_vocab[unk]}
    return separate, src_vocab, tgt_vocab, protos, roles, tgt_roles


def _logical_weights(folder: Path, c, hf_state, cfg, src_rows, tgt_rows, bias: Tensor) -> dict[str, Tensor]:
    """Marian's tensors under attnkit's logical names, features and vocabulary rows in attnkit's order."""
    order = torch.argsort(marian_feature_order(c.d_model))  # Marian features -> attnkit's
    logical: dict[str, Tensor] = {}
    for name, hf_name in hf_name_table(c.encoder_layers, c.decoder_layers):
        if hf_name not in hf_state:
            raise CheckpointError(f"{folder}: the Marian weights lack {hf_name!r}")
        axis = residual_axis(name)
        tensor = hf_state[hf_name].float()
        logical[name] = tensor if axis is None else tensor.index_select(axis, order)
    logical["src_embed"] = logical["src_embed"][src_rows]
    logical["tgt_embed"] = logical["tgt_embed"][tgt_rows]
    logical["output.weight"] = logical["output.weight"][tgt_rows]
    if not cfg.tie_output or cfg.output_bias:
        logical["output.bias"] = bias
    return logical


def import_marian(folder: str | Path) -> dict[str, Any]:
    """An attnkit checkpoint state (for ``save_checkpoint``) from a MarianMTModel folder."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CheckpointError(f"{folder}: not a folder")
    c = marian_config(folder)
    hf_state = marian_weights(folder, c)  # every tensor present, shaped and finite
    separate, src_vocab, tgt_vocab, protos, roles, tgt_roles = _vocabularies(folder, c, hf_state)

    src_proto, src_pieces = reorder_pieces(protos["src"])
    tgt_own = reorder_pieces(protos["tgt"])[1]
    check_pieces_in_vocab(folder / "source.spm", src_pieces[len(SPECIAL_ROLES) :], src_vocab, "vocab.json")
    tgt_vocab_name = "target_vocab.json" if separate else "vocab.json"
    check_pieces_in_vocab(folder / "target.spm", tgt_own[len(SPECIAL_ROLES) :], tgt_vocab, tgt_vocab_name)
    tgt_extra = [p for p, _ in sorted(tgt_vocab.items(), key=lambda kv: kv[1])]
    tgt_proto, tgt_pieces = reorder_pieces(protos["tgt"], tgt_extra)
    src_rows, tgt_rows = _rows(src_pieces, src_vocab, roles), _rows(tgt_pieces, tgt_vocab, tgt_roles)
    joint = src_proto == tgt_proto
    share = joint and bool(c.share_encoder_decoder_embeddings)

    bias = hf_state["final_logits_bias"][0].float()[tgt_rows]  # (V_tgt,)
    # Target ids Marian has no token for: unmapped pieces, and bos when it shares the pad row (Marian
    # starts decoding from pad). Their logits are pushed to -1e4 so that the softmax runs over
    # Marian's tokens exactly once each (attnkit never generates pad or bos anyway).
    unmapped = [i for i, p in enumerate(tgt_pieces) if i >= len(SPECIAL_ROLES) and p not in tgt_vocab]
    if roles["bos"] == roles["pad"]:
        unmapped.append(SPECIAL_ROLES.index("bos"))
    bias[unmapped] = NO_TOKEN_BIAS
    cfg = _attnkit_config(c, len(src_pieces), len(tgt_pieces), share, bool(bias.abs().max() > 0))
    logical = _logical_weights(folder, c, hf_state, cfg, src_rows, tgt_rows, bias)

    source_eos = (getattr(c, "attnkit", None) or {}).get("source_eos", True)  # Marian sources end with </s>
    tokenizer = SubwordTokenizer(src_proto, None if joint else tgt_proto, src_eos=bool(source_eos))
    return {
        "arch": arch_of(cfg),
        "model_config": cfg.to_dict(),
        "tokenizer": tokenizer.state_dict(),
        "experiment": {
            "data": {"corpus": "imported"},
            "imported_from": {"format": "huggingface", "path": str(folder)},
        },
        "model": attnkit_state_dict(logical, cfg),
    }
